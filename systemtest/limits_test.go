package systemtest

// Outside-in tests of the limits and of bad input: the real binary, real HTTP, a real
// PostgreSQL. Whatever a client sends, the service answers with a clear status and error code
// and stays healthy.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// request is one HTTP request of a test table.
type request struct {
	method, path string
	headers      map[string]string
	body         []byte
}

// answer is what the service said: the status, and the code and message of the error body
// (GraphQL errors[0] or the REST error), when there is one.
type answer struct {
	status        int
	code, message string
	data          json.RawMessage
	raw           []byte
}

// ask sends r to svc (with the key unless r sets the key header itself) and decodes the
// error body.
func ask(t *testing.T, svc *servicetest.Service, r request) answer {
	t.Helper()
	req, err := http.NewRequest(r.method, svc.URL+r.path, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.body == nil {
		req.Body = http.NoBody
	}
	req.Header.Set(svc.Header, svc.Key)
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", r.method, r.path, err)
	}
	a := answer{status: resp.StatusCode, raw: raw}
	var body struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
		Error *struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Errorf("%s %s: the answer (%d) is not JSON: %v\n%.300s", r.method, r.path, resp.StatusCode, err, raw)
		return a
	}
	a.data = body.Data
	switch {
	case len(body.Errors) > 0:
		a.code, _ = body.Errors[0].Extensions["code"].(string)
		a.message = body.Errors[0].Message
	case body.Error != nil:
		a.code, a.message = body.Error.Code, body.Error.Message
	}
	return a
}

// gqlPost is a POST of a GraphQL request body (query and variables) to path.
func gqlPost(path, query string, vars map[string]any) request {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return request{method: http.MethodPost, path: path, headers: map[string]string{"Content-Type": "application/json"}, body: body}
}

func rawPostRequest(path, contentType string, body []byte) request {
	h := map[string]string{}
	if contentType != "" {
		h["Content-Type"] = contentType
	}
	return request{method: http.MethodPost, path: path, headers: h, body: body}
}

// aliases is a query of n aliased copies of one root field.
func aliases(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, " a%d: records_count { count }", i)
	}
	return b.String() + " }"
}

// ofTypeQuery is an introspection query of depth n+3: __schema, queryType, n ofType, name.
func ofTypeQuery(n int) string {
	return "{ __schema { queryType { " + strings.Repeat("ofType { ", n) + "name" + strings.Repeat(" }", n) + " } } }"
}

func filtersVar(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"column": "age", "operator": "GREATER_THAN", "value": fmt.Sprint(i)}
	}
	return out
}

func columns(n int) []string {
	names := []string{"station", "age", "gender", "callsign"}
	out := make([]string, n)
	for i := range out {
		out[i] = names[i%len(names)]
	}
	return out
}

const distinctValuesQuery = `query($columns: [String!]!, $filters: [Filter!]) {
  distinct_values(columns: $columns, start_date: "2024-01-01", end_date: "2024-12-31", filters: $filters) { column value }
}`

const mainReportLimitQuery = `query($limit: Int, $filters: [Filter!]) {
  main_report(start_date: "2024-01-01", end_date: "2024-12-31", limit: $limit, filters: $filters) { total rows { record_id } }
}`

