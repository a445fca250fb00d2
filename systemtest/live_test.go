package systemtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// Live answers (contract 6.11), from outside: subscriptions over Server-Sent Events, real HTTP,
// real PostgreSQL. The right answers are computed by SQL here.

// sseEvent is one event of a stream: its name ("next", "complete") and data, or a comment.
type sseEvent struct {
	name, data string
	comment    bool
	at         time.Time
}

// sseStream is an open subscription: its events as they arrive, then the error that ended it
// (io.EOF: the body ended whole).
type sseStream struct {
	resp   *http.Response
	events chan sseEvent
	ended  chan error
	cancel context.CancelFunc
}

// subscribe POSTs a subscription with Accept: text/event-stream and, on 200, reads its events.
// A refusal comes back with its body.
func subscribe(t *testing.T, svc *servicetest.Service, path, query, key string) (*sseStream, []byte) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"query": query})
	return subscribeBody(t, svc, path, b, key)
}

// subscribeBody is subscribe with the request's JSON body as given (variables included).
func subscribeBody(t *testing.T, svc *servicetest.Service, path string, b []byte, key string) (*sseStream, []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, svc.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(svc.Header, key)
	// A client of its own per stream: each stream is a connection.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &sseStream{resp: resp, events: make(chan sseEvent, 1000), ended: make(chan error, 1), cancel: cancel}
	t.Cleanup(s.close)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		s.close()
		return s, body
	}
	go s.read()
	return s, nil
}

func (s *sseStream) close() {
	s.cancel()
	_ = s.resp.Body.Close()
}

// read parses the event stream (the WHATWG rules the graphql-sse protocol uses: fields up to a
// blank line; a line starting with ':' is a comment).
func (s *sseStream) read() {
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name != "" || len(data) > 0 {
				ev.data, ev.at = strings.Join(data, "\n"), time.Now()
				s.events <- ev
			}
			ev, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
			s.events <- sseEvent{comment: true, at: time.Now()}
		case strings.HasPrefix(line, "event:"):
			ev.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	err := sc.Err()
	if err == nil {
		err = io.EOF
	}
	s.ended <- err
}

// next waits up to d for the stream's next event other than a comment, counting the comments
// seen on the way; ok is false when none came (or the stream ended: see ended).
func (s *sseStream) next(d time.Duration) (ev sseEvent, comments int, ok bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev := <-s.events:
			if ev.comment {
				comments++
				continue
			}
			return ev, comments, true
		case <-timer.C:
			return sseEvent{}, comments, false
		}
	}
}

// endedWithin waits up to d for the stream's body to end, and returns how (io.EOF: whole).
func (s *sseStream) endedWithin(d time.Duration) (error, bool) {
	select {
	case err := <-s.ended:
		return err, true
	case <-time.After(d):
		return nil, false
	}
}

// open is subscribe for a stream that must be accepted: it returns the stream and its first
// answer.
func open(t *testing.T, svc *servicetest.Service, path, query, key string) (*sseStream, sseEvent) {
	t.Helper()
	s, refused := subscribe(t, svc, path, query, key)
	if refused != nil {
		t.Fatalf("%s %s refused: HTTP %d %s", path, query, s.resp.StatusCode, refused)
	}
	ev, _, ok := s.next(30 * time.Second)
	if !ok {
		t.Fatalf("%s %s: no first answer", path, query)
	}
	return s, ev
}

// wantComplete checks that the stream's next event is complete and that its body then ends
// whole, within d each.
func (s *sseStream) wantComplete(t *testing.T, what string, d time.Duration) {
	t.Helper()
	if ev, _, ok := s.next(d); !ok || ev.name != "complete" {
		t.Errorf("%s: then %v %q %.200s; want complete", what, ok, ev.name, ev.data)
	}
	if err, ok := s.endedWithin(d); !ok || err != io.EOF {
		t.Errorf("%s: the body ended %v (%v); want whole", what, ok, err)
	}
}

// liveCountOf is the records_count of a next event.
func liveCountOf(t *testing.T, ev sseEvent) int64 {
	t.Helper()
	var r struct {
		Data struct {
			RecordsCount struct{ Count int64 } `json:"records_count"`
		}
		Errors []json.RawMessage
	}
	if ev.name != "next" || json.Unmarshal([]byte(ev.data), &r) != nil || len(r.Errors) > 0 {
		t.Fatalf("want a next event with records_count, got %q: %s", ev.name, ev.data)
	}
	return r.Data.RecordsCount.Count
}

