package systemtest

// Answers from memory (contract 6.5), outside-in: the real binary over HTTP against real
// PostgreSQL. What the Cache-Status header says, which answers are kept, that a kept reply is
// byte for byte the computed one, and that the cache can be turned off. Freshness, coalescing
// and the memory bound are in cache_fresh_test.go and cache_load_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/answercache"
)

// reply is one HTTP answer of a GraphQL endpoint.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (a reply) cacheStatus() string { return a.header.Get(answercache.HeaderCacheStatus) }

// postRaw posts body as it is to path with the key and extra headers.
func postRaw(t *testing.T, svc *servicetest.Service, path, body string, headers map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(svc.Header, svc.Key)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, raw := svc.Do(t, req)
	return reply{resp.StatusCode, resp.Header, raw}
}

// gql posts a query with variables to path with the key.
func gql(t *testing.T, svc *servicetest.Service, path, query string, vars map[string]any) reply {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	return postRaw(t, svc, path, string(body), nil)
}

// gqlGet sends a query as a GET with the key.
func gqlGet(t *testing.T, svc *servicetest.Service, path, query string) reply {
	t.Helper()
	resp, raw := svc.Get(t, path+"?"+url.Values{"query": {query}}.Encode(), map[string]string{svc.Header: svc.Key})
	return reply{resp.StatusCode, resp.Header, raw}
}

// waitCacheLive waits until the service has read the data version once, so that answers are
// kept (a query that needs no database is cacheable too).
func waitCacheLive(t *testing.T, svc *servicetest.Service) {
	t.Helper()
	servicetest.WaitFor(t, 15*time.Second, "reply kept (Cache-Status other than bypass)", func() bool {
		return gql(t, svc, "/graphql", `{ __typename }`, nil).cacheStatus() != answercache.StatusBypass
	})
}

// wantStatus checks an reply's HTTP status and Cache-Status.
func wantStatus(t *testing.T, what string, a reply, status int, cacheStatus string) {
	t.Helper()
	if a.status != status || a.cacheStatus() != cacheStatus {
		t.Errorf("%s: HTTP %d, Cache-Status %q; want %d, %q\n%.500s", what, a.status, a.cacheStatus(), status, cacheStatus, a.body)
	}
}

// sameAnswer checks that two answers have the same status, Content-Type and body, byte for byte.
func sameAnswer(t *testing.T, what string, got, want reply) {
	t.Helper()
	if got.status != want.status || got.header.Get("Content-Type") != want.header.Get("Content-Type") || !bytes.Equal(got.body, want.body) {
		t.Errorf("%s: got HTTP %d %q (%d bytes), want HTTP %d %q (%d bytes)\n got: %.300s\nwant: %.300s", what,
			got.status, got.header.Get("Content-Type"), len(got.body), want.status, want.header.Get("Content-Type"), len(want.body), got.body, want.body)
	}
}