// TestBadInput sends what odd clients send, one request after the other to one service, and
// checks each answer's status and error code; then the service must still be healthy and
// answer a normal query.
func TestBadInput(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, nil)
	json := map[string]string{"Content-Type": "application/json"}
	tenMB := append(append([]byte(`{"query":"{ records_count { count } }","pad":"`), bytes.Repeat([]byte("x"), 10<<20)...), `"}`...)
	exportFilters := url.Values{"start_date": {"2024-01-01"}, "end_date": {"2024-12-31"}}
	for i := 0; i < 51; i++ {
		exportFilters.Add("filter", fmt.Sprintf("age:GREATER_THAN:%d", i))
	}

	for _, tc := range []struct {
		name    string
		req     request
		status  int
		code    string
		mention string // in the error message
	}{
		// The HTTP request itself.
		{"invalid JSON", rawPostRequest("/graphql", "application/json", []byte(`{"query": "{ records_count { count } }"`)), 400, "BAD_USER_INPUT", "not valid JSON"},
		{"not JSON at all", rawPostRequest("/graphql", "application/json", []byte(`query=records_count`)), 400, "BAD_USER_INPUT", "not JSON"},
		{"JSON after the object", rawPostRequest("/graphql", "application/json", []byte(`{"query": "{ records_count { count } }"} {}`)), 400, "BAD_USER_INPUT", "more after"},
		{"empty body", rawPostRequest("/graphql", "application/json", nil), 400, "BAD_USER_INPUT", "empty"},
		{"white space only", rawPostRequest("/graphql", "application/json", []byte(" \n ")), 400, "BAD_USER_INPUT", "empty"},
		{"a batch (JSON array)", rawPostRequest("/graphql", "application/json", []byte(`[{"query": "{ records_count { count } }"}]`)), 400, "BAD_USER_INPUT", "batches"},
		{"query is a number", rawPostRequest("/graphql", "application/json", []byte(`{"query": 5}`)), 400, "BAD_USER_INPUT", "query must be a string"},
		{"variables is a string", rawPostRequest("/graphql", "application/json", []byte(`{"query": "{ records_count { count } }", "variables": "{}"}`)), 400, "BAD_USER_INPUT", "variables must be a JSON object"},
		{"wrong content type", rawPostRequest("/graphql", "text/plain", []byte(`{"query": "{ records_count { count } }"}`)), 415, "BAD_USER_INPUT", "application/json"},
		{"form content type", rawPostRequest("/graphql", "application/x-www-form-urlencoded", []byte(`query=%7B%7D`)), 415, "BAD_USER_INPUT", "application/json"},
		{"no content type", rawPostRequest("/graphql", "", []byte(`{"query": "{ records_count { count } }"}`)), 415, "BAD_USER_INPUT", "Content-Type"},
		{"compressed body", request{method: http.MethodPost, path: "/graphql", headers: map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, body: []byte{0x1f, 0x8b, 8, 0}}, 415, "BAD_USER_INPUT", "Content-Encoding"},
		{"PUT", request{method: http.MethodPut, path: "/graphql", headers: json, body: []byte(`{"query": "{ records_count { count } }"}`)}, 405, "BAD_USER_INPUT", "POST"},
		{"GET with variables that are not JSON", request{method: http.MethodGet, path: "/graphql?query=" + url.QueryEscape(distinctValuesQuery) + "&variables=%7Bnope", headers: map[string]string{"Accept": "application/json"}}, 400, "BAD_USER_INPUT", "variables"},
		{"a 10 MB body", rawPostRequest("/graphql", "application/json", tenMB), 413, "PAYLOAD_TOO_LARGE", "APP__MAX_BODY_BYTES"},

		// The GraphQL document.
		{"a syntax error", gqlPost("/graphql", `{ records_count { count }`, nil), 422, "GRAPHQL_PARSE_FAILED", ""},
		{"a query nested 100 deep", gqlPost("/graphql", ofTypeQuery(97), nil), 422, "BAD_USER_INPUT", "LIMITS__MAX_QUERY_DEPTH=15"},
		{"depth 16", gqlPost("/graphql", ofTypeQuery(13), nil), 422, "BAD_USER_INPUT", "query depth 16 exceeds LIMITS__MAX_QUERY_DEPTH=15"},
		{"depth 16, graphql-response+json", func() request {
			r := gqlPost("/graphql", ofTypeQuery(13), nil)
			r.headers["Accept"] = "application/graphql-response+json"
			return r
		}(), 400, "BAD_USER_INPUT", "LIMITS__MAX_QUERY_DEPTH"},
		{"1,500 aliases", gqlPost("/graphql", aliases(1500), nil), 422, "BAD_USER_INPUT", "LIMITS__MAX_QUERY_COMPLEXITY=1000"},
		{"10,000 aliases", gqlPost("/graphql", aliases(10000), nil), 422, "BAD_USER_INPUT", "more than 10000 tokens"},
		{"91 root fields", gqlPost("/graphql", aliases(91), nil), 422, "BAD_USER_INPUT", "query complexity 1001 exceeds LIMITS__MAX_QUERY_COMPLEXITY=1000"},
		{"400 copies of one field", gqlPost("/graphql", "{"+strings.Repeat(" records_count { count }", 400)+" }", nil), 422, "BAD_USER_INPUT", "selected more than 20 times"},
		{"unknown operator enum", gqlPost("/graphql", `{ distinct_values(columns: ["age"], start_date: "2024-01-01", end_date: "2024-12-31", filters: [{column: "age", operator: LIKE, value: "1"}]) { value } }`, nil), 422, "GRAPHQL_VALIDATION_FAILED", "LIKE"},
		{"unknown operator enum in variables", gqlPost("/graphql", distinctValuesQuery, map[string]any{"columns": []string{"age"}, "filters": []map[string]any{{"column": "age", "operator": "LIKE", "value": "1"}}}), 422, "GRAPHQL_VALIDATION_FAILED", "LIKE"},

		// The arguments.
		{"1,000 columns", gqlPost("/graphql", distinctValuesQuery, map[string]any{"columns": columns(1000)}), 200, "BAD_USER_INPUT", "1000 columns exceed LIMITS__MAX_COLUMNS=20"},
		{"51 filters", gqlPost("/graphql", distinctValuesQuery, map[string]any{"columns": []string{"age"}, "filters": filtersVar(51)}), 200, "BAD_USER_INPUT", "51 filters exceed LIMITS__MAX_FILTERS=50"},
		{"main_report page of 1,001", gqlPost("/serve/graphql", mainReportLimitQuery, map[string]any{"limit": 1001}), 200, "BAD_USER_INPUT", "1001 rows exceed LIMITS__MAX_PAGE_SIZE=1000"},
		{"main_report with 51 filters", gqlPost("/serve/graphql", mainReportLimitQuery, map[string]any{"filters": filtersVar(51)}), 200, "BAD_USER_INPUT", "LIMITS__MAX_FILTERS=50"},
		{"export with 51 filters", request{method: http.MethodGet, path: "/v1/reports/main-report/export?" + exportFilters.Encode(), headers: map[string]string{"SERVICE-X-API-KEY": svc.Key}}, 400, "BAD_USER_INPUT", "LIMITS__MAX_FILTERS=50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			a := ask(t, svc, tc.req)
			if a.status != tc.status || a.code != tc.code || !strings.Contains(a.message, tc.mention) {
				t.Errorf("status %d, code %q, message %q; want %d %s mentioning %q\n%.300s", a.status, a.code, a.message, tc.status, tc.code, tc.mention, a.raw)
			}
			if a.status >= 400 && len(a.data) > 0 && string(a.data) != "null" {
				t.Errorf("a refused request has data: %s", a.data)
			}
			if tc.status == 200 && !strings.Contains(string(a.data), "null") {
				t.Errorf("the refused field is not null: %s", a.data)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}

	// Still healthy, and a normal query works.
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	if got, want := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)), expectedCount(t, db); got != want {
		t.Errorf("records_count = %d after the bad input, want %d", got, want)
	}
	if strings.Contains(svc.Output(), "panic") {
		t.Errorf("the service log has a panic:\n%s", svc.Output())
	}
}