func sqlCount(t *testing.T, db servicetest.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM fact_record`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const liveCount = `subscription { records_count { count } }`

// TestLiveAnswerFollowsTheData: the current answer first; then nothing but heartbeats while
// nothing changes, for longer than CACHE__MAX_STALENESS and than the idle, read and write
// timeouts (a healthy stream is not cut by them); an UPDATE that leaves the answer as it was
// is recomputed and sends nothing; an INSERT is sent within CACHE__MAX_STALENESS.
func TestLiveAnswerFollowsTheData(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	env, target, _ := prometheusEnv(t, 0)
	env["CACHE__MAX_STALENESS"] = "2"
	env["APP__STREAM_HEARTBEAT"] = "0.5"
	env["APP__IDLE_TIMEOUT"] = "1"
	env["APP__READ_TIMEOUT"] = "1"
	env["APP__WRITE_TIMEOUT"] = "1"
	svc := servicetest.Start(t, db, env)
	waitCacheLive(t, svc)

	s, ev := open(t, svc, "/graphql", liveCount, svc.Key)
	if ct := s.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q", ct)
	}
	if got, want := liveCountOf(t, ev), sqlCount(t, db); got != want {
		t.Fatalf("first answer %d, SQL says %d", got, want)
	}

	// Quiet for 3 s: heartbeats only.
	ev, comments, ok := s.next(3 * time.Second)
	if ok {
		t.Fatalf("an event while nothing changed: %q %s", ev.name, ev.data)
	}
	if comments < 3 {
		t.Errorf("%d heartbeats in 3 s with APP__STREAM_HEARTBEAT=0.5", comments)
	}

	// An UPDATE that changes no answer: recomputed (the data version moved), not sent.
	before := scrapeValue(t, target, "emsquery_streams_recomputations_total")
	if _, err := pool.Exec(context.Background(), `UPDATE fact_record SET station = station WHERE record_id = (SELECT min(record_id) FROM fact_record)`); err != nil {
		t.Fatal(err)
	}
	servicetest.WaitFor(t, 10*time.Second, "the answer recomputed after the UPDATE", func() bool {
		return scrapeValue(t, target, "emsquery_streams_recomputations_total") > before
	})
	if ev, _, ok := s.next(time.Second); ok {
		t.Fatalf("an unchanged answer was sent again: %q %s", ev.name, ev.data)
	}

	// An INSERT: the new answer within CACHE__MAX_STALENESS (2 s; 2 s more for a busy machine).
	inserted := time.Now()
	if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (930001, '2024-03-10 12:00', 2, 'North Harbour')`); err != nil {
		t.Fatal(err)
	}
	ev, _, ok = s.next(10 * time.Second)
	if !ok {
		t.Fatal("no answer after the INSERT")
	}
	if took := ev.at.Sub(inserted); took > 4*time.Second {
		t.Errorf("the new answer came %s after the INSERT; CACHE__MAX_STALENESS is 2 s", took)
	}
	if got, want := liveCountOf(t, ev), sqlCount(t, db); got != want {
		t.Fatalf("answer after the INSERT %d, SQL says %d", got, want)
	}
	if n := scrapeValue(t, target, "emsquery_streams_open"); n != 1 {
		t.Errorf("emsquery_streams_open %v, want 1", n)
	}
	if n := scrapeValue(t, target, "emsquery_streams_pushes_total"); n != 2 {
		t.Errorf("emsquery_streams_pushes_total %v, want 2 (the first answer, the INSERT's)", n)
	}
}

