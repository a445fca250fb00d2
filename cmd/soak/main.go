// Command soak runs the service for a long while under a steady mixed load and checks that it
// stays healthy: no error at all, and flat memory (RSS) and goroutine count. It is `make soak`,
// not part of `make test`.
//
// It builds the service, starts a throwaway PostgreSQL cluster (internal/pgtest) on the loopback
// interface, loads the demo generator's data, starts an OTLP receiver of its own
// (internal/otlptest, counting what arrives), starts the real binary with every telemetry signal
// on (metrics on the Prometheus scrape endpoint and pushed over OTLP every 10 s, a trace for every
// request over OTLP) and a named key from a keys file (AUTHENTICATION__API_KEYS_FILE, with a rate
// limit above the load's), and sends a mix of questions at a fixed rate: records_count,
// distinct_values, unique_counts, station_resources, resources, a page of patients and of
// oxygens, record_series and record_stats on /graphql and main_report and main_report_summary on
// /serve/graphql, with filters of the comparison operators and of IN and NOT_EQUALS.
//
// The answer cache is on (its default). Fixed questions alone would all be answered from memory
// after their first time, so one request in four is a question with drawn values (a period and
// stations; seeded, so every run sends the same), most of them new (misses), and every
// SOAK_NOTIFY_EVERY the soak sends a NOTIFY on the cache's channel, which drops every answer in
// memory (an invalidation). The data does not change, so every answer must be 200 without errors
// and byte for byte the answer the same question got the first time, from memory or not. The
// summary gives the service's own cache counters (hits, misses, coalesced, bypasses,
// invalidations by reason, from its metrics) beside the Cache-Status headers the load saw; the
// run fails when no answer came from memory, none was computed, or a NOTIFY was not seen.
//
// Every 10 s it samples the process's VmRSS (/proc/<pid>/status) and go_goroutine_count (the
// service's runtime metrics).
//
// Growth is judged between two quiet samples, taken with no request in flight (goroutines come
// and go with requests; a leak stays): the baseline after a warm-up (a tenth of the run, 10 s to
// 60 s; the load pauses for it) and the end after the load. The run fails when the end exceeds
// the baseline by more than SOAK_MAX_RSS_GROWTH percent of RSS (at least 16 MiB) or
// SOAK_MAX_GOROUTINE_GROWTH goroutines, when a request fails, when no span or metric export
// arrives at the receiver or the service logs a failed export, or when the service does not
// exit 0 on SIGTERM at the end. A load that falls behind its rate (every worker busy: the machine,
// not the service) is reported, not failed.
//
// Settings (environment):
//
//	SOAK_DURATION              10m     how long the load runs after the warm-up
//	SOAK_RATE                  50      requests per second
//	SOAK_RECORDS               200000  demo records to load
//	SOAK_MAX_RSS_GROWTH        20      percent
//	SOAK_MAX_GOROUTINE_GROWTH  5       goroutines
//	SOAK_NOTIFY_EVERY          30s     how often a NOTIFY on the cache's channel is sent
//
// The load only ever goes to 127.0.0.1, stops by itself after SOAK_DURATION, and Ctrl-C ends it
// early (the cluster and the service are stopped either way).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/otlptest"
	"github.com/emsanalytics/emsquery/internal/pgtest"
)

func main() {
	os.Exit(run())
}

type settings struct {
	duration       time.Duration
	rate           int
	records        int
	maxRSSGrowth   float64
	maxGoroutineUp int
	notifyEvery    time.Duration
}

