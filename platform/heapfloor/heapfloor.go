// Package heapfloor lets the heap grow by at least a floor between two garbage collections.
//
// Go's collector runs once the heap has grown by GOGC percent (100 by default) of what the last
// collection found live. The service keeps little live (a few megabytes: the pool, the compiled
// encoders, the answer cache's entries) and allocates a few kilobytes per request, so with the
// default it collected about ten times a second under a light question's load: a fixed cost per
// collection (the goroutines' stacks, the globals) spread over a few hundred requests, about 5 µs
// of processor time on each. With a floor of a few megabytes the collector runs several times
// less often; a large live heap (a full answer cache) is not affected, its growth by GOGC
// percent being larger than the floor anyway.
//
// After each collection the percent is set so that the next one comes when the heap has grown
// by max(GOGC percent of the live heap, the floor): as soon as the runtime runs the cleanup that
// a collection triggers (runtime.AddCleanup), the previous percent applying until then.
// GOMEMLIMIT still applies: near it, the collector runs as often as it must.
package heapfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
)

// Options are the floor's settings.
type Options struct {
	// Floor is the least the heap grows by between two collections, in bytes; 0 turns it off.
	Floor int64
}

// maxPercent bounds the percent set for a tiny live heap (a few hundred kilobytes just after
// start): the floor is reached well before it.
const maxPercent = 100_000

// liveMetric is the heap the last collection found live.
const liveMetric = "/gc/heap/live:bytes"

// Start keeps the floor until the returned stop, which puts the percent back as it was. It
// does nothing when the floor is 0 or GOGC turns the collector off.
func Start(o Options) (stop func()) {
	base := gogc()
	if o.Floor <= 0 || base < 0 {
		return func() {}
	}
	t := &tuner{floor: uint64(o.Floor), base: base, percent: base, samples: []metrics.Sample{{Name: liveMetric}}}
	t.tune()
	t.arm()
	return t.stop
}

// gogc is the percent the process started with: GOGC's, 100 when it is not set, -1 for off.
func gogc() int {
	v := strings.TrimSpace(os.Getenv("GOGC"))
	if v == "" {
		return 100
	}
	if strings.EqualFold(v, "off") {
		return -1
	}
	if n, err := strconv.Atoi(v); err == nil {
		return n
	}
	return 100 // as the runtime reads a value it cannot parse
}

type tuner struct {
	floor   uint64
	base    int // GOGC's percent
	samples []metrics.Sample

	mu      sync.Mutex
	percent int // the percent set last
	stopped bool
}

// sentinel is an object nothing keeps: the cleanup attached to it runs once a collection found
// it unreachable, that is after each collection, where it attaches one to a new sentinel.
type sentinel struct{ _ [16]byte }

func (t *tuner) arm() {
	runtime.AddCleanup(&sentinel{}, func(t *tuner) {
		if t.tune() {
			t.arm()
		}
	}, t)
}

// tune sets the percent for the live heap the last collection found; false once stopped.
func (t *tuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.samples)
	live := uint64(0)
	if t.samples[0].Value.Kind() == metrics.KindUint64 {
		live = t.samples[0].Value.Uint64()
	}
	p := percentFor(live, t.floor, t.base)
	if p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
	return true
}

// percentFor is the percent with which a heap of live bytes grows by max(base percent of it,
// floor) before the next collection. The runtime's goal is the larger of live * (1 + percent/100)
// and its minimum heap, 4 MB * percent/100: both are kept within live + floor (a live heap under
// 4 MB, just after start, would otherwise be let grow to several times the floor). It is rounded
// down to a multiple of 10, so that small changes of the live heap do not set it again.
func percentFor(live, floor uint64, base int) int {
	p := (live + floor) * 100 / minimumHeap
	if live > 0 {
		p = min(p, floor*100/live)
	}
	p = min(p/10*10, maxPercent)
	if p <= uint64(base) {
		return base
	}
	return int(p)
}

// minimumHeap is the runtime's minimum heap goal at a percent of 100 (defaultHeapMinimum),
// which it scales by the percent.
const minimumHeap = 4 << 20

func (t *tuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(t.base)
	}
}