// TestLiveAnswerAfterNotify: with a staleness bound of an hour, a NOTIFY after a load sends the
// new answer at once.
func TestLiveAnswerAfterNotify(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": "3600"})
	waitCacheLive(t, svc)
	s, ev := open(t, svc, "/graphql", liveCount, svc.Key)
	first := liveCountOf(t, ev)
	if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (930002, '2024-03-10 12:00', 2, 'North Harbour')`); err != nil {
		t.Fatal(err)
	}
	if ev, _, ok := s.next(2 * time.Second); ok {
		t.Fatalf("an answer before the NOTIFY, with an hour's staleness: %s", ev.data)
	}
	notified := time.Now()
	if _, err := pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
		t.Fatal(err)
	}
	ev, _, ok := s.next(10 * time.Second)
	if !ok {
		t.Fatal("no answer after the NOTIFY")
	}
	// At once: a busy machine's scheduling aside, an hour before the next poll.
	if took := ev.at.Sub(notified); took > 2*time.Second {
		t.Errorf("the new answer came %s after the NOTIFY", took)
	}
	if got, want := liveCountOf(t, ev), sqlCount(t, db); got != want || got != first+1 {
		t.Errorf("answer after the NOTIFY %d (first %d), SQL says %d", got, first, want)
	}
}

// TestLiveOneExecutionPerChange: 50 streams on one question run its statement once per data
// change (the service's own statement metric), and all get each answer.
func TestLiveOneExecutionPerChange(t *testing.T) {
	t.Parallel()
	const streams = 50
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	env, target, _ := prometheusEnv(t, 0)
	env["CACHE__MAX_STALENESS"] = "3600"
	svc := servicetest.Start(t, db, env)
	waitCacheLive(t, svc)
	before := scrapeOperations(t, target)
	var all []*sseStream
	for range streams {
		s, refused := subscribe(t, svc, "/graphql", `subscription Board { records_count(station: "North Harbour") { count } }`, svc.Key)
		if refused != nil {
			t.Fatalf("refused: HTTP %d %s", s.resp.StatusCode, refused)
		}
		all = append(all, s)
	}
	for i, s := range all {
		if _, _, ok := s.next(10 * time.Second); !ok {
			t.Fatalf("stream %d: no first answer", i)
		}
	}
	if got := scrapeOperations(t, target).minus(before); got["records count"] != 1 {
		t.Errorf("statements for %d streams' first answers: %v; want one records count", streams, got)
	}
	for change := 1; change <= 2; change++ {
		before = scrapeOperations(t, target)
		if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES ($1, '2024-03-10 12:00', 2, 'North Harbour')`, 930100+change); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
			t.Fatal(err)
		}
		for i, s := range all {
			ev, _, ok := s.next(10 * time.Second)
			if !ok {
				t.Fatalf("change %d, stream %d: no answer", change, i)
			}
			if !strings.Contains(ev.data, `"count":`) {
				t.Fatalf("change %d, stream %d: %s", change, i, ev.data)
			}
		}
		if got := scrapeOperations(t, target).minus(before); got["records count"] != 1 {
			t.Errorf("change %d: statements %v; want one records count for %d streams", change, got, streams)
		}
	}
}