func readSettings() (settings, error) {
	s := settings{duration: 10 * time.Minute, rate: 50, records: 200_000, maxRSSGrowth: 20, maxGoroutineUp: 5, notifyEvery: 30 * time.Second}
	var errs []error
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"SOAK_DURATION", &s.duration}, {"SOAK_NOTIFY_EVERY", &s.notifyEvery}} {
		if v := os.Getenv(d.name); v != "" {
			t, err := time.ParseDuration(v)
			if err != nil || t <= 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive duration (e.g. 10m)", d.name, v))
			}
			*d.dst = t
		}
	}
	ints := []struct {
		name string
		dst  *int
	}{{"SOAK_RATE", &s.rate}, {"SOAK_RECORDS", &s.records}, {"SOAK_MAX_GOROUTINE_GROWTH", &s.maxGoroutineUp}}
	for _, i := range ints {
		if v := os.Getenv(i.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || (n == 0 && i.name != "SOAK_MAX_GOROUTINE_GROWTH") {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive number", i.name, v))
			}
			*i.dst = n
		}
	}
	if v := os.Getenv("SOAK_MAX_RSS_GROWTH"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			errs = append(errs, fmt.Errorf("SOAK_MAX_RSS_GROWTH: %q is not a percentage", v))
		}
		s.maxRSSGrowth = f
	}
	if s.rate > 1000 {
		errs = append(errs, fmt.Errorf("SOAK_RATE: %d is more than this soak sends (1000)", s.rate))
	}
	return s, errors.Join(errs...)
}

func run() int {
	s, err := readSettings()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := soak(ctx, s); err != nil {
		fmt.Fprintln(os.Stderr, "soak: FAIL:", err)
		return 1
	}
	fmt.Println("soak: PASS")
	return 0
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func soak(ctx context.Context, s settings) error {
	tmp, err := os.MkdirTemp("", "emsquery-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	progress("building the service")
	bin := filepath.Join(tmp, "emsquery")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = moduleRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}

	progress("starting a PostgreSQL cluster")
	cluster, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		return fmt.Errorf("start a PostgreSQL cluster: %w", err)
	}
	defer cluster.Destroy()
	stations, err := load(ctx, cluster, s.records)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	collector, stopCollector := otlptest.Start(ln)
	defer stopCollector()
	svc, err := startService(ctx, bin, tmp, cluster, ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		return err
	}
	defer svc.kill()

	queries := mix()
	warmup := min(max(s.duration/10, 10*time.Second), time.Minute)
	progress("load: %d req/s of %d fixed questions and drawn ones (one in %d) for %s after a %s warm-up, a NOTIFY every %s; pid %d",
		s.rate, len(queries), varyingEvery, s.duration, warmup, s.notifyEvery, svc.cmd.Process.Pid)
	ld := newLoad(svc, queries, newVarying(stations), s.rate)
	ld.start()
	defer ld.stop()
	nt, err := startNotifier(ctx, cluster, s.notifyEvery)
	if err != nil {
		return err
	}
	defer nt.stop()

	var samples []sample
	take := func(phase string) error {
		sm, err := svc.sample()
		if err != nil {
			return err
		}
		sm.at, sm.phase, sm.requests, sm.failures = time.Now(), phase, ld.sent.Load(), ld.failed.Load()
		samples = append(samples, sm)
		return nil
	}
	if err := take("first"); err != nil {
		return err
	}
	began := time.Now()
	end := began.Add(warmup + s.duration)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	lastReport := began
	interrupted, warm := false, false
	var atStart map[string]int64 // the cache counters at the baseline
loop:
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			interrupted = true
			break loop
		case <-svc.exited:
			return fmt.Errorf("the service exited during the soak:\n%s", svc.tail())
		case <-tick.C:
		}
		phase := "run"
		switch {
		case time.Since(began) < warmup:
			phase = "warm-up"
		case !warm:
			// The baseline is taken with no request in flight, as the end is: goroutines
			// come and go with the requests, a leak stays.
			warm, phase = true, "start"
			paused := time.Now()
			ld.quiet()
			end = end.Add(time.Since(paused)) // the load runs SOAK_DURATION after the baseline
			if atStart, err = svc.cacheCounters(); err != nil {
				return err
			}
		}
		err := take(phase)
		ld.resume()
		if err != nil {
			return err
		}
		if time.Since(lastReport) >= time.Minute {
			lastReport = time.Now()
			sm := samples[len(samples)-1]
			progress("%5s  %7d requests  %d failed  RSS %5.1f MiB  goroutines %d",
				time.Since(began).Round(time.Second), sm.requests, sm.failures, mib(sm.rss), sm.goroutines)
		}
	}
	ld.stop()
	nt.stop()
	ld.quiet()
	if err := take("end"); err != nil {
		return err
	}
	counters, cacheErr := svc.cacheCounters()
	exit, err := svc.stop()
	rep := report(s, samples, ld, exit, err, time.Since(began))
	rep.cache(counters, atStart, cacheErr, ld, nt.sent.Load())
	rep.telemetry(collector, svc)
	fmt.Print(rep.text)
	if interrupted {
		return errors.New("interrupted")
	}
	if len(rep.problems) > 0 {
		return errors.New(strings.Join(rep.problems, "; "))
	}
	return nil
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// load creates the soak's database, fills it with the demo generator's data and returns the
// stations' names (for the drawn questions).
func load(ctx context.Context, c *pgtest.Cluster, records int) ([]string, error) {
	if err := c.CreateDatabase(ctx, "soak", false); err != nil {
		return nil, err
	}
	conn, err := connect(ctx, c)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	d, err := demodata.New(demodata.Config{Records: records, Seed: demodata.DefaultSeed})
	if err != nil {
		return nil, err
	}
	progress("loading %d demo records", records)
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{ApplySchema: true}); err != nil {
		return nil, fmt.Errorf("load demo data: %w", err)
	}
	const q = `SELECT station_name FROM dim_station ORDER BY station_name`
	rows, _ := conn.Query(ctx, q)
	stations, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("stations: %w", err)
	}
	if len(stations) < 2 {
		return nil, fmt.Errorf("stations: %d in the demo data, want at least 2", len(stations))
	}
	return stations, nil
}

