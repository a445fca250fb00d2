// Command soak runs the service for a long while under a steady mixed load and checks that it
// stays healthy: no error at all, and flat memory (RSS) and goroutine count. It is `make soak`,
// not part of `make test`.
//
// The code is split by job: settings.go (SOAK_*), data.go (the database, its NOTIFY and the
// ETL's loads), questions.go (the mix), streams.go (live answers), service.go (the binary,
// started by internal/launcher, and its samples), load.go (the load and its answer checks),
// report.go (the verdict), and soak below, which runs them in order.
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
// memory (an invalidation). The mix's questions but records_count leave out the loaded records
// (below), so every answer must be 200 without errors and byte for byte the answer the same
// question got the first time, from memory or not; records_count must be the count of the data
// before or after a load (the one before within 5 s of the load's commit). The
// summary gives the service's own cache counters (hits, misses, coalesced, bypasses,
// invalidations by reason, from its metrics) beside the Cache-Status headers the load saw; the
// run fails when no answer came from memory, none was computed, or a NOTIFY was not seen.
//
// Live answers: before the load, 50 subscriptions over GraphQL over SSE (POST /graphql with
// Accept: text/event-stream, graphql-sse's distinct connections mode, a connection each) are
// opened and held the whole run: 20 of records_count, 10 of records_count of one station, 10 of
// unique_counts of urgency from December 2025 to the end of 2026, 10 of station_resources; and
// every SOAK_STREAM_EVERY one more is opened, of those questions in turn, and closed after 5 to
// 30 s. Every SOAK_LOAD_EVERY the soak plays an ETL: in one transaction it inserts 1 to 20
// records of that station dated 2026 (after the demo data's years, so only those questions and
// the mix's records_count change), computes the streams' answers by SQL, and sends
// NOTIFY emsquery_refresh, delivered at the commit. Every answer a stream gets must be SQL's
// answer of the current data (or of the data before the last load, within 5 s of its commit),
// differ from the stream's last answer (the service sends only changes) and carry no errors;
// station_resources, which the loads leave as it is, must get its first answer and nothing
// more; every stream open at a load's commit must have the new answer within 5 s (the delays
// are reported); no stream may end or complete but by the soak's hand; and after the soak
// closes them all, the service's emsquery_streams_open must come back to 0.
//
// Every 10 s it samples the process's VmRSS (/proc/<pid>/status, through internal/procstat) and
// go_goroutine_count (the service's runtime metrics).
//
// Growth is judged between two quiet samples, taken with no request in flight (goroutines come
// and go with requests; a leak stays): the baseline after a warm-up (a tenth of the run, 10 s to
// 60 s; the load pauses for it, and the streams opened and closed during the run are closed;
// the held ones stay open) and the end after the load, alike. The run fails when the end exceeds
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
//	SOAK_LOAD_EVERY            1m      how often a load (INSERT, then NOTIFY) is committed
//	SOAK_STREAM_EVERY          2s      how often a stream is opened (and closed 5 to 30 s later)
//
// The load only ever goes to 127.0.0.1, stops by itself after SOAK_DURATION, and Ctrl-C ends it
// early (the cluster and the service are stopped either way).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/internal/otlptest"
	"github.com/emsanalytics/emsquery/internal/pgtest"
)

func main() {
	os.Exit(run())
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
	bin, err := launcher.Build(ctx, tmp)
	if err != nil {
		return err
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
		s.rate, len(queries), varyingEvery, s.duration, warmup, s.notifyEvery, svc.proc.PID())
	etl, err := newETL(ctx, cluster, stations, mixStation)
	if err != nil {
		return err
	}
	defer etl.stop()
	live := newStreams(svc, liveQuestions(etl.station), etl.truth, s.churnEvery)
	etl.live = live
	defer live.stop()
	progress("live answers: %d streams held over %d questions, one more opened every %s for 5 to 30 s; a load of 1 to 20 records into %s (then NOTIFY) every %s",
		live.heldCount(), len(live.qs), s.churnEvery, etl.station, s.loadEvery)
	if err := live.hold(); err != nil {
		return err
	}
	ld := newLoad(svc, queries, newVarying(stations), s.rate, etl.truth)
	ld.start()
	defer ld.stop()
	live.startChurn()
	etl.start(ctx, s.loadEvery)
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
		case <-svc.proc.Done():
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
			live.pause()
			ld.quiet()
			end = end.Add(time.Since(paused)) // the load runs SOAK_DURATION after the baseline
			if atStart, err = svc.cacheCounters(); err != nil {
				return err
			}
		}
		err := take(phase)
		ld.resume()
		live.resume()
		if err != nil {
			return err
		}
		if time.Since(lastReport) >= time.Minute {
			lastReport = time.Now()
			sm := samples[len(samples)-1]
			progress("%5s  %7d requests  %d failed  RSS %5.1f MiB  goroutines %d  streams %d open, %d answers, %d loads",
				time.Since(began).Round(time.Second), sm.requests, sm.failures, mib(sm.rss), sm.goroutines,
				live.opened.Load()-live.closed.Load(), live.answers.Load(), etl.loads.Load())
		}
	}
	ld.stop()
	nt.stop()
	etl.stop()
	live.pause()
	ld.quiet()
	if err := take("end"); err != nil {
		return err
	}
	counters, cacheErr := svc.cacheCounters()
	// The held streams end now, from the client's side: the service must let them go.
	live.stop()
	streamsLeft := -1.0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		m, err := svc.metricSums(streamMetrics...)
		if err == nil {
			live.service, streamsLeft = m, m["emsquery_streams_open"]
		}
		if streamsLeft == 0 {
			break
		}
	}
	exit, err := svc.stop()
	rep := report(s, samples, ld, exit, err, time.Since(began))
	rep.cache(counters, atStart, cacheErr, ld, nt.sent.Load())
	rep.telemetry(collector, svc)
	rep.live(live, etl, streamsLeft)
	fmt.Print(rep.text)
	if interrupted {
		return errors.New("interrupted")
	}
	if len(rep.problems) > 0 {
		return errors.New(strings.Join(rep.problems, "; "))
	}
	return nil
}