// TestLiveBounds: the key and its scope are checked when the stream starts (403 before any
// event); LIMITS__MAX_STREAMS and a key's max_streams refuse with 429; a key revoked in the keys
// file ends its streams within 5 s (an UNAUTHENTICATED answer, then complete).
func TestLiveBounds(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	board := newTestKey("board", "graphql")
	board.entry.MaxStreams = 2
	board.entry.MaxInFlight = 1 // a stream does not count in max_in_flight
	reporting := newTestKey("reporting", "serve")
	writeKeysFile(t, keysFile, board, reporting)
	svc := servicetest.Start(t, db, map[string]string{
		"AUTHENTICATION__API_KEYS_FILE": keysFile,
		"LIMITS__MAX_STREAMS":           "3",
	})
	waitCacheLive(t, svc)

	s, body := subscribe(t, svc, "/graphql", liveCount, reporting.secret)
	if s.resp.StatusCode != http.StatusForbidden || errorCode(t, body, true) != "FORBIDDEN" {
		t.Errorf("a key without the graphql scope: HTTP %d %s", s.resp.StatusCode, body)
	}
	first, body := subscribe(t, svc, "/graphql", liveCount, board.secret)
	if body != nil {
		t.Fatalf("board's first stream: HTTP %d %s", first.resp.StatusCode, body)
	}
	second, body := subscribe(t, svc, "/graphql", `subscription { station_resources { station_id } }`, board.secret)
	if body != nil {
		t.Fatalf("board's second stream (max_in_flight 1 does not count streams): HTTP %d %s", second.resp.StatusCode, body)
	}
	third, body := subscribe(t, svc, "/graphql", liveCount, board.secret)
	if third.resp.StatusCode != http.StatusTooManyRequests || errorCode(t, body, true) != "RATE_LIMITED" || !strings.Contains(string(body), "max_streams") {
		t.Errorf("board's third stream, over its max_streams 2: HTTP %d %s", third.resp.StatusCode, body)
	}
	other, body := subscribe(t, svc, "/serve/graphql", `subscription { main_report_summary(start_date: "2024-01-01", end_date: "2024-12-31") { records } }`, reporting.secret)
	if body != nil {
		t.Fatalf("the third stream of the service: HTTP %d %s", other.resp.StatusCode, body)
	}
	fourth, body := subscribe(t, svc, "/graphql", liveCount, svc.Key)
	if fourth.resp.StatusCode != http.StatusTooManyRequests || errorCode(t, body, true) != "RATE_LIMITED" || !strings.Contains(string(body), "LIMITS__MAX_STREAMS") {
		t.Errorf("a fourth stream, over LIMITS__MAX_STREAMS 3: HTTP %d %s", fourth.resp.StatusCode, body)
	}
	for _, s := range []*sseStream{first, second, other} {
		if _, _, ok := s.next(10 * time.Second); !ok {
			t.Fatal("no first answer")
		}
	}
	// While streams are open, queries of the same key are served.
	if r := svc.GraphQLWithHeaders(t, "/graphql", `{ records_count { count } }`, nil, map[string]string{svc.Header: board.secret}); r.Status != http.StatusOK || len(r.Errors) > 0 {
		t.Errorf("board's query beside its streams: %d %s", r.Status, r.Raw)
	}

	// board revoked: its streams end within 5 s; reporting's goes on.
	writeKeysFile(t, keysFile, reporting)
	revoked := time.Now()
	for i, s := range []*sseStream{first, second} {
		ev, _, ok := s.next(5 * time.Second)
		if !ok || ev.name != "next" || !strings.Contains(ev.data, "UNAUTHENTICATED") {
			t.Fatalf("stream %d of the revoked key: %v %q %s", i, ok, ev.name, ev.data)
		}
		s.wantComplete(t, fmt.Sprintf("stream %d of the revoked key", i), time.Second)
	}
	if took := time.Since(revoked); took > 5*time.Second {
		t.Errorf("the revoked key's streams ended %s after the file changed", took)
	}
	if _, ok := other.endedWithin(time.Second); ok {
		t.Error("the other key's stream ended")
	}
	// Their places are free again.
	again, body := subscribe(t, svc, "/graphql", liveCount, svc.Key)
	if body != nil {
		t.Fatalf("a stream after two ended: HTTP %d %s", again.resp.StatusCode, body)
	}
	full, body := subscribe(t, svc, "/graphql", liveCount, svc.Key)
	if body != nil {
		t.Fatalf("the third stream again: HTTP %d %s", full.resp.StatusCode, body)
	}
	// A client that leaves frees its place within a couple of seconds, long before a heartbeat
	// (15 s) would have found it gone.
	for _, s := range []*sseStream{again, full} {
		if _, _, ok := s.next(10 * time.Second); !ok {
			t.Fatal("no first answer")
		}
	}
	full.close()
	left := time.Now()
	servicetest.WaitFor(t, 5*time.Second, "a place after a client left", func() bool {
		s, body := subscribe(t, svc, "/graphql", liveCount, svc.Key)
		if body == nil {
			s.close()
		}
		return body == nil
	})
	if took := time.Since(left); took > 3*time.Second {
		t.Errorf("a client's place was free %s after it left", took)
	}
}

// TestLiveShutdown: SIGTERM ends every stream with complete, then the service exits 0.
func TestLiveShutdown(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, nil)
	waitCacheLive(t, svc)
	s, _ := open(t, svc, "/graphql", liveCount, svc.Key)
	stopped := time.Now()
	svc.Signal(syscall.SIGTERM)
	s.wantComplete(t, "after SIGTERM", 5*time.Second)
	code, err := svc.Wait(15 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("exit %d (%v); want 0", code, err)
	}
	// Not held until APP__SHUTDOWN_TIMEOUT (10 s here) by a stream that would never end.
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("the service took %s to stop with a stream open", took)
	}
}

