package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/platform/answercache"
)

// Answers that follow their own tables (contract 6.13), measured from outside on the real
// binary with CACHE__CHANGES=replication, on a cluster with wal_level = logical and
// pg_stat_statements (followConf), the DBA's publication and REPLICA IDENTITY FULL
// (docs/replication.md), and the service logged in as a role of its own (followRole), so that
// pg_stat_statements tells its statements from this program's:
//
//   - streams live counting questions (followQuestions: records_count, record_series,
//     distinct_values, unique_counts and main_report_summary, each with other dates, columns
//     and filters, all on fact_record's columns), each awaited until its first answer;
//   - each load INSERTs rows into fact_record in a transaction whose COMMIT starts the clock;
//     every stream's next answer is timed from it; once all have come (and a second more, for a
//     late statement) pg_stat_statements gives the statements the service ran, on fact_record and
//     in all, and their time;
//   - then the same questions are asked once each of a second instance of the service with its
//     cache off: a recomputation of them all, whose statements pg_stat_statements gives the same
//     way, and whose answers every stream's new answer must equal;
//   - last, the hit rate of repeated questions (followHitAsks of them, asked every second)
//     with and without a writer committing to another database every 100 ms, with replication
//     and with snapshot.
//
// The rows inserted are deleted at the end.

const (
	followWorkload  = "follow"
	followRole      = "bench_follow"
	followPassword  = "bench-follow-0123456789abcdef"
	followDB        = "bench_follow_writer" // the other database the writer commits to
	followMaxQs     = 100
	followSettle    = time.Second
	followHitAsks   = 10 // questions asked repeatedly for the hit rate
	followWriterGap = 100 * time.Millisecond
)

// followConf is what the cluster needs for the scenario: logical decoding for the service's
// slot, pg_stat_statements for the database's work.
const followConf = "wal_level = logical\nmax_replication_slots = 20\nmax_wal_senders = 20\n" +
	"shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.max = 10000\n"

type followOptions struct {
	streams    int
	questions  int
	loads      int
	rows       int
	hitRounds  int
	timeout    time.Duration
	docSection string
}

// followQuestion is one live counting question: the field, the endpoint and the selection
// (the field with its arguments and subfields).
type followQuestion struct {
	field string
	path  string
	sel   string
}

func (q followQuestion) body(subscription bool) []byte {
	op := "query"
	if subscription {
		op = "subscription"
	}
	b, _ := json.Marshal(map[string]any{"query": op + " { " + q.sel + " }"})
	return b
}

// gqlString is s as a GraphQL string literal (JSON's escapes are GraphQL's).
func gqlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// followRanges all hold June 2025, where every load's records fall, so that every question's
// answer changes with every load (a feed publishes a changed answer only).
var followRanges = [][2]string{
	{"2025-06-01", "2025-06-30"}, {"2025-05-01", "2025-07-31"}, {"2025-04-01", "2025-06-30"},
	{"2025-06-01", "2025-12-31"}, {"2025-01-01", "2025-12-31"},
}

func dates(r [2]string) string {
	return fmt.Sprintf("start_date: %q, end_date: %q", r[0], r[1])
}