func connect(ctx context.Context, c *pgtest.Cluster) (*pgx.Conn, error) {
	cfg, err := c.ConnConfig("soak")
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// notifyChannel is the service's default CACHE__NOTIFY_CHANNEL, which the soak leaves as is.
const notifyChannel = "emsquery_refresh"

// notifier sends a NOTIFY on the cache's channel at a fixed interval, as an ETL does after a
// load, from its own connection.
type notifier struct {
	sent, failed atomic.Int64
	done         chan struct{}
	wg           sync.WaitGroup
	once         sync.Once
}

func startNotifier(ctx context.Context, c *pgtest.Cluster, every time.Duration) (*notifier, error) {
	conn, err := connect(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("notifier: %w", err)
	}
	n := &notifier{done: make(chan struct{})}
	n.wg.Go(func() {
		defer conn.Close(context.WithoutCancel(ctx))
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-n.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			const q = `SELECT pg_notify($1, 'soak')`
			if _, err := conn.Exec(ctx, q, notifyChannel); err != nil {
				n.failed.Add(1)
				progress("NOTIFY failed: %v", err)
				continue
			}
			n.sent.Add(1)
		}
	})
	return n, nil
}

func (n *notifier) stop() {
	n.once.Do(func() { close(n.done) })
	n.wg.Wait()
}

// query is one request of the mix.
type query struct {
	name, path, body string
}

