package systemtest

// Contract 6.10 on the GraphQL path, outside in: the real binary over real HTTP, a real
// PostgreSQL, and the database's own view of what the service runs (pg_stat_activity). No
// single request takes the pool (LIMITS__MAX_ROOT_FIELDS, LIMITS__REQUEST_PARALLELISM), no key's
// queue stands in front of another key (the fair gate), no answer takes the memory
// (LIMITS__MAX_ROWS), no key runs more than its max_in_flight at once.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/procstat"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// loadRecords adds n records to fact_record, one a second from 2024-01-01 (so that each has an
// occurred_at of its own), over 7 stations, with response times 0 to 899.
func loadRecords(t *testing.T, db servicetest.DB, n int) {
	t.Helper()
	if err := db.Cluster.Exec(context.Background(), db.Name, fmt.Sprintf(`
		INSERT INTO fact_record (record_id, occurred_at, station, response_time_s)
		SELECT i, timestamp '2024-01-01' + i * interval '1 second', 'S' || (i %% 7), i %% 900
		FROM generate_series(1, %d) AS i;
		ANALYZE fact_record`, n)); err != nil {
		t.Fatalf("load records: %v", err)
	}
}

// slowRecords makes every statement that reads fact_record take at least d: the table becomes
// fact_record_rows, and fact_record a view of it whose condition sleeps once per statement (an
// uncorrelated subquery: an InitPlan, run once). The answers stay those of the rows.
func slowRecords(t *testing.T, db servicetest.DB, d time.Duration) {
	t.Helper()
	if err := db.Cluster.Exec(context.Background(), db.Name, fmt.Sprintf(`
		ALTER TABLE fact_record RENAME TO fact_record_rows;
		CREATE VIEW fact_record AS SELECT * FROM fact_record_rows WHERE (SELECT true FROM pg_sleep(%g))`, d.Seconds())); err != nil {
		t.Fatalf("slow fact_record: %v", err)
	}
}

// busySampler counts, every 5 ms, the service's statements running on db (pg_stat_activity:
// application emsquery, state active) and keeps the largest count.
type busySampler struct {
	most    atomic.Int64
	samples atomic.Int64
	stop    chan struct{}
	done    chan struct{}
}

func sampleBusy(t *testing.T, pool *pgxpool.Pool, db string) *busySampler {
	t.Helper()
	s := &busySampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var n int64
			err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = $1 AND application_name = 'emsquery' AND state = 'active'`, db).Scan(&n)
			if err == nil {
				s.samples.Add(1)
				if n > s.most.Load() {
					s.most.Store(n)
				}
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// busyNow is the service's statements running on db now.
func busyNow(t *testing.T, pool *pgxpool.Pool, db string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = $1 AND application_name = 'emsquery' AND state = 'active'`, db).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Stop ends the sampling and returns the most statements seen running at once.
func (s *busySampler) Stop() (most, samples int64) {
	close(s.stop)
	<-s.done
	return s.most.Load(), s.samples.Load()
}

// post sends a GraphQL query with key; safe in goroutines (no t.Fatal): it returns the status,
// the headers and the body.
func post(svc *servicetest.Service, key, query string) (int, http.Header, []byte, error) {
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequest(http.MethodPost, svc.URL+"/graphql", bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(svc.Header, key)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw, err
}

// recordStatsAliases is a query of n aliases of record_stats grouped by occurred_at.
func recordStatsAliases(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, ` a%d: record_stats(start_date: "2000-01-01", end_date: "2030-12-31", measure: "response_time_s", group_by: ["occurred_at"]) { count }`, i)
	}
	return b.String() + " }"
}

