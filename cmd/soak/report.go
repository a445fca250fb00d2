// The soak's verdict: the load's answers and latencies, growth between the quiet samples, the
// cache and telemetry counters, the exit on SIGTERM.

package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/emsanalytics/emsquery/internal/otlptest"
)

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
	if strings.Contains(svc.proc.Output(), "export failed") {
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

// live adds the streams' figures: streams held and churned, events, the loads and each
// stream's delay to the new answer after a load's commit; and fails the run on any stream
// problem, a failed load, no load at all, or streams the service still counts open after the
// client closed them all.
func (r *result) live(s *streams, e *etl, left float64) {
	var b strings.Builder
	held := s.heldCount()
	fmt.Fprintf(&b, "streams: %d held the whole run (", held)
	for i, q := range s.qs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", heldStreams[i], q.name)
	}
	fmt.Fprintf(&b, "); %d opened and closed during the run; %d answers (next events), %d heartbeats\n",
		s.opened.Load()-int64(held), s.answers.Load(), s.comments.Load())
	fmt.Fprintf(&b, "loads: %d (%d records inserted, each load committed with NOTIFY), %d failed\n", e.loads.Load(), e.rows, e.failed.Load())
	s.mu.Lock()
	d := slices.Clone(s.delays)
	s.mu.Unlock()
	slices.Sort(d)
	if len(d) > 0 {
		pct := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
		fmt.Fprintf(&b, "new answer after a load's commit: %d stream-loads, p50 %s, p99 %s, max %s (bound %s)\n",
			len(d), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond), loadBound)
	}
	if m := s.service; m != nil {
		fmt.Fprintf(&b, "streams (service metrics): %.0f answers pushed, %.0f recomputations; %.0f open after the soak closed its streams\n",
			m["emsquery_streams_pushes_total"], m["emsquery_streams_recomputations_total"], left)
	}
	problems, examples := s.problems()
	for _, e := range examples {
		fmt.Fprintf(&b, "  stream error: %s\n", e)
	}
	r.problems = append(r.problems, problems...)
	switch {
	case e.loads.Load() == 0:
		r.problems = append(r.problems, "no load was committed")
	case e.failed.Load() > 0:
		r.problems = append(r.problems, fmt.Sprintf("%d loads failed", e.failed.Load()))
	case len(d) == 0:
		r.problems = append(r.problems, "no stream was checked after a load")
	}
	if left != 0 {
		r.problems = append(r.problems, fmt.Sprintf("the service counts %.0f streams open after the soak closed them all", left))
	}
	r.text += b.String()
}