// mix is the soak's queries, on the demo data's two years (2024, 2025).
func mix() []query {
	q := func(name, path, gql string) query {
		b, _ := json.Marshal(map[string]any{"query": gql})
		return query{name, path, string(b)}
	}
	return []query{
		q("records_count", "/graphql", `{ records_count { count } }`),
		q("records_count station", "/graphql", `{ records_count(station: "Ålesund Sør") { count } }`),
		q("distinct_values", "/graphql", `{ distinct_values(columns: ["degree_of_urgency", "municipality", "gender"], start_date: "2025-03-01", end_date: "2025-03-31") { column value } }`),
		q("unique_counts", "/graphql", `{ unique_counts(columns: ["degree_of_urgency", "transported"], start_date: "2025-04-01", end_date: "2025-04-30", use_or: true,
			filters: [{column: "distance", operator: GREATER_THAN, value: "50"}, {column: "gender", operator: EQUALS, value: "other"}]) { column value count } }`),
		q("station_resources", "/graphql", `{ station_resources { station_id station_name resources { resource_id } } }`),
		q("main_report", "/serve/graphql", `{ main_report(start_date: "2025-05-01", end_date: "2025-05-31", limit: 100, offset: 200,
			filters: [{column: "degree_of_urgency", operator: EQUALS, value: "A"}]) { total rows { record_id occurred_at station callsign distance transported patient_age oxygen_routes } } }`),
		q("main_report_summary", "/serve/graphql", `{ main_report_summary(start_date: "2025-06-01", end_date: "2025-08-31",
			filters: [{column: "transported", operator: EQUALS, value: "true"}]) { records distinct_resources distinct_patients
			average_distance average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`),
		q("resources", "/graphql", `{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`),
		q("patients page", "/graphql", `{ patients(limit: 500, after: 1000) { sk_patient age date_of_birth gender weight } }`),
		q("oxygens page", "/graphql", `{ oxygens(limit: 500, after: 2000) { sk_oxygen record_id route flow_rate administered_at } }`),
		q("record_series", "/graphql", `{ record_series(start_date: "2025-01-01", end_date: "2025-12-31", bucket: MONTH, group_by: "degree_of_urgency",
			filters: [{column: "degree_of_urgency", operator: IN, values: ["A", "B"]}]) { bucket column value count } }`),
		q("record_stats", "/graphql", `{ record_stats(start_date: "2025-01-01", end_date: "2025-06-30", measure: "response_time_s", group_by: ["degree_of_urgency"],
			bucket: QUARTER, percentiles: [0.5, 0.9], target: 720, filters: [{column: "transported", operator: NOT_EQUALS, value: "false"}])
			{ bucket group { column value } count measured min max avg percentiles { p value } within_target within_target_share } }`),
	}
}

// varyingEvery: one request in this many is a drawn question (newVarying), the others the fixed
// mix in turn.
const varyingEvery = 4

// newVarying returns a generator of questions with drawn values, on the demo data's two years
// and its stations: record_series of a week of two stations (IN), unique_counts of a month
// without one station (NOT_EQUALS), record_stats of two weeks of one station. Nearly every
// series and stats question is new (a miss); the month and station of unique_counts repeat
// (24 months by the stations), so some of those are hits until the next NOTIFY. The seed is
// fixed: every run sends the same questions in the same order.
func newVarying(stations []string) func() query {
	r := mrand.New(mrand.NewPCG(2026, 14))
	var mu sync.Mutex
	first := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	day := func(t time.Time) string { return t.Format(time.DateOnly) }
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return func() query {
		mu.Lock()
		defer mu.Unlock()
		var name, gql string
		switch r.IntN(3) {
		case 0:
			from := first.AddDate(0, 0, r.IntN(731-7))
			a, b := stations[r.IntN(len(stations))], stations[r.IntN(len(stations))]
			name = "record_series drawn"
			gql = fmt.Sprintf(`{ record_series(start_date: %q, end_date: %q, bucket: DAY, filters: [{column: "station", operator: IN, values: [%s, %s]}]) { bucket count } }`,
				day(from), day(from.AddDate(0, 0, 6)), quote(a), quote(b))
		case 1:
			from := first.AddDate(0, r.IntN(24), 0)
			name = "unique_counts drawn"
			gql = fmt.Sprintf(`{ unique_counts(columns: ["degree_of_urgency", "transported"], start_date: %q, end_date: %q, filters: [{column: "station", operator: NOT_EQUALS, value: %s}]) { column value count } }`,
				day(from), day(from.AddDate(0, 1, -1)), quote(stations[r.IntN(len(stations))]))
		default:
			from := first.AddDate(0, 0, r.IntN(731-14))
			name = "record_stats drawn"
			gql = fmt.Sprintf(`{ record_stats(start_date: %q, end_date: %q, measure: "response_time_s", group_by: ["degree_of_urgency"], target: 720, filters: [{column: "station", operator: EQUALS, value: %s}]) { group { value } count measured avg percentiles { p value } within_target } }`,
				day(from), day(from.AddDate(0, 0, 13)), quote(stations[r.IntN(len(stations))]))
		}
		b, _ := json.Marshal(map[string]any{"query": gql})
		return query{name, "/graphql", string(b)}
	}
}