// followQuestions are n of the 100 questions, the fields taken in turn so that a few cover them
// all. stations and urgencies are the data's.
func followQuestions(n int, stations, urgencies []string) ([]followQuestion, error) {
	if len(stations) == 0 || len(urgencies) == 0 {
		return nil, fmt.Errorf("follow: the data has %d stations and %d urgencies, want one of each at least", len(stations), len(urgencies))
	}
	var counts, series, distinct, unique, summary []followQuestion
	counts = append(counts, followQuestion{"records_count", "/graphql", `records_count { count }`})
	for _, s := range stations[:min(30, len(stations))] {
		counts = append(counts, followQuestion{"records_count", "/graphql", `records_count(station: ` + gqlString(s) + `) { count }`})
	}
	// record_series: each bucket with each grouping, the bucket's range; then five with a filter.
	buckets := []struct {
		b string
		r [2]string
	}{{"DAY", followRanges[0]}, {"WEEK", followRanges[1]}, {"MONTH", followRanges[4]}, {"HOUR_OF_DAY", followRanges[2]}, {"DAY_OF_WEEK", followRanges[3]}}
	for _, g := range []string{"", "degree_of_urgency", "transported", "station"} {
		for _, b := range buckets {
			group := ""
			if g != "" {
				group = `, group_by: "` + g + `"`
			}
			series = append(series, followQuestion{"record_series", "/graphql",
				`record_series(` + dates(b.r) + `, bucket: ` + b.b + group + `) { bucket column value count }`})
		}
	}
	filters := []string{
		``,
		`, filters: [{column: "distance", operator: GREATER_THAN, value: "50"}]`,
		`, filters: [{column: "transported", operator: EQUALS, value: "true"}]`,
		`, filters: [{column: "degree_of_urgency", operator: EQUALS, value: ` + gqlString(urgencies[0]) + `}]`,
		`, use_or: true, filters: [{column: "distance", operator: LESS_THAN, value: "20"}, {column: "transported", operator: EQUALS, value: "false"}]`,
	}
	for i, b := range buckets {
		series = append(series, followQuestion{"record_series", "/graphql",
			`record_series(` + dates(b.r) + `, bucket: ` + b.b + filters[1+i%4] + `) { bucket column value count }`})
	}
	// distinct_values: always with municipality, which every load gives a new value.
	for _, cols := range []string{`"municipality"`, `"municipality", "degree_of_urgency"`, `"station", "municipality"`, `"municipality", "transported"`, `"municipality", "station", "degree_of_urgency"`} {
		for _, r := range []int{0, 4} {
			distinct = append(distinct, followQuestion{"distinct_values", "/graphql",
				`distinct_values(columns: [` + cols + `], ` + dates(followRanges[r]) + `) { column value }`})
		}
	}
	colSets := []string{`"degree_of_urgency"`, `"transported"`, `"station"`, `"degree_of_urgency", "transported"`, `"station", "transported", "degree_of_urgency"`, `"municipality"`}
	for i := range 40 { // (i mod 6, i mod 5, i mod 4) differ for every i below 60
		unique = append(unique, followQuestion{"unique_counts", "/graphql",
			`unique_counts(columns: [` + colSets[i%6] + `], ` + dates(followRanges[i%5]) + filters[i%4] + `) { column value count }`})
	}
	// Without distinct_patients: a distinct count of a key that is nearly one per record
	// (beyond 100,000 values a question) is not followed, and is computed again at every load.
	const summaryFields = `{ records distinct_resources average_distance average_response_time_s transported transported_share by_urgency { value count } by_station { value count } }`
	for i := range 5 + len(stations) {
		f := ""
		if i >= 5 {
			f = `, filters: [{column: "station", operator: EQUALS, value: ` + gqlString(stations[i-5]) + `}]`
		}
		summary = append(summary, followQuestion{"main_report_summary", "/serve/graphql",
			`main_report_summary(` + dates(followRanges[i%5]) + f + `) ` + summaryFields})
	}
	// The fields in turn, each list's questions in order, until there are 100.
	lists := [][]followQuestion{counts, series, distinct, unique, summary}
	var all []followQuestion
	for i := 0; len(all) < followMaxQs; i++ {
		added := false
		for _, l := range lists {
			if i < len(l) && len(all) < followMaxQs {
				all, added = append(all, l[i]), true
			}
		}
		if !added {
			break
		}
	}
	if n < 1 || n > len(all) {
		return nil, fmt.Errorf("-follow-questions: %d, want 1 to %d", n, len(all))
	}
	return all[:n], nil
}

// followLoad is what one load measured.
type followLoad struct {
	Rows           int
	Got            int // streams with the new answer within 1 s of the commit
	Wrong          int // streams whose new answer is not the fresh computation's
	Extra          int // streams with more than one new answer
	Lat            latencies
	Recomputations float64 // the live service's feeds' recomputations (its metrics)
	Live           pgWork  // the live service's statements from the commit until every answer came
	Recompute      pgWork  // the same questions computed afresh, once each
}

// pgWork is a role's statements in pg_stat_statements over a stretch of time.
type pgWork struct {
	Calls, FactCalls int64
	MS, FactMS       float64
}

