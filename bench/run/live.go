package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/procstat"
)

// Live answers (contract 6.11): the targets of subscriptions over Server-Sent Events,
// measured from outside, on the real binary, with this process as the only client. For each
// scenario the service is started afresh (its peak RSS is the scenario's), with its answer cache
// on, a data-version poll of half an hour (CACHE__MAX_STALENESS 3600: only the NOTIFY tells it
// of a change, so the time is measured from the NOTIFY) and its Prometheus exporter on; then
//
//   - streams are opened (each its own HTTP connection, read by a goroutine of its own) and each
//     is awaited until its first answer, which is checked against SQL;
//   - each round INSERTs rows into fact_record (committed), scrapes the service's metrics, sends
//     NOTIFY emsquery_refresh and takes the time; every stream's next `next` event is timed from
//     that moment and its count checked against SQL; half a second after the last one the
//     metrics are scraped again: the feeds' recomputations, the statements of the question
//     (db_client_operation_duration_seconds_count of "records count") and the events sent;
//   - the service's VmRSS is sampled every 5 ms throughout (and its VmHWM at the end).
//
// The rows inserted are deleted at the end.

// The live answers' targets.
const (
	liveLatency = time.Second // every stream has the new answer within this of the NOTIFY
	liveRSS     = 150 << 20   // the service's peak RSS with 1,000 streams on one question
	liveSettle  = 500 * time.Millisecond
	liveOpeners = 32 // streams opened at once
	liveChannel = "emsquery_refresh"
	liveOpName  = "records count"
)

type liveOptions struct {
	streams    int
	questions  int // of the second scenario
	rounds     int
	docSection string
}

// liveScenario is one measurement: streams spread evenly over questions records_count
// questions (1: the whole table; more: one station each).
type liveScenario struct {
	Questions int
	Streams   int
}

func (s liveScenario) name() string {
	if s.Questions == 1 {
		return fmt.Sprintf("%s streams, 1 question", count(s.Streams))
	}
	return fmt.Sprintf("%s streams, %s questions", count(s.Streams), count(s.Questions))
}

// liveRound is what one change measured.
type liveRound struct {
	Inserted       int
	Got            int // streams that had the new answer in time
	Wrong          int // streams whose new answer was not SQL's
	Extra          int // streams that got more than one event
	Lat            latencies
	Recomputations float64 // emsquery_streams_recomputations_total, delta
	Statements     float64 // the question's statements, delta
	StatementTime  float64 // their duration, seconds, delta (the histogram's sum)
	Pushes         float64 // emsquery_streams_pushes_total, delta
}

// liveResult is one scenario's measurement.
type liveResult struct {
	Scenario  liveScenario
	Opened    time.Duration // from the first stream opened until every one had its first answer
	RSSBefore int64         // with no stream open
	RSSOpen   int64         // every stream open with its first answer
	PeakRSS   int64
	Rounds    []liveRound
	LoadAvg   string // /proc/loadavg when the scenario ended
	Heap      string // the heap profile's file, with -profile
}

// latencies summarizes the per-stream times of a round.
type latencies struct {
	N                  int
	Min, Max, P50, P99 time.Duration
}

func summarize(lat []time.Duration) latencies {
	s := slices.Clone(lat)
	slices.Sort(s)
	l := latencies{N: len(s)}
	if len(s) > 0 {
		l.Min, l.Max, l.P50, l.P99 = s[0], s[len(s)-1], percentile(s, 0.50), percentile(s, 0.99)
	}
	return l
}

// worst is the round with the highest maximum, and the highest p50 and p99 of all rounds.
func worst(rounds []liveRound) latencies {
	var w latencies
	for _, r := range rounds {
		w.N, w.Min = max(w.N, r.Lat.N), max(w.Min, r.Lat.Min)
		w.Max, w.P50, w.P99 = max(w.Max, r.Lat.Max), max(w.P50, r.Lat.P50), max(w.P99, r.Lat.P99)
	}
	return w
}

// liveStream is one open subscription and the next events read from it.
type liveStream struct {
	q      int // its question
	body   io.ReadCloser
	cancel context.CancelFunc

	mu     sync.Mutex
	events []liveEvent
	err    error // why reading ended (nil: still reading, or a clean end)
	ended  bool
}