// service is the running binary.
type service struct {
	cmd     *exec.Cmd
	url     string
	metrics string
	key     string
	out     *os.File
	exited  chan struct{}
	exit    int
}

func startService(ctx context.Context, bin, tmp string, c *pgtest.Cluster, collectorPort int) (*service, error) {
	port, err := pgtest.FreePort()
	if err != nil {
		return nil, err
	}
	promPort, err := pgtest.FreePort()
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	out, err := os.Create(filepath.Join(tmp, "service.out"))
	if err != nil {
		return nil, err
	}
	// One named key with every scope and a rate limit well above the load's: every request
	// passes the scope and rate checks.
	digest := sha256.Sum256([]byte(hex.EncodeToString(key)))
	keysFile := filepath.Join(tmp, "keys.json")
	entry := fmt.Sprintf(`[{"name": "soak", "sha256": %q, "scopes": ["graphql", "serve", "lookups", "export"], "rate_per_second": 5000, "burst": 5000}]`, hex.EncodeToString(digest[:]))
	if err := os.WriteFile(keysFile, []byte(entry), 0o600); err != nil {
		return nil, err
	}
	settings := map[string]string{
		"APP__HOST": "127.0.0.1", "APP__PORT": strconv.Itoa(port),
		"AUTHENTICATION__API_KEYS_FILE": keysFile,
		"DATABASE__HOST":                c.Host(), "DATABASE__PORT": strconv.Itoa(c.Port()), "DATABASE__NAME": "soak",
		"DATABASE__USERNAME": "postgres", "DATABASE__PASSWORD": c.Password(), "DATABASE__ENCRYPT": "no",
		"LOG__PATH": filepath.Join(tmp, "logs"), "LOG__LEVEL": "WARNING",
		"OTEL_METRICS_EXPORTER": "prometheus,otlp", "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(promPort),
		"OTEL_METRIC_EXPORT_INTERVAL":   "10000",
		"OTEL_TRACES_EXPORTER":          "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT":   "http://127.0.0.1:" + strconv.Itoa(collectorPort),
		"OTEL_EXPORTER_OTLP_PROTOCOL":   "http/protobuf",
	}
	cmd := exec.Command(bin)
	cmd.Dir = tmp
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		own := strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "OTEL_")
		for _, p := range []string{"APP__", "DATABASE__", "SECURITY__", "AUTHENTICATION__", "LOG__", "LIMITS__"} {
			own = own || strings.HasPrefix(k, p)
		}
		if !own {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	svc := &service{cmd: cmd, url: "http://127.0.0.1:" + strconv.Itoa(port), metrics: "http://127.0.0.1:" + strconv.Itoa(promPort) + "/metrics",
		key: hex.EncodeToString(key), out: out, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		svc.exit = cmd.ProcessState.ExitCode()
		close(svc.exited)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(svc.url + "/v1/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return svc, nil
			}
		}
		select {
		case <-svc.exited:
			return nil, fmt.Errorf("the service exited with code %d:\n%s", svc.exit, svc.tail())
		case <-ctx.Done():
			svc.kill()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			svc.kill()
			return nil, fmt.Errorf("the service is not healthy after 15s:\n%s", svc.tail())
		}
	}
}

// tail is the end of the service's output.
func (s *service) tail() string {
	b, _ := os.ReadFile(s.out.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop sends SIGTERM and waits for the exit.
func (s *service) stop() (int, error) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.exit, nil
	case <-time.After(30 * time.Second):
		s.kill()
		return -1, errors.New("the service did not exit within 30s of SIGTERM")
	}
}

func (s *service) kill() {
	select {
	case <-s.exited:
	default:
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.out.Close()
}

// sample is one measurement of the process.
type sample struct {
	at         time.Time
	phase      string
	rss        int64 // bytes
	goroutines int64
	requests   int64
	failures   int64
}

func (s *service) sample() (sample, error) {
	var sm sample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return sm, fmt.Errorf("read the service's RSS: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return sm, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			sm.rss = kb << 10
		}
	}
	resp, err := http.Get(s.metrics)
	if err != nil {
		return sm, fmt.Errorf("scrape the service's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "go_goroutine_count") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return sm, fmt.Errorf("go_goroutine_count %q: %w", line, err)
			}
			sm.goroutines, found = int64(v), true
		}
	}
	if !found {
		return sm, errors.New("the service's metrics have no go_goroutine_count")
	}
	return sm, nil
}