// TestLiveProtocol: what is and is not a stream. A query accepting text/event-stream among
// other types gets JSON; a subscription without it is refused (406); one whose arguments its
// resolver refuses gets its errors and complete; a document that does not
// validate is refused as a query is; the Subscription fields are exactly the contract's, each
// with its query's arguments; without the answer cache, streams are refused (503); an answer
// past the feeds' memory bound is RESULT_TOO_LARGE.
func TestLiveProtocol(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, nil)
	waitCacheLive(t, svc)

	r := postRaw(t, svc, "/graphql", `{"query":"{ records_count { count } }"}`, map[string]string{"Accept": "text/event-stream, application/json"})
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || !strings.Contains(string(r.body), `"records_count"`) {
		t.Errorf("a query accepting text/event-stream and JSON: HTTP %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	r = postRaw(t, svc, "/graphql", `{"query":"`+liveCount+`"}`, nil)
	if r.status != http.StatusNotAcceptable || !strings.Contains(string(r.body), "text/event-stream") {
		t.Errorf("a subscription as JSON: HTTP %d %s", r.status, r.body)
	}
	// A client that accepts only an event stream gets every answer as one: a document that does
	// not validate, and a query, as a next event then complete (graphql-sse's distinct
	// connections mode); with JSON among its types, the errors as a query's.
	for _, c := range []struct{ path, query, want string }{
		{"/graphql", `subscription { records_count { nope } }`, `"GRAPHQL_VALIDATION_FAILED"`},
		{"/lookups/graphql", `subscription { x }`, `does not support operation type`},
		{"/graphql", `subscription { a: records_count { count } b: station_resources { station_id } }`, `must select only one top level field`},
		{"/graphql", `{ records_count { count } }`, `{"data":{"records_count":{"count":` + strconv.FormatInt(sqlCount(t, db), 10) + `}}}`},
	} {
		s, body := subscribe(t, svc, c.path, c.query, svc.Key)
		if body != nil {
			t.Errorf("%s %s: HTTP %d %s; want an event stream", c.path, c.query, s.resp.StatusCode, body)
			continue
		}
		ev, _, ok := s.next(10 * time.Second)
		if !ok || ev.name != "next" || !strings.Contains(ev.data, c.want) {
			t.Errorf("%s %s: %v %q %s; want a next event with %s", c.path, c.query, ok, ev.name, ev.data, c.want)
		}
		s.wantComplete(t, c.path+" "+c.query, 5*time.Second)
	}
	r = postRaw(t, svc, "/graphql", `{"query":"subscription { records_count { nope } }"}`, map[string]string{"Accept": "text/event-stream, application/json"})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "GRAPHQL_VALIDATION_FAILED") {
		t.Errorf("a subscription that does not validate, JSON accepted: HTTP %d %s", r.status, r.body)
	}
	// A question no data change can mend (an unknown column): its errors, then complete.
	s, ev := open(t, svc, "/graphql", `subscription { distinct_values(columns: ["nope"], start_date: "2024-01-01", end_date: "2024-12-31") { value } }`, svc.Key)
	if ev.name != "next" || !strings.Contains(ev.data, `"BAD_USER_INPUT"`) {
		t.Errorf("an unknown column: %q %s; want a next with BAD_USER_INPUT", ev.name, ev.data)
	}
	s.wantComplete(t, "an unknown column", 5*time.Second)

	const fields = `{ __schema { queryType { fields { name args { name type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } defaultValue } type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } }
		subscriptionType { fields { name args { name type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } defaultValue } type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } }`
	type field struct {
		Name string
		Args json.RawMessage
		Type json.RawMessage
	}
	var schema struct {
		Schema struct {
			QueryType, SubscriptionType struct{ Fields []field }
		} `json:"__schema"`
	}
	for path, want := range map[string][]string{
		"/graphql": {"distinct_values", "unique_counts", "records_count", "record_series", "record_stats", "station_resources",
			"interval_stats", "demand_grid", "period_comparison", "unit_hour_utilization"},
		"/serve/graphql": {"main_report_summary"},
	} {
		svc.GraphQL(t, path, fields, nil).DataInto(t, &schema)
		queries := map[string]field{}
		for _, f := range schema.Schema.QueryType.Fields {
			queries[f.Name] = f
		}
		var got []string
		for _, f := range schema.Schema.SubscriptionType.Fields {
			got = append(got, f.Name)
			q, ok := queries[f.Name]
			if !ok || string(q.Args) != string(f.Args) || string(q.Type) != string(f.Type) {
				t.Errorf("%s: subscription %s: args %s type %s; the query's: args %s type %s", path, f.Name, f.Args, f.Type, q.Args, q.Type)
			}
		}
		if strings.Join(sorted(got), ",") != strings.Join(sorted(want), ",") {
			t.Errorf("%s: subscription fields %v, want %v", path, got, want)
		}
	}

	off := servicetest.Start(t, db, map[string]string{"CACHE__ENABLED": "false"})
	s, body := subscribe(t, off, "/graphql", liveCount, off.Key)
	if s.resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "CACHE__ENABLED") {
		t.Errorf("a stream with the cache off: HTTP %d %s", s.resp.StatusCode, body)
	}

	// The feeds hold their answers within CACHE__MAX_BYTES, one within an eighth of it: a
	// larger answer (a year by the hour, about 350 KB, past 8 KiB here) is RESULT_TOO_LARGE, the
	// last; a small one is answered beside it.
	small := servicetest.Start(t, db, map[string]string{"CACHE__MAX_BYTES": "65536"})
	waitCacheLive(t, small)
	s, ev = open(t, small, "/graphql", `subscription { record_series(start_date: "2024-01-01", end_date: "2024-12-31", bucket: HOUR) { bucket count } }`, small.Key)
	if ev.name != "next" || !strings.Contains(ev.data, `"RESULT_TOO_LARGE"`) || !strings.Contains(ev.data, "CACHE__MAX_BYTES") {
		t.Errorf("a live answer past its bound: %q %.300s", ev.name, ev.data)
	}
	s.wantComplete(t, "a live answer past its bound", 5*time.Second)
	if _, ev := open(t, small, "/graphql", liveCount, small.Key); liveCountOf(t, ev) != sqlCount(t, db) {
		t.Errorf("a small live answer beside it: %s", ev.data)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// TestLiveSlowReaderDropped: a stream whose client stops reading is dropped as any slow reader
// is (APP__WRITE_TIMEOUT), its place freed, while another stream of the same question keeps
// getting every answer. The answer is large (an hourly series over five years, about 2 MB), so
// that a few changes fill the socket's buffers.
func TestLiveSlowReaderDropped(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	env, target, _ := prometheusEnv(t, 0)
	env["CACHE__MAX_STALENESS"] = "3600"
	env["APP__WRITE_TIMEOUT"] = "1"
	env["APP__STREAM_HEARTBEAT"] = "1"
	svc := servicetest.Start(t, db, env)
	waitCacheLive(t, svc)
	const series = `subscription { record_series(start_date: "2020-01-01", end_date: "2024-12-31", bucket: HOUR) { bucket count } }`

	d := smallReceiveBuffer(&net.Dialer{})
	c, err := d.Dial("tcp", strings.TrimPrefix(svc.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body, _ := json.Marshal(map[string]string{"query": series})
	fmt.Fprintf(c, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n%s: %s\r\nContent-Length: %d\r\n\r\n%s", svc.Header, svc.Key, len(body), body)
	// Never read from c again.

	reader, _ := open(t, svc, "/graphql", series, svc.Key)
	servicetest.WaitFor(t, 10*time.Second, "two streams open", func() bool {
		return scrapeValue(t, target, "emsquery_streams_open") == 2
	})
	for change := 1; scrapeValue(t, target, "emsquery_streams_open") == 2; change++ {
		if change > 20 {
			t.Fatal("the stream that does not read is still open after 20 answers")
		}
		if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES ($1, timestamp '2021-01-01' + $2 * interval '1 hour', 2, 'North Harbour')`, 950000+change, change); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
			t.Fatal(err)
		}
		ev, _, ok := reader.next(30 * time.Second)
		if !ok || ev.name != "next" || strings.Contains(ev.data, `"errors"`) {
			t.Fatalf("change %d: the reading stream got %v %q %.200s", change, ok, ev.name, ev.data)
		}
		time.Sleep(1500 * time.Millisecond) // a write timeout
	}
	if _, ok := closedWithin(c, 5*time.Second); !ok {
		t.Error("the connection of the stream dropped is still open")
	}
	if _, ok := reader.endedWithin(time.Second); ok {
		t.Error("the reading stream ended")
	}
}