// followHit is the hit rate of repeated questions with one change source, with or without the
// writer in another database.
type followHit struct {
	Source string
	Writer bool
	Hits   int
	Asked  int
}

type followResult struct {
	Records   int
	Questions []followQuestion
	Streams   int
	Opened    time.Duration
	Loads     []followLoad
	Hits      []followHit
	LoadAvg   [2]string
	When      time.Time
}

// prepareFollow makes the cluster's database ready for CACHE__CHANGES=replication with its own
// role, as docs/replication.md tells the DBA.
func prepareFollow(ctx context.Context, c *pgtest.Cluster, db string) error {
	role := pgx.Identifier{followRole}.Sanitize()
	for _, st := range []string{
		`DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '` + followRole + `') THEN
			CREATE ROLE ` + role + ` LOGIN REPLICATION PASSWORD '` + followPassword + `'; END IF; END $$`,
		`GRANT USAGE ON SCHEMA public TO ` + role,
		`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ` + role,
		`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`,
		`DROP PUBLICATION IF EXISTS emsquery`,
		`CREATE PUBLICATION emsquery FOR TABLE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen, fact_unit_shift`,
		`ALTER TABLE fact_record REPLICA IDENTITY FULL`,
	} {
		if err := c.Exec(ctx, db, st); err != nil {
			return fmt.Errorf("follow: prepare the database: %w", err)
		}
	}
	return nil
}

// followRun is the scenario in progress.
type followRun struct {
	conn    *pgx.Conn
	live    *service
	fresh   *service // cache off: the recomputation and the answers to compare with
	metrics string
	client  *http.Client
	qs      []followQuestion
	streams []*liveStream
	arrived chan struct{}
	// The data's values the loads draw from.
	stations, urgencies, municipalities []string
	resources                           []int64
}

func measureFollow(ctx context.Context, c *pgtest.Cluster, bin, tmp string, s *dataSet, o options) (followResult, error) {
	res := followResult{Records: s.Records, Streams: o.follow.streams, When: time.Now().UTC()}
	res.LoadAvg[0] = loadAverage()
	if err := prepareFollow(ctx, c, s.DB.Name); err != nil {
		return res, err
	}
	conn, done, err := loadConn(ctx, c, s.DB.Name)
	if err != nil {
		return res, err
	}
	defer done()

	run := &followRun{conn: conn, arrived: make(chan struct{}, 1),
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}}
	for _, v := range []struct {
		sql string
		out *[]string
	}{
		{`SELECT station FROM fact_record WHERE station IS NOT NULL GROUP BY 1 ORDER BY 1`, &run.stations},
		{`SELECT degree_of_urgency FROM fact_record WHERE degree_of_urgency IS NOT NULL GROUP BY 1 ORDER BY 1`, &run.urgencies},
		{`SELECT municipality FROM fact_record WHERE municipality IS NOT NULL GROUP BY 1 ORDER BY 1`, &run.municipalities},
	} {
		rows, err := conn.Query(ctx, v.sql)
		if err != nil {
			return res, err
		}
		if *v.out, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return res, err
		}
	}
	rows, err := conn.Query(ctx, `SELECT sk_resource FROM dim_resource ORDER BY 1`)
	if err != nil {
		return res, err
	}
	if run.resources, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		return res, err
	}
	if run.qs, err = followQuestions(o.follow.questions, run.stations, run.urgencies); err != nil {
		return res, err
	}
	res.Questions = run.qs

	db := s.DB
	db.User, db.Password = followRole, followPassword
	promPort, err := launcher.FreePort()
	if err != nil {
		return res, err
	}
	run.live, err = startServiceWith(ctx, bin, tmp, db, s.Records, true, o.profile != "", map[string]string{
		// The shipped settings otherwise (CACHE__MAX_STALENESS 2 s among them): with the
		// primary as the only host a commit reaches the live answers without waiting for a poll.
		"CACHE__CHANGES":                  "replication",
		"LIMITS__MAX_STREAMS":             strconv.Itoa(o.follow.streams),
		"LIMITS__MAX_STREAMS_PER_KEY":     strconv.Itoa(o.follow.streams), // the bench's one key holds them all
		"APP__MAX_CONNECTIONS_PER_CLIENT": "0",
		"OTEL_METRICS_EXPORTER":           "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST":   "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT":   strconv.Itoa(promPort),
	})
	if err != nil {
		return res, fmt.Errorf("follow: start the service with replication: %w", err)
	}
	defer run.live.stop()
	run.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort)
	if run.fresh, err = startService(ctx, bin, tmp, db, s.Records, false, false); err != nil {
		return res, err
	}
	defer run.fresh.stop()
	defer run.closeAll()

	t0 := time.Now()
	if err := run.open(ctx, o.follow.streams); err != nil {
		return res, err
	}
	if missing := run.await(ctx, 1, o.follow.timeout); missing > 0 {
		return res, fmt.Errorf("follow: %d of %d streams had no first answer within %s%s", missing, o.follow.streams, o.follow.timeout, run.firstError())
	}
	res.Opened = time.Since(t0)
	progress("follow  %d streams on %d questions open in %.1fs", o.follow.streams, len(run.qs), res.Opened.Seconds())
	fresh, _, err := run.recompute(ctx)
	if err != nil {
		return res, err
	}
	if wrong := run.wrong(0, fresh); wrong > 0 {
		return res, fmt.Errorf("follow: %d streams' first answers are not a fresh computation's", wrong)
	}

	for load := 1; load <= o.follow.loads; load++ {
		l, err := run.load(ctx, load, o.follow)
		if err != nil {
			return res, fmt.Errorf("follow: load %d: %w", load, err)
		}
		res.Loads = append(res.Loads, l)
		progress("follow  load %d: %d/%d streams with the new answer ≤ 1 s, max %s ms, p99 %s ms; service: %d statements on fact_record (%.0f ms), recomputing the %d questions: %d (%.0f ms); wrong %d",
			load, l.Got, o.follow.streams, ms(l.Lat.Max), ms(l.Lat.P99), l.Live.FactCalls, l.Live.FactMS, len(run.qs), l.Recompute.FactCalls, l.Recompute.FactMS, l.Wrong)
	}
	run.closeAll()
	run.live.stop()
	run.fresh.stop()

	if res.Hits, err = measureHits(ctx, c, bin, tmp, db, s.Records, run.qs, o.follow.hitRounds); err != nil {
		return res, err
	}
	res.LoadAvg[1] = loadAverage()
	return res, nil
}

