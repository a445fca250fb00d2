package systemtest

// Answers from memory under load (contract 6.5): a kept answer is byte for byte the one computed
// with the cache off, for every root field of every endpoint, large answers included; identical
// questions in flight run their statement once; the memory bound holds under many distinct
// questions.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/answercache"
)

// demoDB returns a fresh database holding records demo records (internal/demodata).
func demoDB(t *testing.T, records int) servicetest.DB {
	t.Helper()
	db := servicetest.NewDB(t)
	ctx := context.Background()
	cfg, err := db.Cluster.ConnConfig(db.Name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	d, err := demodata.New(demodata.Config{Records: records, Seed: demodata.DefaultSeed})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	return db
}

// everyRootField is a question for each root field of the three endpoints, each selecting
// every field (on the demo data's two years).
var everyRootField = []struct{ name, path, query string }{
	{"resources", "/graphql", `{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`},
	{"patients", "/graphql", `{ patients { sk_patient age date_of_birth gender weight } }`},
	{"oxygens", "/graphql", `{ oxygens { sk_oxygen record_id route flow_rate administered_at } }`},
	{"oxygens distinct", "/graphql", `{ oxygens(distinct_fields: ["route", "flow_rate"]) { sk_oxygen record_id route flow_rate administered_at } }`},
	{"station_resources", "/graphql", `{ station_resources { station_id station_name resources { resource_id } } }`},
	{"distinct_values", "/graphql", `{ distinct_values(columns: ["station", "age", "occurred_at", "distance"], start_date: "2024-01-01", end_date: "2025-12-31", filters: [{column: "distance", operator: GREATER_THAN, value: "20"}]) { column value } }`},
	{"unique_counts", "/graphql", `{ unique_counts(columns: ["callsign", "transported", "degree_of_urgency"], start_date: "2024-01-01", end_date: "2025-12-31", use_or: true, filters: [{column: "gender", operator: EQUALS, value: "other"}, {column: "age", operator: LESS_THAN, value: "10"}]) { column value count } }`},
	{"records_count", "/graphql", `{ records_count { count } }`},
	{"records_count of a station", "/graphql", `query($s: String) { records_count(station: $s) { count } }`},
	{"main_report", "/serve/graphql", `{ main_report(start_date: "2024-01-01", end_date: "2025-12-31", limit: 1000, offset: 50) { total limit offset rows { record_id occurred_at station callsign resource_id degree_of_urgency distance response_time_s municipality transported patient_age patient_gender oxygen_routes } } }`},
	{"main_report_summary", "/serve/graphql", `{ main_report_summary(start_date: "2024-01-01", end_date: "2025-12-31", filters: [{column: "transported", operator: EQUALS, value: "true"}]) { records distinct_resources distinct_patients average_distance average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`},
	{"stations", "/lookups/graphql", `{ stations { station_id station_name } }`},
	{"callsigns", "/lookups/graphql", `{ callsigns }`},
	{"urgencies", "/lookups/graphql", `{ urgencies }`},
	{"municipalities", "/lookups/graphql", `{ municipalities }`},
	{"oxygen_routes", "/lookups/graphql", `{ oxygen_routes }`},
	{"genders", "/lookups/graphql", `{ genders }`},
	{"columns", "/lookups/graphql", `{ columns { name type operators } }`},
}

// A kept answer is, byte for byte, what the service computes with the cache off: status,
// Content-Type and body, for every root field (the large lists, which the direct-JSON path
// hands over in shared parts, included), by POST and GET and for both JSON media types.
func TestCacheAnswersAreTheComputedOnes(t *testing.T) {
	db := demoDB(t, 20000)
	on := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": "600"})
	off := servicetest.Start(t, db, map[string]string{"CACHE__ENABLED": "false"})
	waitCacheLive(t, on)
	var station string
	if err := db.Pool(t).QueryRow(context.Background(), `SELECT station_name FROM dim_station ORDER BY station_id LIMIT 1`).Scan(&station); err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{"s": station}
	large := 0
	for _, q := range everyRootField {
		t.Run(q.path+" "+q.name, func(t *testing.T) {
			want := gql(t, off, q.path, q.query, vars)
			if want.status != http.StatusOK || strings.Contains(string(want.body[:min(len(want.body), 20)]), `"errors"`) {
				t.Fatalf("cache off: HTTP %d %.300s", want.status, want.body)
			}
			if len(want.body) > 64<<10 {
				large++
			}
			miss := gql(t, on, q.path, q.query, vars)
			wantStatus(t, "first", miss, http.StatusOK, answercache.StatusMiss)
			sameAnswer(t, "computed with the cache on", miss, want)
			hit := gql(t, on, q.path, q.query, vars)
			wantStatus(t, "again", hit, http.StatusOK, answercache.StatusHit)
			sameAnswer(t, "from memory", hit, want)
		})
	}
	if large < 3 {
		t.Errorf("only %d answers over 64 KiB: the shared-part path is not exercised", large)
	}
	// GET, and the other JSON media type.
	for _, q := range everyRootField[:3] {
		wantGet := gqlGet(t, off, q.path, q.query)
		gqlGet(t, on, q.path, q.query)
		sameAnswer(t, "GET from memory", gqlGet(t, on, q.path, q.query), wantGet)
		body, _ := json.Marshal(map[string]any{"query": q.query})
		h := map[string]string{"Accept": "application/graphql-response+json"}
		want := postRaw(t, off, q.path, string(body), h)
		postRaw(t, on, q.path, string(body), h)
		got := postRaw(t, on, q.path, string(body), h)
		wantStatus(t, "graphql-response+json", got, http.StatusOK, answercache.StatusHit)
		sameAnswer(t, "graphql-response+json from memory", got, want)
	}
}

// N identical requests at once run their statement once: the first waits for a lock the test
// holds, the others wait for its answer. The database's own statement log (log_statement = all
// for the test database) counts the statements.
func TestCacheCoalescesIdenticalQuestions(t *testing.T) {
	db := servicetest.FixtureDB(t)
	ctx := context.Background()
	if err := db.Cluster.Exec(ctx, db.Name, fmt.Sprintf(`ALTER DATABASE %q SET log_statement = 'all'`, db.Name)); err != nil {
		t.Fatal(err)
	}
	// Enough connections for every request to run its own statement, were they not coalesced.
	const n = 8
	svc := servicetest.Start(t, db, map[string]string{"DATABASE__POOL_SIZE": strconv.Itoa(n), "CACHE__MAX_STALENESS": "600"})
	waitCacheLive(t, svc)
	// A station name no other test uses marks the statement's parameters in the log.
	marker := "coalesce-" + servicetest.RandomKey()[:12]
	logStart := fileSize(t, db.Cluster.LogFile())

	release := lockFactRecord(t, db)
	body, _ := json.Marshal(map[string]any{"query": stationCount, "variables": map[string]any{"s": marker}})
	replies := make(chan reply, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, svc.URL+"/graphql", strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(svc.Header, svc.Key)
			resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
			if err != nil {
				replies <- reply{status: -1, body: []byte(err.Error())}
				return
			}
			defer resp.Body.Close()
			var b strings.Builder
			_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
			replies <- reply{resp.StatusCode, resp.Header, []byte(b.String())}
		})
	}
	waitForLockWaiters(t, db, 1)
	// Give every request time to arrive and join the first; none may start a statement of its own.
	time.Sleep(2 * time.Second)
	if w := lockWaiters(t, db.Pool(t), db.Name); w != 1 {
		t.Errorf("%d of the service's sessions wait for the lock, want 1", w)
	}
	release()
	wg.Wait()
	close(replies)
	var first []byte
	for r := range replies {
		if r.status != http.StatusOK || r.cacheStatus() != answercache.StatusMiss {
			t.Errorf("HTTP %d, Cache-Status %q, want 200 and fwd=miss (computed, not yet kept when it came): %s", r.status, r.cacheStatus(), r.body)
		}
		if first == nil {
			first = r.body
		} else if string(r.body) != string(first) {
			t.Errorf("answers differ: %s and %s", r.body, first)
		}
	}
	if got := statementsWith(t, db.Cluster.LogFile(), logStart, marker); got != 1 {
		t.Errorf("the database ran the statement %d times for %d identical requests at once, want 1", got, n)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// statementsWith counts the statements logged (log_statement: their parameters' DETAIL line)
// after offset whose parameters hold marker.
func statementsWith(t *testing.T, path string, offset int64, marker string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.Contains(l, "DETAIL:  parameters:") && strings.Contains(l, marker) {
			n++
		}
	}
	return n
}