func TestCacheStatusAndWhatIsKept(t *testing.T) {
	db := servicetest.FixtureDB(t)
	// A long bound: nothing but the test's own changes could start a new data version.
	svc := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": "600"})
	waitCacheLive(t, svc)

	const count = `query Count($s: String) { records_count(station: $s) { count } }`
	first := gql(t, svc, "/graphql", count, map[string]any{"s": "Central"})
	wantStatus(t, "first request", first, http.StatusOK, answercache.StatusMiss)
	second := gql(t, svc, "/graphql", count, map[string]any{"s": "Central"})
	wantStatus(t, "the same request again", second, http.StatusOK, answercache.StatusHit)
	sameAnswer(t, "reply from memory", second, first)
	var want int64
	if err := db.Pool(t).QueryRow(context.Background(), "SELECT count(*) FROM fact_record WHERE station = 'Central'").Scan(&want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(second.body, []byte(`"count":`+jsonNumber(want))) {
		t.Errorf("reply %s, want count %d", second.body, want)
	}
	if second.header.Get("X-Request-ID") == first.header.Get("X-Request-ID") {
		t.Error("an reply from memory repeats the request id of the request that computed it")
	}

	// The same values written otherwise are the same question; other values another one.
	same := postRaw(t, svc, "/graphql", `{ "variables": { "s": "Centr\u0061l" }, "operationName": null, "query": "query Count($s: String) { records_count(station: $s) { count } }" }`, nil)
	wantStatus(t, "the same question written otherwise", same, http.StatusOK, answercache.StatusHit)
	wantStatus(t, "other variables", gql(t, svc, "/graphql", count, map[string]any{"s": "North Harbour"}), http.StatusOK, answercache.StatusMiss)
	// Another endpoint, method or Accept is another reply.
	wantStatus(t, "GET", gqlGet(t, svc, "/graphql", `{ records_count { count } }`), http.StatusOK, answercache.StatusMiss)
	wantStatus(t, "GET again", gqlGet(t, svc, "/graphql", `{ records_count { count } }`), http.StatusOK, answercache.StatusHit)
	wantStatus(t, "POST of the GET's query", gql(t, svc, "/graphql", `{ records_count { count } }`, nil), http.StatusOK, answercache.StatusMiss)
	gr := map[string]string{"Accept": "application/graphql-response+json"}
	a := postRaw(t, svc, "/graphql", `{"query":"{ records_count { count } }"}`, gr)
	wantStatus(t, "other Accept", a, http.StatusOK, answercache.StatusMiss)
	b := postRaw(t, svc, "/graphql", `{"query":"{ records_count { count } }"}`, gr)
	wantStatus(t, "other Accept again", b, http.StatusOK, answercache.StatusHit)
	if ct := b.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/graphql-response+json") {
		t.Errorf("Content-Type from memory %q, want the one the client accepts", ct)
	}
	wantStatus(t, "lookups", gql(t, svc, "/lookups/graphql", `{ urgencies }`, nil), http.StatusOK, answercache.StatusMiss)
	wantStatus(t, "lookups again", gql(t, svc, "/lookups/graphql", `{ urgencies }`, nil), http.StatusOK, answercache.StatusHit)

	// Errors are never kept: a field error, a document that does not validate, a request the
	// service refuses, no key.
	bad := `{ distinct_values(columns: ["nope"], start_date: "2024-03-01", end_date: "2024-03-31") { column value } }`
	for i := range 2 {
		wantStatus(t, "field error", gql(t, svc, "/graphql", bad, nil), http.StatusOK, answercache.StatusBypass)
		wantStatus(t, "field error beside data", gql(t, svc, "/graphql", `{ records_count { count } `+bad[1:], nil), http.StatusOK, answercache.StatusBypass)
		wantStatus(t, "invalid document", gql(t, svc, "/graphql", `{ no_such_field }`, nil), http.StatusUnprocessableEntity, answercache.StatusBypass)
		wantStatus(t, "not JSON", postRaw(t, svc, "/graphql", `{"query":`, nil), http.StatusBadRequest, answercache.StatusBypass)
		_ = i
	}
	r := svc.GraphQLWithHeaders(t, "/graphql", `{ records_count { count } }`, nil, nil)
	if r.Status != http.StatusUnauthorized || r.Header.Get(answercache.HeaderCacheStatus) != answercache.StatusBypass {
		t.Errorf("no key: HTTP %d, Cache-Status %q; want 401 and bypass", r.Status, r.Header.Get(answercache.HeaderCacheStatus))
	}
	// Browsers may read the header (CORS).
	cors := postRaw(t, svc, "/graphql", `{"query":"{ records_count { count } }"}`, map[string]string{"Origin": "http://localhost:3000"})
	if !strings.Contains(cors.header.Get("Access-Control-Expose-Headers"), answercache.HeaderCacheStatus) {
		t.Errorf("Access-Control-Expose-Headers %q does not list Cache-Status", cors.header.Get("Access-Control-Expose-Headers"))
	}
	// The export is never kept.
	resp, body := svc.Get(t, "/v1/reports/main-report/export?start_date=2024-03-01&end_date=2024-03-31",
		map[string]string{svc.Header: svc.Key, "SERVICE-X-API-KEY": svc.Key})
	if resp.StatusCode != http.StatusOK || resp.Header.Get(answercache.HeaderCacheStatus) != "" {
		t.Errorf("export: HTTP %d, Cache-Status %q; want 200 and none: %.200s", resp.StatusCode, resp.Header.Get(answercache.HeaderCacheStatus), body)
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// With CACHE__ENABLED=false nothing is kept: every reply is computed, and shows a change at once.
func TestCacheOffKeepsNothing(t *testing.T) {
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{"CACHE__ENABLED": "false"})
	for range 3 {
		wantStatus(t, "caching off", gql(t, svc, "/graphql", recordsCountQuery, nil), http.StatusOK, answercache.StatusBypass)
		wantStatus(t, "caching off, no database", gql(t, svc, "/graphql", `{ __typename }`, nil), http.StatusOK, answercache.StatusBypass)
	}
	if _, err := db.Pool(t).Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at) VALUES (900001, '2024-03-10')`); err != nil {
		t.Fatal(err)
	}
	r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	if got, want := countOf(t, r), expectedCount(t, db); got != want {
		t.Errorf("count right after an insert %d, want %d", got, want)
	}
	servicetest.WaitFor(t, 5*time.Second, "the start-up line that says the cache is off", func() bool {
		return strings.Contains(svc.Output(), "cache: off")
	})
}