// open opens n streams, stream i on question i mod len, liveOpeners at a time.
func (run *followRun) open(ctx context.Context, n int) error {
	lr := &liveRun{svc: run.live, client: run.client, arrived: run.arrived}
	for _, q := range run.qs {
		lr.queries = append(lr.queries, liveQuestion{body: q.body(true)})
	}
	run.streams = make([]*liveStream, n)
	sem := make(chan struct{}, liveOpeners)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			q := i % len(run.qs)
			st, err := lr.subscribeAt(ctx, run.qs[q].path, q)
			if err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
				return
			}
			run.streams[i] = st
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (run *followRun) await(ctx context.Context, want int, d time.Duration) int {
	return (&liveRun{streams: run.streams, arrived: run.arrived}).await(ctx, want, d)
}

func (run *followRun) firstError() string {
	return (&liveRun{streams: run.streams}).firstError()
}

func (run *followRun) closeAll() {
	for _, st := range run.streams {
		if st != nil {
			st.cancel()
			st.body.Close()
		}
	}
	run.streams = nil
	run.client.CloseIdleConnections()
}

// load commits one load and measures how the streams learn of it and what it cost the database.
func (run *followRun) load(ctx context.Context, n int, o followOptions) (followLoad, error) {
	l := followLoad{}
	before, err := scrapeRecomputations(run.metrics)
	if err != nil {
		return l, err
	}
	if _, err := run.conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return l, err
	}
	tx, err := run.conn.Begin(ctx)
	if err != nil {
		return l, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	// The commit waits for its WAL to be flushed, as with PostgreSQL's default: the benchmark's
	// cluster runs with synchronous_commit off (to load faster), which leaves a commit's WAL to
	// the WAL writer (up to wal_writer_delay, 200 ms, later), and the replication stream sends
	// only flushed WAL.
	if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
		return l, err
	}
	// Records of June 2025 spread over the data's stations, urgencies, municipalities and
	// resources, one of them in a municipality never seen before (so that every distinct_values
	// answer changes), distances 0.5 to 119.5 km, two in three transported.
	tag, err := tx.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station, sk_resource, degree_of_urgency, distance,
			response_time_s, municipality, transported)
		SELECT m.id + g, timestamp '2025-06-01' + (((($2::int - 1) * $1::int + g) * 7919) % 40320) * interval '1 minute',
			($3::text[])[1 + g % cardinality($3::text[])], ($4::bigint[])[1 + g % cardinality($4::bigint[])],
			($5::text[])[1 + g % cardinality($5::text[])], (g % 120) + 0.5, 200 + (g * 13) % 1500,
			CASE WHEN g = 1 THEN 'Follow bench load ' || $2::int ELSE ($6::text[])[1 + g % cardinality($6::text[])] END,
			g % 3 <> 0
		FROM generate_series(1, $1::int) AS g, (SELECT max(record_id) AS id FROM fact_record) AS m`,
		o.rows, n, run.stations, run.resources, run.urgencies, run.municipalities)
	if err != nil {
		return l, err
	}
	l.Rows = int(tag.RowsAffected())
	committed := time.Now() // the clock starts as the COMMIT is sent: no stream can have its answer before
	if err := tx.Commit(ctx); err != nil {
		return l, err
	}
	run.await(ctx, n+1, o.timeout)
	time.Sleep(followSettle)
	if l.Live, err = run.work(ctx); err != nil {
		return l, err
	}
	after, err := scrapeRecomputations(run.metrics)
	if err != nil {
		return l, err
	}
	l.Recomputations = after - before
	var lat []time.Duration
	for _, st := range run.streams {
		ev, ok := st.event(n)
		if ok {
			d := ev.at.Sub(committed)
			lat = append(lat, d)
			if d <= liveLatency {
				l.Got++
			}
		}
		if st.count() > n+1 {
			l.Extra++
		}
	}
	l.Lat = summarize(lat)
	if l.Lat.N < len(run.streams) {
		l.Lat.Max = time.Duration(1<<63 - 1)
	}
	fresh, work, err := run.recompute(ctx)
	if err != nil {
		return l, err
	}
	l.Recompute = work
	l.Wrong = run.wrong(n, fresh)
	return l, nil
}

// recompute asks every question once of the service with its cache off, one after the other,
// and returns the answers' data and the statements they took.
func (run *followRun) recompute(ctx context.Context) ([]any, pgWork, error) {
	var w pgWork
	if _, err := run.conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return nil, w, err
	}
	out := make([]any, len(run.qs))
	for i, q := range run.qs {
		body, _, err := ask(ctx, run.client, run.fresh, q)
		if err != nil {
			return nil, w, err
		}
		if out[i], err = answerData(body); err != nil {
			return nil, w, fmt.Errorf("%s: %w", q.sel, err)
		}
	}
	w, err := run.work(ctx)
	return out, w, err
}

// work is the service role's statements since pg_stat_statements was last reset: all, and
// those that name fact_record.
func (run *followRun) work(ctx context.Context) (pgWork, error) {
	var w pgWork
	err := run.conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(total_exec_time), 0)::float8,
			coalesce(sum(calls) FILTER (WHERE query ILIKE '%fact_record%'), 0)::bigint,
			coalesce(sum(total_exec_time) FILTER (WHERE query ILIKE '%fact_record%'), 0)::float8
		FROM pg_stat_statements
		WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = $1)
		  AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`, followRole).Scan(&w.Calls, &w.MS, &w.FactCalls, &w.FactMS)
	return w, err
}

