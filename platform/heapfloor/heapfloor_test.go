package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestPercentFor(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		base, want  int
	}{
		{0, 16 * mb, 100, 400},        // before the first collection: the minimum heap is the floor
		{1 * mb, 16 * mb, 100, 420},   // the minimum heap bounds it: 4 MB * 4.2 = 16.8 MB, not 1 MB * 17
		{3 * mb, 16 * mb, 100, 470},   // 4 MB * 4.7 = 18.8 MB within 19 MB
		{8 * mb, 16 * mb, 100, 200},   // 8 MB + 16 MB
		{16 * mb, 16 * mb, 100, 100},  // GOGC's growth is the floor
		{64 * mb, 16 * mb, 100, 100},  // a large live heap: GOGC's
		{64 * mb, 16 * mb, 300, 300},  // GOGC set higher: kept
		{1, 1 << 40, 100, maxPercent}, // bounded
	} {
		got := percentFor(c.live, c.floor, c.base)
		if got != c.want {
			t.Errorf("live %d, floor %d, GOGC %d: percent %d, want %d", c.live, c.floor, c.base, got, c.want)
		}
		// Whatever the percent, the runtime's goal stays within live + floor (or GOGC's).
		goal := max(c.live+c.live*uint64(got)/100, minimumHeap*uint64(got)/100)
		if bound := max(c.live+c.floor, c.live+c.live*uint64(c.base)/100, minimumHeap*uint64(c.base)/100); goal > bound && got != maxPercent {
			t.Errorf("live %d, floor %d: percent %d lets the heap grow to %d, over %d", c.live, c.floor, got, goal, bound)
		}
	}
}

// readGC is the number of collections so far and the current heap goal.
func readGC() (cycles, goal uint64) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

var sink []byte

// churn allocates n bytes of garbage in small pieces, as requests do.
func churn(n int) {
	for range n / 4096 {
		sink = make([]byte, 4096)
	}
}

// With a floor, the collector runs at most about once per floor allocated while the live heap is
// small (about 8 times as often without, on a quiet machine), the heap's goal stays within
// live + floor, and stop puts GOGC's percent back.
func TestFloorSpacesCollections(t *testing.T) {
	const floor, garbage = 32 << 20, 256 << 20
	runtime.GC()
	c0, _ := readGC()
	churn(garbage)
	c1, _ := readGC()
	without := c1 - c0

	stop := Start(Options{Floor: floor})
	runtime.GC() // a collection for the tuner to act on
	c2, goal := readGC()
	churn(garbage)
	c3, _ := readGC()
	with := c3 - c2
	s := []metrics.Sample{{Name: liveMetric}}
	metrics.Read(s)
	if live := s[0].Value.Uint64(); goal > live+floor+1<<20 {
		t.Errorf("heap goal %d with %d live: over live + floor", goal, live)
	}
	stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("after stop the percent is %d, want GOGC's 100", p)
	}
	// Without a floor the count depends on the machine (a collection that marks slowly, the
	// processors busy, spans more allocation): it is only logged.
	t.Logf("collections for %d MB of garbage: %d without a floor, %d with %d MB", garbage>>20, without, with, floor>>20)
	if with > garbage/floor+3 {
		t.Errorf("%d collections with a floor of %d MB (%d without): want at most about one per floor, %d", with, floor>>20, without, garbage/floor)
	}
}

func TestOffWithoutAFloorOrACollector(t *testing.T) {
	Start(Options{})()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("floor 0: percent %d, want 100", p)
	}
	t.Setenv("GOGC", "off")
	debug.SetGCPercent(-1)
	stop := Start(Options{Floor: 64 << 20})
	runtime.GC()
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Errorf("GOGC=off: the floor set percent %d", p)
	}
	stop()
	debug.SetGCPercent(100)
}