type liveEvent struct {
	at   time.Time
	data string
}

func (st *liveStream) count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.events)
}

func (st *liveStream) event(i int) (liveEvent, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if i >= len(st.events) {
		return liveEvent{}, false
	}
	return st.events[i], true
}

// liveRun is a scenario in progress.
type liveRun struct {
	svc     *service
	metrics string // the Prometheus exporter's URL
	client  *http.Client
	queries []liveQuestion
	streams []*liveStream
	arrived chan struct{} // a next event came (capacity 1)
}

// liveQuestion is a question's request body and its SQL.
type liveQuestion struct {
	body    []byte
	station *string
}

func (q liveQuestion) sqlCount(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var n int64
	var err error
	if q.station == nil {
		err = conn.QueryRow(ctx, `SELECT count(*) FROM fact_record`).Scan(&n)
	} else {
		err = conn.QueryRow(ctx, `SELECT count(*) FROM fact_record WHERE station = $1`, *q.station).Scan(&n)
	}
	return n, err
}

// loadConn is a connection to data set db for a measure that loads records of its own: done
// deletes the records above the highest record_id found now, and closes it.
func loadConn(ctx context.Context, c *pgtest.Cluster, db string) (conn *pgx.Conn, done func(), err error) {
	cfg, err := c.ConnConfig(db)
	if err != nil {
		return nil, nil, err
	}
	if conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		return nil, nil, err
	}
	var firstID int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(record_id), 0) FROM fact_record`).Scan(&firstID); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	return conn, func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `DELETE FROM fact_record WHERE record_id > $1`, firstID)
		conn.Close(context.WithoutCancel(ctx))
	}, nil
}

// measureLive runs both scenarios on the data set s.
func measureLive(ctx context.Context, c *pgtest.Cluster, bin, tmp string, s *dataSet, o options) ([]liveResult, error) {
	conn, done, err := loadConn(ctx, c, s.DB.Name)
	if err != nil {
		return nil, err
	}
	defer done()

	var out []liveResult
	for _, sc := range []liveScenario{{Questions: 1, Streams: o.live.streams}, {Questions: o.live.questions, Streams: o.live.streams}} {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		r, err := liveScenarioRun(ctx, conn, bin, tmp, s, sc, o)
		if err != nil {
			return out, fmt.Errorf("live, %s: %w", sc.name(), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// questions are the scenario's questions: the whole table's count, or the count of one station
// each, the data set's stations first, then made-up names (no records until the rounds add some).
func questions(ctx context.Context, conn *pgx.Conn, n int) ([]liveQuestion, error) {
	if n == 1 {
		b, _ := json.Marshal(map[string]any{"query": `subscription { records_count { count } }`})
		return []liveQuestion{{body: b}}, nil
	}
	rows, err := conn.Query(ctx, `SELECT station FROM fact_record WHERE station IS NOT NULL GROUP BY 1 ORDER BY 1 LIMIT $1`, n)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for i := len(names); i < n; i++ {
		names = append(names, fmt.Sprintf("Live bench station %03d", i+1))
	}
	out := make([]liveQuestion, n)
	for i, name := range names {
		b, _ := json.Marshal(map[string]any{
			"query":     `subscription Count($s: String) { records_count(station: $s) { count } }`,
			"variables": map[string]any{"s": name},
		})
		out[i] = liveQuestion{body: b, station: &name}
	}
	return out, nil
}

func liveScenarioRun(ctx context.Context, conn *pgx.Conn, bin, tmp string, s *dataSet, sc liveScenario, o options) (liveResult, error) {
	res := liveResult{Scenario: sc}
	qs, err := questions(ctx, conn, sc.Questions)
	if err != nil {
		return res, err
	}
	promPort, err := launcher.FreePort()
	if err != nil {
		return res, err
	}
	svc, err := startServiceWith(ctx, bin, tmp, s.DB, s.Records, true, o.profile != "", map[string]string{
		"CACHE__MAX_STALENESS":            "3600",
		"LIMITS__MAX_STREAMS":             strconv.Itoa(sc.Streams),
		"LIMITS__MAX_STREAMS_PER_KEY":     strconv.Itoa(sc.Streams), // the bench's one key holds them all
		"APP__MAX_CONNECTIONS_PER_CLIENT": "0",
		"OTEL_METRICS_EXPORTER":           "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST":   "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT":   strconv.Itoa(promPort),
	})
	if err != nil {
		return res, err
	}
	defer svc.stop()
	run := &liveRun{
		svc:     svc,
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort),
		// One connection per stream: nothing is kept idle, nothing bounds the connections.
		client:  &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true, MaxConnsPerHost: 0}},
		queries: qs,
		arrived: make(chan struct{}, 1),
	}
	defer run.closeAll()

	// The cache is live once the service has read the data version (its age is on /metrics).
	// A stream opened before is answered all the same, and answered again when that first read
	// starts the first version: a recomputation that would fall into the first change's count.
	if err := run.awaitDataVersion(10 * time.Second); err != nil {
		return res, err
	}
	if res.RSSBefore, err = procstat.RSS(svc.pid()); err != nil {
		return res, err
	}
	sampler := procstat.SampleRSS(svc.pid(), 5*time.Millisecond)
	stopSampler := func() {
		if sampler != nil {
			res.PeakRSS, _ = sampler.Stop(true)
			sampler = nil
		}
	}
	defer stopSampler()

	t0 := time.Now()
	if err := run.open(ctx, sc.Streams); err != nil {
		return res, err
	}
	if missing := run.await(ctx, 1, 60*time.Second); missing > 0 {
		return res, fmt.Errorf("%d of %d streams had no first answer within 60 s%s", missing, sc.Streams, run.firstError())
	}
	res.Opened = time.Since(t0)
	if err := run.check(ctx, conn, 0); err != nil {
		return res, fmt.Errorf("first answers: %w", err)
	}
	time.Sleep(200 * time.Millisecond)
	if res.RSSOpen, err = procstat.RSS(svc.pid()); err != nil {
		return res, err
	}
	if svc.pprof != "" {
		res.Heap = filepath.Join(o.profile, fmt.Sprintf("live-%d-questions-heap.pprof", sc.Questions))
		if err := fetchTo(svc.pprof+"/debug/pprof/heap?gc=1", res.Heap); err != nil {
			return res, err
		}
		// The same as text, with runtime.MemStats at its end (StackInuse, HeapInuse, ...).
		if err := fetchTo(svc.pprof+"/debug/pprof/heap?debug=1", strings.TrimSuffix(res.Heap, ".pprof")+".txt"); err != nil {
			return res, err
		}
		if err := fetchTo(svc.pprof+"/debug/pprof/goroutine?debug=1", strings.TrimSuffix(res.Heap, "heap.pprof")+"goroutines.txt"); err != nil {
			return res, err
		}
	}
	progress("live %-28s %d streams open in %.1fs, RSS %.1f MB (%.1f MB before: %.1f KiB per stream)",
		sc.name(), sc.Streams, res.Opened.Seconds(), mb(res.RSSOpen), mb(res.RSSBefore), float64(res.RSSOpen-res.RSSBefore)/1024/float64(sc.Streams))

	for round := 1; round <= o.live.rounds; round++ {
		r, err := run.round(ctx, conn, round)
		if err != nil {
			return res, fmt.Errorf("round %d: %w", round, err)
		}
		res.Rounds = append(res.Rounds, r)
		progress("live %-28s round %d: %d/%d streams with the new answer, first %s ms, max %s, p50 %s, p99 %s; recomputations %.0f, statements %.0f, pushes %.0f",
			sc.name(), round, r.Got, sc.Streams, ms(r.Lat.Min), ms(r.Lat.Max), ms(r.Lat.P50), ms(r.Lat.P99), r.Recomputations, r.Statements, r.Pushes)
	}
	stopSampler()
	res.LoadAvg = loadAverage()
	return res, nil
}

// open opens n streams, spread evenly over the questions (stream i asks question i mod len),
// liveOpeners at a time; each is read by a goroutine of its own.
func (run *liveRun) open(ctx context.Context, n int) error {
	run.streams = make([]*liveStream, n)
	sem := make(chan struct{}, liveOpeners)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, err := run.subscribe(ctx, i%len(run.queries))
			if err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
				return
			}
			run.streams[i] = st
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // the first failure, if any
}

func (run *liveRun) subscribe(ctx context.Context, q int) (*liveStream, error) {
	return run.subscribeAt(ctx, "/graphql", q)
}

// subscribeAt opens a stream on question q at the endpoint path.
func (run *liveRun) subscribeAt(ctx context.Context, path string, q int) (*liveStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, run.svc.url+path, bytes.NewReader(run.queries[q].body))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-API-Key", run.svc.key)
	resp, err := run.client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("HTTP %d, Content-Type %q: %s", resp.StatusCode, ct, b)
	}
	st := &liveStream{q: q, body: resp.Body, cancel: cancel}
	go func() {
		err := readSSE(resp.Body, func(name, data string) bool {
			if name != "next" {
				return true // complete: the end follows
			}
			st.mu.Lock()
			st.events = append(st.events, liveEvent{at: time.Now(), data: data})
			st.mu.Unlock()
			select {
			case run.arrived <- struct{}{}:
			default:
			}
			return true
		})
		st.mu.Lock()
		st.err, st.ended = err, true
		st.mu.Unlock()
	}()
	return st, nil
}

// await waits up to d for every stream to have at least want next events, and returns how many
// have fewer.
func (run *liveRun) await(ctx context.Context, want int, d time.Duration) int {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		missing := 0
		for _, st := range run.streams {
			if st.count() < want {
				missing++
			}
		}
		if missing == 0 {
			return 0
		}
		select {
		case <-run.arrived:
		case <-deadline.C:
			return missing
		case <-ctx.Done():
			return missing
		}
	}
}

func (run *liveRun) firstError() string {
	for _, st := range run.streams {
		st.mu.Lock()
		err, ended := st.err, st.ended
		st.mu.Unlock()
		if ended {
			return fmt.Sprintf(" (a stream ended: %v)", err)
		}
	}
	return ""
}

// check compares event i of every stream with SQL's count; it returns the first mismatch.
func (run *liveRun) check(ctx context.Context, conn *pgx.Conn, i int) error {
	wrong, err := run.wrong(ctx, conn, i)
	if err == nil && wrong > 0 {
		err = fmt.Errorf("%d streams' answers are not SQL's", wrong)
	}
	return err
}

// wrong counts the streams whose event i is missing or not SQL's count of its question.
func (run *liveRun) wrong(ctx context.Context, conn *pgx.Conn, i int) (int, error) {
	want := make([]int64, len(run.queries))
	for q, question := range run.queries {
		n, err := question.sqlCount(ctx, conn)
		if err != nil {
			return 0, err
		}
		want[q] = n
	}
	wrong := 0
	for _, st := range run.streams {
		ev, ok := st.event(i)
		n, isCount := countOf(ev.data)
		if !ok || !isCount || n != want[st.q] {
			wrong++
		}
	}
	return wrong, nil
}

// round makes one change and measures how the streams learn of it.
func (run *liveRun) round(ctx context.Context, conn *pgx.Conn, round int) (liveRound, error) {
	var r liveRound
	// The rows of the change: a load of 1,000 records of one station for one question; one
	// record of each question's station for many.
	var stations []string
	if len(run.queries) == 1 {
		stations = slices.Repeat([]string{"Live bench load"}, 1000)
	} else {
		for _, q := range run.queries {
			stations = append(stations, *q.station)
		}
	}
	tag, err := conn.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station)
		SELECT m.id + s.n, timestamp '2024-06-01 12:00', s.name
		FROM (SELECT max(record_id) AS id FROM fact_record) m, unnest($1::text[]) WITH ORDINALITY AS s(name, n)`, stations)
	if err != nil {
		return r, err
	}
	r.Inserted = int(tag.RowsAffected())
	before, err := run.scrape()
	if err != nil {
		return r, err
	}
	// The clock starts before the NOTIFY is sent: the service may answer before the statement's
	// own reply reaches this process (a busy machine delays it by tens of milliseconds).
	sent := time.Now()
	if _, err := conn.Exec(ctx, "NOTIFY "+liveChannel); err != nil {
		return r, err
	}
	run.await(ctx, round+1, 10*time.Second)
	time.Sleep(liveSettle) // a second recomputation or event would come now
	after, err := run.scrape()
	if err != nil {
		return r, err
	}
	r.Recomputations = after.recomputations - before.recomputations
	r.Statements = after.statements - before.statements
	r.StatementTime = after.statementTime - before.statementTime
	r.Pushes = after.pushes - before.pushes
	var lat []time.Duration
	for _, st := range run.streams {
		ev, ok := st.event(round)
		switch {
		case !ok:
		case ev.at.Sub(sent) <= liveLatency:
			lat = append(lat, ev.at.Sub(sent))
			r.Got++
		default:
			lat = append(lat, ev.at.Sub(sent))
		}
		if st.count() > round+1 {
			r.Extra++
		}
	}
	r.Lat = summarize(lat)
	if r.Lat.N < len(run.streams) {
		// A stream with no new answer at all counts as beyond any bound.
		r.Lat.Max = time.Duration(1<<63 - 1)
	}
	if r.Wrong, err = run.wrong(ctx, conn, round); err != nil {
		return r, err
	}
	return r, nil
}