// wrong counts the streams whose event i is missing or differs from the fresh answer to its
// question.
func (run *followRun) wrong(i int, fresh []any) int {
	n := 0
	for _, st := range run.streams {
		ev, ok := st.event(i)
		if !ok {
			n++
			continue
		}
		got, err := answerData([]byte(ev.data))
		if err != nil || !reflect.DeepEqual(got, fresh[st.q]) {
			n++
		}
	}
	return n
}

// answerData is the data member of a GraphQL answer, numbers as their text; an error when the
// answer has errors or no data.
func answerData(body []byte) (any, error) {
	var a struct {
		Data   json.RawMessage `json:"data"`
		Errors json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, err
	}
	if len(a.Errors) > 0 || len(a.Data) == 0 || string(a.Data) == "null" {
		return nil, fmt.Errorf("an answer with errors or without data: %.300s", body)
	}
	d := json.NewDecoder(bytes.NewReader(a.Data))
	d.UseNumber()
	var v any
	return v, d.Decode(&v)
}

// ask sends a question as a query and returns the answer and its Cache-Status.
func ask(ctx context.Context, client *http.Client, svc *service, q followQuestion) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, svc.url+q.path, bytes.NewReader(q.body(false)))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", svc.key)
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("%s: HTTP %d: %.300s", q.sel, resp.StatusCode, b)
	}
	return b, resp.Header.Get("Cache-Status"), nil
}