// TestRootFieldsAndRequestParallelism: 60 root fields are refused before any statement runs
// (LIMITS__MAX_ROOT_FIELDS); 20 run, at most LIMITS__REQUEST_PARALLELISM=4 at once on a pool
// of 10, and answer what SQL answers.
func TestRootFieldsAndRequestParallelism(t *testing.T) {
	t.Parallel()
	db := servicetest.NewDB(t)
	loadRecords(t, db, 500)
	const statement = 150 * time.Millisecond
	slowRecords(t, db, statement)
	svc := servicetest.Start(t, db, map[string]string{
		"DATABASE__POOL_SIZE": "10", "DATABASE__MAX_OVERFLOW": "0", "CACHE__ENABLED": "false",
	})
	pool := db.Pool(t)

	// 60 aliases: refused before any statement (a statement takes at least 150 ms here: the
	// sampler, every 5 ms, would see it running).
	busy := sampleBusy(t, pool, db.Name)
	start := time.Now()
	status, _, raw, err := post(svc, svc.Key, recordStatsAliases(60))
	took := time.Since(start)
	time.Sleep(50 * time.Millisecond)
	most, _ := busy.Stop()
	if err != nil {
		t.Fatal(err)
	}
	var refused servicetest.GraphQLResponse
	if err := json.Unmarshal(raw, &refused); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	if status != http.StatusUnprocessableEntity || len(refused.Errors) == 0 || refused.Errors[0].Code() != "BAD_USER_INPUT" ||
		!strings.Contains(refused.Errors[0].Message, "LIMITS__MAX_ROOT_FIELDS=20") || (len(refused.Data) > 0 && string(refused.Data) != "null") {
		t.Errorf("60 root fields: %d %s; want 422 BAD_USER_INPUT naming LIMITS__MAX_ROOT_FIELDS=20, no data", status, raw)
	}
	if most != 0 {
		t.Errorf("60 root fields: %d statements seen running (answered in %s): a statement ran", most, took)
	}
	t.Logf("60 root fields refused in %s", took)

	// 20 aliases: at most 4 statements at once.
	var want []int64
	rows, err := pool.Query(context.Background(), `SELECT count(*) FROM fact_record_rows GROUP BY occurred_at ORDER BY occurred_at`)
	if err != nil {
		t.Fatal(err)
	}
	want, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	busy = sampleBusy(t, pool, db.Name)
	start = time.Now()
	status, _, raw, err = post(svc, svc.Key, recordStatsAliases(20))
	took = time.Since(start)
	most, samples := busy.Stop()
	if err != nil || status != http.StatusOK {
		t.Fatalf("20 root fields: %d %v %.500s", status, err, raw)
	}
	var answer struct {
		Data   map[string][]struct{ Count int64 } `json:"data"`
		Errors []any                              `json:"errors"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || len(answer.Errors) > 0 || len(answer.Data) != 20 {
		t.Fatalf("20 root fields: %v %.500s", err, raw)
	}
	for name, got := range answer.Data {
		if len(got) != len(want) {
			t.Fatalf("%s: %d groups, want %d", name, len(got), len(want))
		}
		for i := range got {
			if got[i].Count != want[i] {
				t.Fatalf("%s[%d].count = %d, want %d", name, i, got[i].Count, want[i])
			}
		}
	}
	t.Logf("20 root fields of %s each: %s, at most %d statements running at once (%d samples)", statement, took, most, samples)
	if most > 4 {
		t.Errorf("%d statements of one request ran at once; LIMITS__REQUEST_PARALLELISM=4", most)
	}
	if most < 2 {
		t.Errorf("at most %d statement ran at once: the root fields did not run side by side", most)
	}
	if took < 5*statement {
		t.Errorf("20 statements of %s in %s: more than 4 at a time", statement, took)
	}
}

// TestResultTooLarge: a unique_counts over more than LIMITS__MAX_ROWS distinct values is
// RESULT_TOO_LARGE on that field, whose data is null, while the request's other fields answer;
// the service's memory does not grow with the size the answer would have had (300,000 values,
// some 30 MB as rows in memory, more as JSON), because reading stops past the limit.
func TestResultTooLarge(t *testing.T) {
	t.Parallel()
	db := servicetest.NewDB(t)
	const records, maxRows = 300000, 1000
	loadRecords(t, db, records)
	svc := servicetest.Start(t, db, map[string]string{"LIMITS__MAX_ROWS": strconv.Itoa(maxRows), "CACHE__ENABLED": "false"})
	pool := db.Pool(t)
	var stations int64
	if err := pool.QueryRow(context.Background(), `SELECT count(DISTINCT station) FROM fact_record`).Scan(&stations); err != nil {
		t.Fatal(err)
	}

	// Warm up (the first request pays for the pool, the caches), then measure.
	post(svc, svc.Key, `{ records_count { count } }`) //nolint:errcheck
	before, err := procstat.RSS(svc.PID())
	if err != nil {
		t.Fatal(err)
	}
	rss := procstat.SampleRSS(svc.PID(), 5*time.Millisecond)
	start := time.Now()
	r := svc.GraphQL(t, "/graphql", `{
		big: unique_counts(columns: ["occurred_at"], start_date: "2000-01-01", end_date: "2030-12-31") { column value count }
		small: unique_counts(columns: ["station"], start_date: "2000-01-01", end_date: "2030-12-31") { value count }
	}`, nil)
	took := time.Since(start)
	peak, err := rss.Stop(false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK || len(r.Errors) != 1 || r.Errors[0].Code() != "RESULT_TOO_LARGE" ||
		!strings.Contains(r.Errors[0].Message, "LIMITS__MAX_ROWS=1000") || fmt.Sprint(r.Errors[0].Path) != "[big]" {
		t.Fatalf("status %d, errors %+v; want one RESULT_TOO_LARGE naming LIMITS__MAX_ROWS=1000 at [big]", r.Status, r.Errors)
	}
	var data struct {
		Big   json.RawMessage `json:"big"`
		Small []struct {
			Value string `json:"value"`
			Count int64  `json:"count"`
		} `json:"small"`
	}
	if err := json.Unmarshal(r.Data, &data); err != nil {
		t.Fatal(err)
	}
	if string(data.Big) != "null" {
		t.Errorf("data.big = %.200s, want null", data.Big)
	}
	var sum int64
	for _, s := range data.Small {
		sum += s.Count
	}
	if int64(len(data.Small)) != stations || sum != records {
		t.Errorf("small: %d stations counting %d records, want %d counting %d", len(data.Small), sum, stations, records)
	}
	grew := peak - before
	t.Logf("RESULT_TOO_LARGE in %s; RSS %d MiB before, peak %d MiB during (+%d KiB)", took, before>>20, peak>>20, grew>>10)
	// 300,000 rows kept would be tens of MB; 1,001 rows are a few hundred KB. Leave room for the
	// runtime's own noise.
	if grew > 16<<20 {
		t.Errorf("RSS grew by %d MiB during a refused answer; reading did not stop at LIMITS__MAX_ROWS", grew>>20)
	}

	// record_stats past the limit: the same error; its field is non-null, so data is null.
	r = svc.GraphQL(t, "/graphql", recordStatsAliases(1), nil)
	if len(r.Errors) != 1 || r.Errors[0].Code() != "RESULT_TOO_LARGE" || string(r.Data) != "null" {
		t.Errorf("record_stats by occurred_at: %.300s; want RESULT_TOO_LARGE, data null", r.Raw)
	}
	// distinct_values past the limit.
	r = svc.GraphQL(t, "/graphql", `{ distinct_values(columns: ["occurred_at"], start_date: "2000-01-01", end_date: "2030-12-31") { value } }`, nil)
	if len(r.Errors) != 1 || r.Errors[0].Code() != "RESULT_TOO_LARGE" || !strings.Contains(string(r.Data), `"distinct_values":null`) {
		t.Errorf("distinct_values by occurred_at: %.300s; want RESULT_TOO_LARGE, the field null", r.Raw)
	}
	// Exactly the limit is an answer: 1,000 records of one day's first seconds.
	r = svc.GraphQL(t, "/graphql", `{ distinct_values(columns: ["occurred_at"], start_date: "2024-01-01", end_date: "2024-01-01",
		filters: [{column: "occurred_at", operator: LESS_THAN_OR_EQUAL, value: "2024-01-01 00:16:40"}]) { value } }`, nil)
	var exact struct {
		DistinctValues []struct{ Value string } `json:"distinct_values"`
	}
	r.DataInto(t, &exact)
	if len(exact.DistinctValues) != maxRows {
		t.Errorf("distinct_values of %d values: %d", maxRows, len(exact.DistinctValues))
	}
}

// TestFairShareByKey: one key has 40 requests waiting for a pool of 2 busy connections; a
// request of another key then gets the next free connection, long before the 40 are done.
func TestFairShareByKey(t *testing.T) {
	t.Parallel()
	db := servicetest.NewDB(t)
	loadRecords(t, db, 100)
	const statement = 100 * time.Millisecond
	slowRecords(t, db, statement)
	flood, other := newTestKey("flood", "graphql"), newTestKey("other", "graphql")
	keys := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, keys, flood, other)
	svc := servicetest.Start(t, db, map[string]string{
		"AUTHENTICATION__API_KEYS_FILE": keys, "DATABASE__POOL_SIZE": "2", "DATABASE__MAX_OVERFLOW": "0",
		"CACHE__ENABLED": "false",
	})
	pool := db.Pool(t)

	type done struct {
		who string
		at  time.Duration
		err error
	}
	var (
		mu    sync.Mutex
		order []done
		wg    sync.WaitGroup
	)
	start := time.Now()
	send := func(who, key string, i int) {
		defer wg.Done()
		status, _, raw, err := post(svc, key, fmt.Sprintf(`{ records_count(station: "S%d") { count } }`, i%7))
		if err == nil && (status != http.StatusOK || bytes.Contains(raw, []byte(`"errors"`))) {
			err = fmt.Errorf("status %d: %.300s", status, raw)
		}
		mu.Lock()
		order = append(order, done{who, time.Since(start), err})
		mu.Unlock()
	}
	const floods = 40
	for i := 0; i < floods; i++ {
		wg.Add(1)
		go send("flood", flood.secret, i)
	}
	// The pool busy with flood's statements and the rest of them waiting.
	servicetest.WaitFor(t, 5*time.Second, "the pool busy", func() bool { return busyNow(t, pool, db.Name) == 2 })
	time.Sleep(3 * statement)
	sent := time.Since(start)
	wg.Add(1)
	send("other", other.secret, 0)
	wg.Wait()

	sort.Slice(order, func(i, j int) bool { return order[i].at < order[j].at })
	rank, floodsBefore := -1, 0
	var otherAt, lastFlood time.Duration
	for i, d := range order {
		if d.err != nil {
			t.Errorf("%s: %v", d.who, d.err)
		}
		if d.who == "other" {
			rank, otherAt = i, d.at
		} else {
			lastFlood = d.at
			if rank < 0 {
				floodsBefore++
			}
		}
	}
	t.Logf("other key sent at %s, answered at %s (%s later), %d of %d flood requests done before it; the last flood request at %s",
		sent, otherAt, otherAt-sent, floodsBefore, floods, lastFlood)
	// FIFO would answer it after the 40-odd flood requests still waiting (~2 s); fairly it waits
	// for one statement to end and runs the next.
	if wait := otherAt - sent; wait > 8*statement {
		t.Errorf("the other key's request took %s, more than 8 statements of %s", wait, statement)
	}
	if floodsBefore > floods/2 {
		t.Errorf("%d of %d flood requests were answered before the other key's", floodsBefore, floods)
	}
}

// TestMaxInFlight: a key with max_in_flight 2 sending 5 slow requests at once gets 2 answers and
// 3 refusals (429 RATE_LIMITED, Retry-After, a GraphQL errors body); another key meanwhile is
// not affected; once they ended, the key may run 2 again. A request counts until its streamed
// answer has been sent, not only until the handler returned.
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	db := servicetest.NewDB(t)
	loadRecords(t, db, 100)
	// Patients enough for an answer that streams for a while to a client that does not read
	// (some 20 MB: more than the sockets' buffers take).
	if err := db.Cluster.Exec(context.Background(), db.Name, `
		INSERT INTO dim_patient (sk_patient, age, gender, weight, date_of_birth)
		SELECT i, i % 100, CASE WHEN i % 2 = 0 THEN 'female' ELSE 'male' END, 70.5, date '1950-01-01' + i % 20000
		FROM generate_series(1, 250000) AS i`); err != nil {
		t.Fatal(err)
	}
	const statement = 400 * time.Millisecond
	slowRecords(t, db, statement)
	capped, free, streamer := newTestKey("capped", "graphql"), newTestKey("free", "graphql"), newTestKey("streamer", "graphql")
	capped.entry.MaxInFlight = 2
	streamer.entry.MaxInFlight = 1
	keys := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, keys, capped, free, streamer)
	svc := servicetest.Start(t, db, map[string]string{
		"AUTHENTICATION__API_KEYS_FILE": keys, "DATABASE__POOL_SIZE": "8", "CACHE__ENABLED": "false",
	})

	type result struct {
		status int
		header http.Header
		body   []byte
		err    error
	}
	burst := func(n int) []result {
		out := make([]result, n)
		var wg sync.WaitGroup
		for i := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, h, b, err := post(svc, capped.secret, fmt.Sprintf(`{ records_count(station: "S%d") { count } }`, i))
				out[i] = result{s, h, b, err}
			}()
		}
		// Meanwhile another key is answered as usual.
		time.Sleep(statement / 4)
		fstart := time.Now()
		s, _, b, err := post(svc, free.secret, recordsCountQuery)
		if err != nil || s != http.StatusOK || bytes.Contains(b, []byte(`"errors"`)) {
			t.Errorf("the other key during the burst: %d %v %.300s", s, err, b)
		}
		if d := time.Since(fstart); d > 3*statement {
			t.Errorf("the other key took %s during the burst", d)
		}
		wg.Wait()
		return out
	}
	for round := 1; round <= 2; round++ {
		ok, limited := 0, 0
		for _, r := range burst(5) {
			switch {
			case r.err != nil:
				t.Errorf("round %d: %v", round, r.err)
			case r.status == http.StatusOK:
				ok++
			case r.status == http.StatusTooManyRequests:
				limited++
				if r.header.Get("Retry-After") == "" || errorCode(t, r.body, true) != "RATE_LIMITED" || !bytes.Contains(r.body, []byte("max_in_flight")) {
					t.Errorf("round %d: 429 without Retry-After or RATE_LIMITED naming max_in_flight: %v %s", round, r.header, r.body)
				}
			default:
				t.Errorf("round %d: status %d: %s", round, r.status, r.body)
			}
		}
		if ok != 2 || limited != 3 {
			t.Errorf("round %d: %d answered, %d refused; want 2 and 3", round, ok, limited)
		}
	}

	// A streamed answer holds its place until its last byte: the client reads its first bytes
	// and stops; another request of the key is refused; once it read the rest, one is let in.
	body, _ := json.Marshal(map[string]any{"query": `{ patients { sk_patient age gender weight date_of_birth } }`})
	req, _ := http.NewRequest(http.MethodPost, svc.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(svc.Header, streamer.secret)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 1024)
	if _, err := io.ReadFull(resp.Body, head); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("streamed answer: %d %v", resp.StatusCode, err)
	}
	time.Sleep(200 * time.Millisecond) // the service has filled the sockets' buffers and waits
	if s, h, b, err := post(svc, streamer.secret, recordsCountQuery); err != nil || s != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Errorf("while its streamed answer is still being sent: %d %v %.300s; want 429 with Retry-After", s, err, b)
	}
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.HasSuffix(rest, []byte("]}}")) {
		t.Fatalf("the rest of the streamed answer: %v, %d bytes ending %q", err, len(rest), rest[max(0, len(rest)-20):])
	}
	t.Logf("streamed answer: %d bytes", len(head)+len(rest))
	servicetest.WaitFor(t, 5*time.Second, "the streamed answer's place given back", func() bool {
		s, _, _, err := post(svc, streamer.secret, recordsCountQuery)
		return err == nil && s == http.StatusOK
	})
}