// cacheCounters reads the service's cache counters from its Prometheus endpoint, summed over
// endpoints: hits, misses, coalesced, bypasses, and "invalidations <reason>" per reason.
func (s *service) cacheCounters() (map[string]int64, error) {
	resp, err := http.Get(s.metrics)
	if err != nil {
		return nil, fmt.Errorf("scrape the service's metrics: %w", err)
	}
	defer resp.Body.Close()
	const prefix, reasonLabel = "emsquery_cache_", `emsquery_cache_invalidation_reason="`
	out := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(line, "_total")
		if !slices.Contains([]string{"hits", "misses", "coalesced", "bypasses", "invalidations"}, name) || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", prefix, line, err)
		}
		if name == "invalidations" {
			_, r, ok := strings.Cut(rest, reasonLabel)
			r, _, _ = strings.Cut(r, `"`)
			if !ok {
				r = "unknown"
			}
			name += " " + r
		}
		out[name] += int64(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the service's metrics: %w", err)
	}
	return out, nil
}

// loadGen sends the mix at a fixed rate from a pool of workers; a tick that finds every worker
// busy is counted as behind (the service did not keep up).
type loadGen struct {
	svc     *service
	queries []query
	varying func() query
	rate    int
	client  *http.Client
	jobs    chan int
	wg      sync.WaitGroup
	done    chan struct{}
	once    sync.Once

	sent, failed, behind atomic.Int64
	inflight             atomic.Int64
	paused               atomic.Bool
	mu                   sync.Mutex
	first                map[string][]byte // the first answer of each question (path and body)
	cacheStatus          map[string]int64  // answers by their Cache-Status header
	latencies            map[string][]time.Duration
	errs                 map[string]int // by kind
	examples             []string
}

// workers bounds the requests in flight; a tick that finds them all busy is skipped and counted.
const workers = 32

func newLoad(svc *service, queries []query, varying func() query, rate int) *loadGen {
	return &loadGen{
		svc: svc, queries: queries, varying: varying, rate: rate, cacheStatus: map[string]int64{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}},
		jobs:   make(chan int), done: make(chan struct{}),
		first: map[string][]byte{}, latencies: map[string][]time.Duration{}, errs: map[string]int{},
	}
}

func (l *loadGen) start() {
	for range workers {
		l.wg.Go(func() {
			for i := range l.jobs {
				if i%varyingEvery == varyingEvery-1 {
					l.do(l.varying())
				} else {
					l.do(l.queries[(i-i/varyingEvery)%len(l.queries)])
				}
			}
		})
	}
	l.wg.Go(func() {
		defer close(l.jobs)
		t := time.NewTicker(time.Second / time.Duration(l.rate))
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			case <-t.C:
			}
			if l.paused.Load() {
				continue
			}
			select {
			case l.jobs <- i:
			default:
				l.behind.Add(1) // every worker busy: the load fell behind its rate
			}
		}
	})
}

// quietWait is how long after the last request (and the load's connections closed) a quiet
// sample is taken. fasthttp keeps an idle worker goroutine for 10 s and looks for such workers
// every 10 s, so after 20 s none of the load's is left; the runtime metrics are at most a second
// old.
const quietWait = 22 * time.Second

// quiet pauses the load until no request is in flight, closes the load's kept-alive
// connections (each holds a goroutine of the server's) and waits for the runtime metrics to
// catch up.
func (l *loadGen) quiet() {
	l.paused.Store(true)
	for deadline := time.Now().Add(30 * time.Second); l.inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	l.client.CloseIdleConnections()
	time.Sleep(quietWait)
}

func (l *loadGen) resume() { l.paused.Store(false) }

func (l *loadGen) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

func (l *loadGen) fail(kind, example string) {
	l.failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs[kind]++
	if len(l.examples) < 10 {
		l.examples = append(l.examples, time.Now().Format("15:04:05")+" "+example)
	}
}