func scrapeRecomputations(url string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	v, _ := promSum(string(b), "emsquery_streams_recomputations_total")
	return v, nil
}

// measureHits asks followHitAsks questions every second for rounds seconds, after a first
// round that fills the cache, on a service afresh for each change source, without and with a
// writer committing to another database every 100 ms.
func measureHits(ctx context.Context, c *pgtest.Cluster, bin, tmp string, db dbTarget, records int, qs []followQuestion, rounds int) ([]followHit, error) {
	if err := c.Exec(ctx, "postgres", `DROP DATABASE IF EXISTS `+followDB); err != nil {
		return nil, err
	}
	if err := c.Exec(ctx, "postgres", `CREATE DATABASE `+followDB); err != nil {
		return nil, err
	}
	if err := c.Exec(ctx, followDB, `CREATE TABLE staging (id serial PRIMARY KEY, at timestamptz DEFAULT now())`); err != nil {
		return nil, err
	}
	qs = qs[:min(followHitAsks, len(qs))]
	client := &http.Client{}
	defer client.CloseIdleConnections()
	var out []followHit
	for _, source := range []string{"replication", "snapshot"} {
		for _, writer := range []bool{false, true} {
			h := followHit{Source: source, Writer: writer}
			err := func() error {
				wctx, stop := context.WithCancel(ctx)
				var wg sync.WaitGroup
				defer func() { stop(); wg.Wait() }()
				if writer {
					wg.Go(func() {
						for wctx.Err() == nil {
							_ = c.Exec(wctx, followDB, `INSERT INTO staging DEFAULT VALUES`)
							select {
							case <-wctx.Done():
							case <-time.After(followWriterGap):
							}
						}
					})
				}
				svc, err := startServiceWith(ctx, bin, tmp, db, records, true, false, map[string]string{"CACHE__CHANGES": source})
				if err != nil {
					return err
				}
				defer svc.stop()
				for round := 0; round <= rounds; round++ {
					next := time.Now().Add(time.Second)
					for _, q := range qs {
						_, status, err := ask(ctx, client, svc, q)
						if err != nil {
							return err
						}
						if round > 0 { // the first round fills the cache
							h.Asked++
							if strings.HasPrefix(status, answercache.StatusHit) {
								h.Hits++
							}
						}
					}
					time.Sleep(time.Until(next))
				}
				return nil
			}()
			if err != nil {
				return out, fmt.Errorf("follow: hit rate, %s: %w", source, err)
			}
			progress("follow  hit rate, %-11s writer %-5v: %d of %d", source, writer, h.Hits, h.Asked)
			out = append(out, h)
		}
	}
	return out, nil
}

