package main

import (
	"context"
	"slices"
	"sync"
	"time"
)

// measurement is what one closed-loop run measured.
type measurement struct {
	Requests int           // requests completed without error
	Errors   int           // requests that failed
	FirstErr error         // the first failure, for the report
	Elapsed  time.Duration // from the start to the end of the last request
	P50, P99 time.Duration
	Bytes    int64 // response bytes, all requests

	lat []time.Duration // every request's latency, sorted
}

// merge adds the requests of n (a later slice of the same measurement) to m.
func (m measurement) merge(n measurement) measurement {
	m.Requests += n.Requests
	m.Errors += n.Errors
	if m.FirstErr == nil {
		m.FirstErr = n.FirstErr
	}
	m.Elapsed += n.Elapsed
	m.Bytes += n.Bytes
	m.lat = append(m.lat, n.lat...)
	slices.Sort(m.lat)
	m.P50 = percentile(m.lat, 0.50)
	m.P99 = percentile(m.lat, 0.99)
	return m
}

// RPS is requests completed per second of the run.
func (m measurement) RPS() float64 {
	if m.Elapsed <= 0 {
		return 0
	}
	return float64(m.Requests) / m.Elapsed.Seconds()
}

// request performs one request as worker w and returns the bytes it read.
type request func(ctx context.Context, w int) (int64, error)

// closedLoop runs workers goroutines, each sending its next request as soon as the previous one
// answered, for duration: no request starts after it, and the requests in flight then are
// awaited and counted, so that requests longer than the window are measured too. The same
// driver measures the service (HTTP) and the baselines (pgx, pgconn), so both sides see the same
// concurrency, the same clock and the same statistics.
func closedLoop(ctx context.Context, workers int, duration time.Duration, do request) measurement {
	type workerResult struct {
		lat   []time.Duration
		errs  int
		first error
		bytes int64
		last  time.Time
	}
	results := make([]workerResult, workers)
	start := time.Now()
	deadline := start.Add(duration)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := &results[w]
			r.lat = make([]time.Duration, 0, 4096)
			for ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				n, err := do(ctx, w)
				t1 := time.Now()
				r.last = t1
				if err != nil {
					r.errs++
					if r.first == nil {
						r.first = err
					}
					continue
				}
				r.bytes += n
				r.lat = append(r.lat, t1.Sub(t0))
			}
		})
	}
	wg.Wait()
	var m measurement
	var all []time.Duration
	end := start
	for _, r := range results {
		all = append(all, r.lat...)
		m.Errors += r.errs
		if m.FirstErr == nil {
			m.FirstErr = r.first
		}
		m.Bytes += r.bytes
		if r.last.After(end) {
			end = r.last
		}
	}
	m.Requests = len(all)
	m.Elapsed = end.Sub(start)
	slices.Sort(all)
	m.P50 = percentile(all, 0.50)
	m.P99 = percentile(all, 0.99)
	m.lat = all
	return m
}

// percentile is the nearest-rank percentile of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