// liveMetrics are the service's counters the rounds compare.
type liveMetrics struct{ recomputations, statements, statementTime, pushes float64 }

func (run *liveRun) scrape() (liveMetrics, error) {
	var m liveMetrics
	resp, err := http.Get(run.metrics)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return m, err
	}
	text := string(b)
	var ok [4]bool
	m.recomputations, ok[0] = promSum(text, "emsquery_streams_recomputations_total")
	m.statements, ok[1] = promSum(text, "db_client_operation_duration_seconds_count", `db_operation_name="`+liveOpName+`"`)
	m.statementTime, ok[2] = promSum(text, "db_client_operation_duration_seconds_sum", `db_operation_name="`+liveOpName+`"`)
	m.pushes, ok[3] = promSum(text, "emsquery_streams_pushes_total")
	if ok != [4]bool{true, true, true, true} {
		return m, fmt.Errorf("the service's metrics lack a counter (recomputations, statements, their time, pushes found: %v)", ok)
	}
	return m, nil
}

// awaitDataVersion waits until the service's answer cache has read the data version.
func (run *liveRun) awaitDataVersion(limit time.Duration) error {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(run.metrics)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && strings.Contains(string(b), "\nemsquery_cache_data_version_age_seconds") {
			return nil
		}
	}
	return fmt.Errorf("the service did not read the data version within %s", limit)
}

