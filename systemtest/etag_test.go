package systemtest

import (
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

// Revalidation (contract 6.11): an answer without errors carries an ETag and Cache-Control:
// private, no-cache; the same question with If-None-Match gets 304 and no body while the data has
// not changed, over POST and GET; after a change (NOTIFY) a 200 with another ETag; an answer with
// errors carries no ETag.
func TestETagRevalidation(t *testing.T) {
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": "3600"})
	waitCacheLive(t, svc)
	const q = `{ records_count { count } }`
	first := gql(t, svc, "/graphql", q, nil)
	tag := first.header.Get("ETag")
	if first.status != http.StatusOK || tag == "" || first.header.Get("Cache-Control") != "private, no-cache" {
		t.Fatalf("first answer: HTTP %d, ETag %q, Cache-Control %q", first.status, tag, first.header.Get("Cache-Control"))
	}
	if again := gql(t, svc, "/graphql", q, nil); again.header.Get("ETag") != tag {
		t.Errorf("the same answer again (%s): ETag %q, want %q", again.cacheStatus(), again.header.Get("ETag"), tag)
	}
	body := `{"query":"` + q + `"}`
	notModified := postRaw(t, svc, "/graphql", body, map[string]string{"If-None-Match": tag})
	if notModified.status != http.StatusNotModified || len(notModified.body) != 0 || notModified.header.Get("ETag") != tag {
		t.Errorf("If-None-Match %s over POST: HTTP %d, %d bytes, ETag %q; want 304, none, the same", tag, notModified.status, len(notModified.body), notModified.header.Get("ETag"))
	}
	resp, raw := svc.Get(t, "/graphql?"+url.Values{"query": {q}}.Encode(), map[string]string{svc.Header: svc.Key})
	getTag := resp.Header.Get("ETag")
	if resp.StatusCode != http.StatusOK || getTag == "" {
		t.Fatalf("GET: HTTP %d, ETag %q: %s", resp.StatusCode, getTag, raw)
	}
	resp, raw = svc.Get(t, "/graphql?"+url.Values{"query": {q}}.Encode(), map[string]string{svc.Header: svc.Key, "If-None-Match": `"other", ` + getTag})
	if resp.StatusCode != http.StatusNotModified || len(raw) != 0 {
		t.Errorf("If-None-Match over GET: HTTP %d, %d bytes; want 304, none", resp.StatusCode, len(raw))
	}

	// A change, announced: the old ETag no longer matches.
	if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (920001, '2024-03-10 12:00', 2, 'North Harbour')`); err != nil {
		t.Fatal(err)
	}
	notified := strings.Count(svc.Output(), "cache: notification received")
	if _, err := pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
		t.Fatal(err)
	}
	servicetest.WaitFor(t, 10*time.Second, "notification logged", func() bool {
		return strings.Count(svc.Output(), "cache: notification received") > notified
	})
	changed := postRaw(t, svc, "/graphql", body, map[string]string{"If-None-Match": tag})
	if changed.status != http.StatusOK || changed.header.Get("ETag") == "" || changed.header.Get("ETag") == tag || changed.cacheStatus() != answercache.StatusMiss {
		t.Errorf("after the change: HTTP %d, ETag %q (was %q), Cache-Status %q; want 200, a new one, computed", changed.status, changed.header.Get("ETag"), tag, changed.cacheStatus())
	}

	// An answer with errors: no ETag, and If-None-Match of anything gives the answer again.
	bad := gql(t, svc, "/graphql", `{ distinct_values(columns: ["nope"], start_date: "2024-01-01", end_date: "2024-12-31") { value } }`, nil)
	if bad.header.Get("ETag") != "" || !strings.Contains(string(bad.body), `"errors"`) {
		t.Errorf("an answer with errors: ETag %q: %.200s", bad.header.Get("ETag"), bad.body)
	}
}

// If-None-Match: * asks, on a GET, whether the client holds any current answer (304, as a
// matching ETag does); on a POST it is no revalidation (RFC 9110: a failed condition there is
// never 304), so the query is answered as without the header: 200, the data, its ETag.
func TestIfNoneMatchStarOnPost(t *testing.T) {
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": "3600"})
	waitCacheLive(t, svc)
	want := expectedCount(t, db)
	const q = `{ records_count { count } }`
	body := `{"query":"` + q + `"}`
	tag := gql(t, svc, "/graphql", q, nil).header.Get("ETag")
	if tag == "" {
		t.Fatal("the answer has no ETag")
	}
	for _, inm := range []string{"*", `"other", *`, `W/"other" , *`} {
		a := postRaw(t, svc, "/graphql", body, map[string]string{"If-None-Match": inm})
		var d struct {
			Data struct {
				RecordsCount struct{ Count int64 } `json:"records_count"`
			}
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &d) != nil || d.Data.RecordsCount.Count != want || a.header.Get("ETag") != tag {
			t.Errorf("POST with If-None-Match %s: HTTP %d, ETag %q: %.300s; want 200 with the count %d and ETag %s", inm, a.status, a.header.Get("ETag"), a.body, want, tag)
		}
	}
	// A POST naming the ETag is still a revalidation.
	if a := postRaw(t, svc, "/graphql", body, map[string]string{"If-None-Match": tag}); a.status != http.StatusNotModified {
		t.Errorf("POST with If-None-Match %s: HTTP %d, want 304", tag, a.status)
	}
	// A GET's * matches the current answer, as before.
	resp, raw := svc.Get(t, "/graphql?"+url.Values{"query": {q}}.Encode(), map[string]string{svc.Header: svc.Key, "If-None-Match": "*"})
	if resp.StatusCode != http.StatusNotModified || len(raw) != 0 {
		t.Errorf("GET with If-None-Match *: HTTP %d, %d bytes; want 304, none", resp.StatusCode, len(raw))
	}
}