// TestIntrospectionWithinLimits: the standard introspection query (GraphiQL's schema fetch)
// passes the default limits on every endpoint.
func TestIntrospectionWithinLimits(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, servicetest.NewDB(t), nil)
	query, err := os.ReadFile("../platform/gqlexec/testdata/introspection.graphql") // graphql-js 16's introspection query, kept once
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/graphql", "/serve/graphql", "/lookups/graphql"} {
		r := svc.GraphQL(t, path, string(query), nil)
		var d struct {
			Schema struct {
				Types []struct{ Name string } `json:"types"`
			} `json:"__schema"`
		}
		r.DataInto(t, &d)
		if r.Status != http.StatusOK || len(d.Schema.Types) == 0 {
			t.Errorf("%s: status %d, %d types", path, r.Status, len(d.Schema.Types))
		}
	}
}

// TestLimitsFollowSettings: every limit is its setting; refusals name the configured value, and
// what is within them works.
func TestLimitsFollowSettings(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, servicetest.FixtureDB(t), map[string]string{
		"LIMITS__MAX_QUERY_DEPTH":      "4",
		"LIMITS__MAX_QUERY_COMPLEXITY": "30",
		"LIMITS__MAX_COLUMNS":          "2",
		"LIMITS__MAX_FILTERS":          "1",
		"LIMITS__MAX_PAGE_SIZE":        "5",
		"APP__MAX_BODY_BYTES":          "4096",
	})
	for _, tc := range []struct {
		name    string
		req     request
		status  int
		code    string
		mention string
	}{
		{"depth 4", gqlPost("/graphql", ofTypeQuery(1), nil), 200, "", ""},
		{"depth 5", gqlPost("/graphql", ofTypeQuery(2), nil), 422, "BAD_USER_INPUT", "query depth 5 exceeds LIMITS__MAX_QUERY_DEPTH=4"},
		{"complexity 22", gqlPost("/graphql", aliases(2), nil), 200, "", ""},
		{"complexity 33", gqlPost("/graphql", aliases(3), nil), 422, "BAD_USER_INPUT", "query complexity 33 exceeds LIMITS__MAX_QUERY_COMPLEXITY=30"},
		{"2 columns", gqlPost("/graphql", distinctValuesQuery, map[string]any{"columns": columns(2)}), 200, "", ""},
		{"3 columns", gqlPost("/graphql", distinctValuesQuery, map[string]any{"columns": columns(3)}), 200, "BAD_USER_INPUT", "3 columns exceed LIMITS__MAX_COLUMNS=2"},
		{"1 filter", gqlPost("/graphql", distinctValuesQuery, map[string]any{"columns": columns(1), "filters": filtersVar(1)}), 200, "", ""},
		{"2 filters", gqlPost("/graphql", distinctValuesQuery, map[string]any{"columns": columns(1), "filters": filtersVar(2)}), 200, "BAD_USER_INPUT", "2 filters exceed LIMITS__MAX_FILTERS=1"},
		{"page of 5", gqlPost("/serve/graphql", mainReportLimitQuery, map[string]any{"limit": 5}), 200, "", ""},
		{"page of 6", gqlPost("/serve/graphql", mainReportLimitQuery, map[string]any{"limit": 6}), 200, "BAD_USER_INPUT", "6 rows exceed LIMITS__MAX_PAGE_SIZE=5"},
		{"body of 5000 bytes", rawPostRequest("/graphql", "application/json", []byte(`{"query":"{ records_count { count } }","pad":"`+strings.Repeat("x", 5000)+`"}`)), 413, "PAYLOAD_TOO_LARGE", "APP__MAX_BODY_BYTES"},
	} {
		a := ask(t, svc, tc.req)
		if a.status != tc.status || a.code != tc.code || !strings.Contains(a.message, tc.mention) {
			t.Errorf("%s: status %d, code %q, message %q; want %d %q mentioning %q\n%.300s", tc.name, a.status, a.code, a.message, tc.status, tc.code, tc.mention, a.raw)
		}
	}
}