// closeAll ends every stream (the client closes its connection).
func (run *liveRun) closeAll() {
	for _, st := range run.streams {
		if st != nil {
			st.cancel()
			st.body.Close()
		}
	}
	run.client.CloseIdleConnections()
}

func fetchTo(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// liveTarget is one target of the live answers and what was measured against it.
type liveTarget struct {
	Target, Measured string
	Met              bool
	None             bool // no target: measured for comparison
}

func (r liveResult) targets() []liveTarget {
	sc := r.Scenario
	var out []liveTarget
	w := worst(r.Rounds)
	allGot, noneWrong, noExtra := true, true, true
	gotCells := make([]string, len(r.Rounds))
	for i, rd := range r.Rounds {
		allGot = allGot && rd.Got == sc.Streams
		noneWrong = noneWrong && rd.Wrong == 0
		noExtra = noExtra && rd.Extra == 0
		gotCells[i] = strconv.Itoa(rd.Got)
	}
	maxCell := "no answer on some stream"
	if w.Max < time.Duration(1<<63-1) {
		maxCell = ms(w.Max) + " ms"
	}
	out = append(out, liveTarget{
		Target: fmt.Sprintf("%s: every stream has the new answer ≤ 1 s after the NOTIFY (worst of %s)", sc.name(), changes(len(r.Rounds))),
		Measured: fmt.Sprintf("max %s, p50 %s ms, p99 %s ms; streams with it in time per change: %s of %d; wrong answers: %d; extra events: %d",
			maxCell, ms(w.P50), ms(w.P99), strings.Join(gotCells, ", "), sc.Streams, sum(r.Rounds, func(x liveRound) int { return x.Wrong }), sum(r.Rounds, func(x liveRound) int { return x.Extra })),
		Met: allGot && noneWrong && w.Max <= liveLatency,
	})
	rec, st := make([]string, len(r.Rounds)), make([]string, len(r.Rounds))
	once := true
	for i, rd := range r.Rounds {
		rec[i], st[i] = fmt.Sprintf("%.0f", rd.Recomputations), fmt.Sprintf("%.0f", rd.Statements)
		once = once && rd.Recomputations == float64(sc.Questions) && rd.Statements == float64(sc.Questions)
	}
	what := "the statement ran once per change"
	if sc.Questions > 1 {
		what = fmt.Sprintf("one recomputation (one statement) per question per change: %d", sc.Questions)
	}
	out = append(out, liveTarget{
		Target:   fmt.Sprintf("%s: %s", sc.name(), what),
		Measured: fmt.Sprintf("recomputations per change %s; %q statements %s", strings.Join(rec, ", "), liveOpName, strings.Join(st, ", ")),
		Met:      once,
	})
	perStream := float64(r.RSSOpen-r.RSSBefore) / 1024 / float64(sc.Streams)
	rss := liveTarget{
		Target:   fmt.Sprintf("%s: the service's peak RSS < %d MB", sc.name(), liveRSS>>20),
		Measured: fmt.Sprintf("%.1f MB peak (%.1f MB before the streams, %.1f MB with them open: %.0f KiB per stream)", mb(r.PeakRSS), mb(r.RSSBefore), mb(r.RSSOpen), perStream),
		Met:      r.PeakRSS < liveRSS,
	}
	if sc.Questions > 1 {
		rss.Target, rss.None = fmt.Sprintf("%s: the service's peak RSS (no target; for comparison)", sc.name()), true
	}
	out = append(out, rss)
	return out
}

func sum[T any](xs []T, f func(T) int) int {
	n := 0
	for _, x := range xs {
		n += f(x)
	}
	return n
}

// renderLive writes the live answers' results as markdown.
func renderLive(date time.Time, loadBefore string, s *dataSet, o options, results []liveResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	loads := make([]string, len(results))
	for i, r := range results {
		loads[i] = r.LoadAvg
	}
	p("Run of %s UTC on %s records: %s streams per scenario, %s each; the machine's load average (1, 5, 15 min) %s before, %s after each scenario.\n\n",
		date.Format("2006-01-02 15:04"), count(s.Records), count(o.live.streams), changes(o.live.rounds), loadBefore, strings.Join(loads, " / "))
	p("| Target | Measured | |\n|---|---|---|\n")
	for _, r := range results {
		for _, t := range r.targets() {
			v := "MET"
			switch {
			case t.None:
				v = "—"
			case !t.Met:
				v = "**MISSED**"
			}
			p("| %s | %s | %s |\n", t.Target, t.Measured, v)
		}
	}
	p("\nEach change (first ms: the first stream's new answer, which is the service's way from the NOTIFY to a computed answer; the rest is the fan-out to every stream):\n\n" +
		"| Scenario | Change | Rows inserted | Streams with the new answer ≤ 1 s | first ms | p50 ms | p99 ms | max ms | Recomputations | Statements | Statement mean ms | Events sent |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		for i, rd := range r.Rounds {
			maxCell := ms(rd.Lat.Max)
			if rd.Lat.N < r.Scenario.Streams {
				maxCell = "none on some"
			}
			mean := "—"
			if rd.Statements > 0 {
				mean = ms(time.Duration(rd.StatementTime / rd.Statements * float64(time.Second)))
			}
			p("| %s | %d | %s | %d | %s | %s | %s | %s | %.0f | %.0f | %s | %.0f |\n", r.Scenario.name(), i+1, count(rd.Inserted), rd.Got,
				ms(rd.Lat.Min), ms(rd.Lat.P50), ms(rd.Lat.P99), maxCell, rd.Recomputations, rd.Statements, mean, rd.Pushes)
		}
	}
	p("\n")
	return b.String()
}

func changes(n int) string {
	if n == 1 {
		return "1 change"
	}
	return strconv.Itoa(n) + " changes"
}