func (l *loadGen) do(q query) {
	l.sent.Add(1)
	l.inflight.Add(1)
	defer l.inflight.Add(-1)
	req, _ := http.NewRequest(http.MethodPost, l.svc.url+q.path, strings.NewReader(q.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", l.svc.key)
	start := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		l.fail("transport", q.name+": "+err.Error())
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		l.fail("transport", q.name+": "+err.Error())
		return
	}
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"errors"`)) {
		l.fail("answer", fmt.Sprintf("%s: %d %.300s", q.name, resp.StatusCode, body))
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latencies[q.name] = append(l.latencies[q.name], took)
	l.cacheStatus[resp.Header.Get("Cache-Status")]++
	key := q.path + " " + q.body
	if f, ok := l.first[key]; !ok {
		l.first[key] = body
	} else if !bytes.Equal(f, body) {
		l.mu.Unlock()
		l.fail("changed", fmt.Sprintf("%s: the answer differs from the first one: %.300s", q.name, body))
		l.mu.Lock()
	}
}

type result struct {
	text     string
	problems []string
}

// cache adds the service's cache counters and the Cache-Status headers the load saw, and fails
// the run when the cache was not exercised: no answer from memory, none computed, or a NOTIFY
// sent that the service did not act on.
func (r *result) cache(c, atStart map[string]int64, err error, l *loadGen, notifies int64) {
	if err != nil {
		r.problems = append(r.problems, err.Error())
		return
	}
	r.text += fmt.Sprintf("cache (service metrics): %d hits, %d misses, %d coalesced, %d bypasses; invalidations: %d notified (%d NOTIFY sent), %d data_changed, %d reconnected\n",
		c["hits"], c["misses"], c["coalesced"], c["bypasses"], c["invalidations notified"], notifies, c["invalidations data_changed"], c["invalidations reconnected"])
	if atStart != nil {
		// The data version is the WAL position: the cluster's own writes (autovacuum and
		// autoanalyze of the freshly loaded tables, checkpoints) move it with the data unchanged.
		r.text += fmt.Sprintf("  of which after the warm-up: %d hits, %d misses, %d bypasses; invalidations %d notified, %d data_changed, %d reconnected\n",
			c["hits"]-atStart["hits"], c["misses"]-atStart["misses"], c["bypasses"]-atStart["bypasses"], c["invalidations notified"]-atStart["invalidations notified"],
			c["invalidations data_changed"]-atStart["invalidations data_changed"], c["invalidations reconnected"]-atStart["invalidations reconnected"])
	}
	l.mu.Lock()
	statuses := make([]string, 0, len(l.cacheStatus))
	for h, n := range l.cacheStatus {
		statuses = append(statuses, fmt.Sprintf("%q %d", h, n))
	}
	distinct := len(l.first)
	l.mu.Unlock()
	slices.Sort(statuses)
	r.text += fmt.Sprintf("cache (Cache-Status of the answers): %s; %d distinct questions\n", strings.Join(statuses, ", "), distinct)
	if c["hits"] == 0 || c["misses"] == 0 {
		r.problems = append(r.problems, fmt.Sprintf("the cache was not exercised: %d hits, %d misses", c["hits"], c["misses"]))
	}
	if notifies > 0 && c["invalidations notified"] == 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d NOTIFY sent, no invalidation by one", notifies))
	}
}

// telemetry adds what the collector received, and fails the run when nothing arrived or the
// service logged a failed export.
func (r *result) telemetry(c *otlptest.Receiver, svc *service) {
	spans, exports := c.SpanCount(), c.Count()
	r.text += fmt.Sprintf("telemetry: %d spans and %d metric exports received over OTLP\n", spans, exports)
	if spans == 0 || exports == 0 {
		r.problems = append(r.problems, "no spans or no metric exports arrived at the collector")
	}
	if bad := c.Refused(); len(bad) > 0 {
		r.problems = append(r.problems, fmt.Sprintf("the collector refused %d exports: %s", len(bad), bad[0]))
	}
	if b, _ := os.ReadFile(svc.out.Name()); bytes.Contains(b, []byte("export failed")) {
		r.problems = append(r.problems, "the service logged a failed telemetry export")
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func report(s settings, samples []sample, l *loadGen, exit int, stopErr error, ran time.Duration) result {
	var r result
	var b strings.Builder
	fmt.Fprintf(&b, "\nsoak: %s in all (warm-up and two quiet pauses included) at %d req/s: %d requests, %d failed\n", ran.Round(time.Second), s.rate, l.sent.Load(), l.failed.Load())
	if n := l.behind.Load(); n > 0 {
		// Not the service's error: the machine (2 cores here, shared with the database) did not
		// keep up; the soak's figures still hold, at a lower rate.
		fmt.Fprintf(&b, "warning: %d ticks skipped with all %d workers busy (%.1f%% of the rate)\n", n, workers, 100*float64(n)/float64(n+l.sent.Load()))
	}
	l.mu.Lock()
	names := make([]string, 0, len(l.latencies))
	for n := range l.latencies {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprintf(&b, "%-24s %8s %9s %9s %9s\n", "query", "answers", "p50", "p99", "max")
	for _, n := range names {
		d := slices.Clone(l.latencies[n])
		slices.Sort(d)
		pct := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
		fmt.Fprintf(&b, "%-24s %8d %9s %9s %9s\n", n, len(d), pct(0.5).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), d[len(d)-1].Round(10*time.Microsecond))
	}
	for kind, n := range l.errs {
		r.problems = append(r.problems, fmt.Sprintf("%d %s errors", n, kind))
	}
	for _, e := range l.examples {
		fmt.Fprintf(&b, "  error: %s\n", e)
	}
	l.mu.Unlock()

	first := samples[0]
	fmt.Fprintf(&b, "%-10s %8s %10s %11s\n", "sample", "at", "RSS MiB", "goroutines")
	var base, last *sample
	var peak sample
	for i := range samples {
		sm := &samples[i]
		switch sm.phase {
		case "start":
			base = sm
		case "end":
			last = sm
		}
		if base != nil {
			peak.rss, peak.goroutines = max(peak.rss, sm.rss), max(peak.goroutines, sm.goroutines)
		}
		if sm.phase != "run" || i%6 == 0 {
			fmt.Fprintf(&b, "%-10s %8s %10.1f %11d\n", sm.phase, sm.at.Sub(first.at).Round(time.Second), mib(sm.rss), sm.goroutines)
		}
	}
	if base == nil || last == nil {
		r.problems = append(r.problems, "the run ended before the warm-up did: nothing to judge growth by")
	} else {
		allowed := max(int64(float64(base.rss)*s.maxRSSGrowth/100), 16<<20)
		dr, dg := last.rss-base.rss, last.goroutines-base.goroutines
		fmt.Fprintf(&b, "start (after warm-up, no request in flight): RSS %.1f MiB, %d goroutines\n", mib(base.rss), base.goroutines)
		fmt.Fprintf(&b, "end (after the load, no request in flight):   RSS %.1f MiB, %d goroutines\n", mib(last.rss), last.goroutines)
		fmt.Fprintf(&b, "peak under load:                              RSS %.1f MiB, %d goroutines\n", mib(peak.rss), peak.goroutines)
		fmt.Fprintf(&b, "growth: RSS %+.1f MiB (allowed %.1f), goroutines %+d (allowed %d)\n", mib(dr), mib(allowed), dg, s.maxGoroutineUp)
		if dr > allowed {
			r.problems = append(r.problems, fmt.Sprintf("RSS grew by %.1f MiB", mib(dr)))
		}
		if dg > int64(s.maxGoroutineUp) {
			r.problems = append(r.problems, fmt.Sprintf("goroutines grew by %d", dg))
		}
	}
	switch {
	case stopErr != nil:
		r.problems = append(r.problems, stopErr.Error())
	case exit != 0:
		r.problems = append(r.problems, fmt.Sprintf("exit code %d after SIGTERM", exit))
	default:
		fmt.Fprintf(&b, "SIGTERM: exit 0\n")
	}
	r.text = b.String()
	return r
}