// apqRequest is a POST whose persistedQuery extension carries hash; query may be empty.
func apqRequest(path, query, hash string, version int) request {
	body := map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": version, "sha256Hash": hash}}}
	if query != "" {
		body["query"] = query
	}
	b, _ := json.Marshal(body)
	return request{method: http.MethodPost, path: path, headers: map[string]string{"Content-Type": "application/json"}, body: b}
}

// apqGet is the same as a GET with the extension as a query parameter.
func apqGet(path, hash string) request {
	ext := fmt.Sprintf(`{"persistedQuery":{"version":1,"sha256Hash":%q}}`, hash)
	return request{method: http.MethodGet, path: path + "?extensions=" + url.QueryEscape(ext), headers: map[string]string{"Accept": "application/json"}}
}

func sha256Hex(s string) string {
	b := sha256.Sum256([]byte(s))
	return hex.EncodeToString(b[:])
}

// TestAutomaticPersistedQueries: Apollo's protocol. A hash alone is PERSISTED_QUERY_NOT_FOUND
// until the client sends the query with its hash; from then on the hash alone runs the query,
// by POST and by GET. A hash that does not match its query is refused, and a persisted query
// is still subject to the limits.
func TestAutomaticPersistedQueries(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, nil)
	want := expectedCount(t, db)
	query := `query PersistedCount { records_count { count } }`
	hash := sha256Hex(query)
	count := func(a answer) int64 {
		t.Helper()
		var d struct {
			RecordsCount struct{ Count int64 } `json:"records_count"`
		}
		if a.status != http.StatusOK || a.code != "" || json.Unmarshal(a.data, &d) != nil {
			t.Fatalf("status %d, code %q: %s", a.status, a.code, a.raw)
		}
		return d.RecordsCount.Count
	}

	for name, r := range map[string]request{"POST": apqRequest("/graphql", "", hash, 1), "GET": apqGet("/graphql", hash)} {
		a := ask(t, svc, r)
		if a.status != http.StatusOK || a.code != "PERSISTED_QUERY_NOT_FOUND" || a.message != "PersistedQueryNotFound" {
			t.Errorf("%s: an unknown hash: status %d, code %q, message %q; want 200 PERSISTED_QUERY_NOT_FOUND", name, a.status, a.code, a.message)
		}
	}
	if got := count(ask(t, svc, apqRequest("/graphql", query, hash, 1))); got != want {
		t.Errorf("query with its hash: count %d, want %d", got, want)
	}
	for i := 0; i < 2; i++ {
		if got := count(ask(t, svc, apqRequest("/graphql", "", hash, 1))); got != want {
			t.Errorf("hash alone by POST: count %d, want %d", got, want)
		}
		if got := count(ask(t, svc, apqGet("/graphql", hash))); got != want {
			t.Errorf("hash alone by GET: count %d, want %d", got, want)
		}
	}
	// Each endpoint keeps its own persisted queries (they are of its own schema).
	if a := ask(t, svc, apqRequest("/serve/graphql", "", hash, 1)); a.code != "PERSISTED_QUERY_NOT_FOUND" {
		t.Errorf("/serve/graphql knows /graphql's persisted query: %s", a.raw)
	}

	for _, tc := range []struct {
		name    string
		req     request
		mention string
	}{
		{"a hash that does not match the query", apqRequest("/graphql", query, sha256Hex(query+" "), 1), "does not match"},
		{"a hash of another query", apqRequest("/graphql", `{ resources { sk_resource } }`, hash, 1), "does not match"},
		{"an unsupported version", apqRequest("/graphql", query, hash, 2), "version"},
	} {
		a := ask(t, svc, tc.req)
		if a.status != 422 || a.code != "BAD_USER_INPUT" || !strings.Contains(a.message, tc.mention) {
			t.Errorf("%s: status %d, code %q, message %q; want 422 BAD_USER_INPUT mentioning %q", tc.name, a.status, a.code, a.message, tc.mention)
		}
	}
	// The refused requests did not replace the persisted query.
	if got := count(ask(t, svc, apqRequest("/graphql", "", hash, 1))); got != want {
		t.Errorf("hash alone after the refusals: count %d, want %d", got, want)
	}

	// A persisted query over the limits is refused, whether sent in full or by its hash.
	deep := ofTypeQuery(13)
	for _, r := range []request{apqRequest("/graphql", deep, sha256Hex(deep), 1), apqRequest("/graphql", "", sha256Hex(deep), 1), apqGet("/graphql", sha256Hex(deep))} {
		if a := ask(t, svc, r); a.status != 422 || a.code != "BAD_USER_INPUT" || !strings.Contains(a.message, "LIMITS__MAX_QUERY_DEPTH") {
			t.Errorf("persisted query over the depth limit: status %d, code %q, message %q", a.status, a.code, a.message)
		}
	}
}