// gauge reads one sample of a gauge from the service's Prometheus endpoint.
func gauge(t *testing.T, target, name string) float64 {
	t.Helper()
	f, ok := scrapeMetrics(t, target)[name]
	if !ok || len(f.GetMetric()) == 0 {
		t.Fatalf("no %s in the scrape", name)
	}
	m := f.GetMetric()[0]
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	t.Fatalf("%s is neither a gauge nor a counter", name)
	return 0
}

// processRSS is the peak resident set of a process (VmHWM), in bytes.
func processRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// Many distinct questions whose answers together are far larger than CACHE__MAX_BYTES: the
// cache's own size stays within it, it evicts, and the process's peak memory grows by far less
// than the answers would take.
func TestCacheMemoryBound(t *testing.T) {
	db := demoDB(t, 20000)
	const maxBytes = 4 << 20
	metricsPort := servicetest.FreePort(t)
	svc := servicetest.Start(t, db, map[string]string{
		"CACHE__MAX_BYTES":              strconv.Itoa(maxBytes),
		"CACHE__MAX_STALENESS":          "600",
		"OTEL_METRICS_EXPORTER":         "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(metricsPort),
	})
	target := "127.0.0.1:" + strconv.Itoa(metricsPort)
	waitCacheLive(t, svc)
	// One page first, to measure an answer and the process with everything warm.
	const page = `query($o: Int) { main_report(start_date: "2024-01-01", end_date: "2025-12-31", limit: 1000, offset: $o) { total rows { record_id occurred_at station callsign resource_id degree_of_urgency distance response_time_s municipality transported patient_age patient_gender oxygen_routes } } }`
	one := gql(t, svc, "/serve/graphql", page, map[string]any{"o": 0})
	wantStatus(t, "a page", one, http.StatusOK, answercache.StatusMiss)
	baseline := processRSS(t, svc.PID())
	const questions = 250
	total := 0
	for i := 1; i <= questions; i++ {
		r := gql(t, svc, "/serve/graphql", page, map[string]any{"o": i * 70})
		if r.status != http.StatusOK {
			t.Fatalf("page %d: HTTP %d %.300s", i, r.status, r.body)
		}
		total += len(r.body)
		if i%10 == 0 {
			if size := gauge(t, target, "emsquery_cache_size_bytes"); size > maxBytes {
				t.Fatalf("after %d answers the cache holds %.0f bytes, bound %d", i, size, maxBytes)
			}
		}
	}
	size, entries := gauge(t, target, "emsquery_cache_size_bytes"), gauge(t, target, "emsquery_cache_entries")
	evictions := gauge(t, target, "emsquery_cache_evictions_total")
	t.Logf("%d answers, %d bytes in all; kept %.0f answers, %.0f bytes; %.0f evicted", questions+1, total, entries, size, evictions)
	if size > maxBytes || size < maxBytes/2 {
		t.Errorf("the cache holds %.0f bytes, want between half the bound and the bound %d", size, maxBytes)
	}
	if total < 5*maxBytes || evictions == 0 {
		t.Fatalf("the answers (%d bytes, %.0f evictions) did not exceed the bound enough to test it", total, evictions)
	}
	// The peak resident memory grew by less than the answers that went through: they were not
	// all kept. (Twice the bound for the garbage collector's headroom, plus the requests' own.)
	grown := processRSS(t, svc.PID()) - baseline
	t.Logf("peak RSS grew by %d MiB (answers: %d MiB, bound %d MiB)", grown>>20, total>>20, maxBytes>>20)
	if grown > int64(total)/2 {
		t.Errorf("peak RSS grew by %d bytes, more than half the %d bytes of answers: the bound does not hold", grown, total)
	}

	// An answer larger than an eighth of the bound is not kept (its recording stops there); it
	// is the same answer anyway. It is streamed: its Cache-Status went out with its first bytes,
	// before its size was known, so it says fwd=miss (computed) each time, never hit.
	patients := `{ patients { sk_patient age date_of_birth gender weight } }`
	first := gql(t, svc, "/graphql", patients, nil)
	if len(first.body) <= maxBytes/8 {
		t.Fatalf("the patients answer (%d bytes) is not larger than an eighth of the bound", len(first.body))
	}
	wantStatus(t, "a large answer", first, http.StatusOK, answercache.StatusMiss)
	again := gql(t, svc, "/graphql", patients, nil)
	wantStatus(t, "a large answer again", again, http.StatusOK, answercache.StatusMiss)
	sameAnswer(t, "a large answer again", again, first)
}