// renderFollow writes the scenario's results as markdown.
func renderFollow(r followResult, o options) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	fields := map[string]int{}
	var names []string
	for _, q := range r.Questions {
		if fields[q.field] == 0 {
			names = append(names, q.field)
		}
		fields[q.field]++
	}
	mix := make([]string, len(names))
	for i, n := range names {
		mix[i] = fmt.Sprintf("%d `%s`", fields[n], n)
	}
	p("Run of %s UTC on %s records, `CACHE__CHANGES=replication`: %s streams on %d questions (%s), %s of %s records; the machine's load average (1, 5, 15 min) %s before, %s after.\n\n",
		r.When.Format("2006-01-02 15:04"), count(r.Records), count(r.Streams), len(r.Questions), strings.Join(mix, ", "), plural(len(r.Loads), "load"), count(o.follow.rows), r.LoadAvg[0], r.LoadAvg[1])
	w := latencies{}
	allGot, wrong, extra := true, 0, 0
	var liveFact, recFact int64
	var liveMS, recMS float64
	for _, l := range r.Loads {
		w.Max, w.P99 = max(w.Max, l.Lat.Max), max(w.P99, l.Lat.P99)
		allGot = allGot && l.Got == r.Streams
		wrong, extra = wrong+l.Wrong, extra+l.Extra
		liveFact, liveMS = liveFact+l.Live.FactCalls, liveMS+l.Live.FactMS
		recFact, recMS = recFact+l.Recompute.FactCalls, recMS+l.Recompute.FactMS
	}
	n := float64(max(len(r.Loads), 1))
	maxCell := "no answer on some stream"
	if w.Max < time.Duration(1<<63-1) {
		maxCell = ms(w.Max) + " ms"
	}
	verdict := func(ok bool) string {
		if ok {
			return "MET"
		}
		return "**MISSED**"
	}
	p("| Target | Measured | |\n|---|---|---|\n")
	p("| every stream has its new answer ≤ 1 s after the load's commit (worst load) | max %s, p99 %s ms; wrong answers %d, extra events %d | %s |\n",
		maxCell, ms(w.P99), wrong, extra, verdict(allGot && wrong == 0 && w.Max <= liveLatency))
	p("| no statement on `fact_record` for these answers, per load (against recomputing the %d questions) | %.1f statements, %.0f ms of database time (recomputing: %.1f statements, %.0f ms) | %s |\n",
		len(r.Questions), float64(liveFact)/n, liveMS/n, float64(recFact)/n, recMS/n, verdict(liveFact == 0))
	rate := func(src string, writer bool) (followHit, bool) {
		for _, h := range r.Hits {
			if h.Source == src && h.Writer == writer {
				return h, true
			}
		}
		return followHit{}, false
	}
	for _, src := range []string{"replication", "snapshot"} {
		quiet, ok1 := rate(src, false)
		busy, ok2 := rate(src, true)
		if !ok1 || !ok2 {
			continue
		}
		target, v := "(no target: for comparison)", "—"
		if src == "replication" {
			target = "as without it"
			v = verdict(busy.Asked > 0 && quiet.Asked > 0 && float64(busy.Hits)/float64(busy.Asked) >= float64(quiet.Hits)/float64(quiet.Asked)-0.05)
		}
		p("| `%s`: hit rate of %d repeated questions (each asked every second) with a writer committing to another database every 100 ms %s | %s with it, %s without | %s |\n",
			src, min(followHitAsks, len(r.Questions)), target, pct(busy.Hits, busy.Asked), pct(quiet.Hits, quiet.Asked), v)
	}
	p("\n| Load | Records | Streams with it ≤ 1 s | first ms | p50 ms | p99 ms | max ms | Recomputations | Statements on fact_record | their ms | All statements | Recomputing: on fact_record | their ms | Wrong |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for i, l := range r.Loads {
		mc := ms(l.Lat.Max)
		if l.Lat.N < r.Streams {
			mc = "none on some"
		}
		p("| %d | %s | %d | %s | %s | %s | %s | %.0f | %d | %.0f | %d | %d | %.0f | %d |\n", i+1, count(l.Rows), l.Got, ms(l.Lat.Min), ms(l.Lat.P50), ms(l.Lat.P99), mc,
			l.Recomputations, l.Live.FactCalls, l.Live.FactMS, l.Live.Calls, l.Recompute.FactCalls, l.Recompute.FactMS, l.Wrong)
	}
	p("\n")
	return b.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func pct(a, b int) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f %% (%d of %d)", 100*float64(a)/float64(b), a, b)
}

// followSet is the data set the scenario runs on: the largest.
func followSet(sets []*dataSet) *dataSet {
	var s *dataSet
	for _, x := range sets {
		if !x.RSSOnly && (s == nil || x.Records > s.Records) {
			s = x
		}
	}
	return s
}
