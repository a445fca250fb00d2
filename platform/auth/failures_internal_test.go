package auth

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestLimiter(limit int) (*failureLimiter, *fakeClock) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	l := newFailureLimiter(limit, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.now = clock.now
	return l, clock
}

// Past the limit within a minute, the address is refused until the minute that began with its
// first failure is over, and counted afresh after; other addresses are not affected.
func TestFailuresRefuseUntilTheMinuteIsOver(t *testing.T) {
	l, clock := newTestLimiter(3)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	for i := range 3 {
		if w := l.blocked(a); w != 0 {
			t.Fatalf("blocked after %d failures", i)
		}
		l.fail(a)
		clock.t = clock.t.Add(10 * time.Second)
	}
	// 30 s after the first failure: refused for the 30 s left.
	if w := l.blocked(a); w != 30*time.Second {
		t.Fatalf("after 3 failures: blocked for %s, want 30s", w)
	}
	if w := l.blocked(b); w != 0 {
		t.Fatalf("another address blocked for %s", w)
	}
	l.fail(b)
	clock.t = clock.t.Add(29 * time.Second)
	if w := l.blocked(a); w != time.Second {
		t.Fatalf("1 s before the minute is over: blocked for %s", w)
	}
	clock.t = clock.t.Add(time.Second)
	if w := l.blocked(a); w != 0 {
		t.Fatalf("the minute is over: still blocked for %s", w)
	}
	// Counted afresh: three more failures before it is refused again.
	for i := range 3 {
		if w := l.blocked(a); w != 0 {
			t.Fatalf("new minute: blocked after %d failures", i)
		}
		l.fail(a)
	}
	if w := l.blocked(a); w != time.Minute {
		t.Fatalf("new minute, 3 failures at once: blocked for %s, want 1m", w)
	}
}

// Zero turns the limit off.
func TestFailuresOff(t *testing.T) {
	l, _ := newTestLimiter(0)
	a := netip.MustParseAddr("192.0.2.1")
	for range 1000 {
		l.fail(a)
	}
	if w := l.blocked(a); w != 0 || l.size() != 0 {
		t.Fatalf("limit 0: blocked %s, %d entries", w, l.size())
	}
}

// An IPv6 /64 is one client; IPv4 in IPv6 form is its IPv4 address.
func TestFailuresCountIPv6By64(t *testing.T) {
	l, _ := newTestLimiter(2)
	l.fail(netip.MustParseAddr("2001:db8:1:2::1"))
	l.fail(netip.MustParseAddr("2001:db8:1:2:ffff::9"))
	if l.blocked(netip.MustParseAddr("2001:db8:1:2::77")) == 0 {
		t.Error("two failures from one /64 did not count together")
	}
	if l.blocked(netip.MustParseAddr("2001:db8:1:3::1")) != 0 {
		t.Error("another /64 is blocked")
	}
	l.fail(netip.MustParseAddr("::ffff:192.0.2.7"))
	l.fail(netip.MustParseAddr("192.0.2.7"))
	if l.blocked(netip.MustParseAddr("192.0.2.7")) == 0 {
		t.Error("an IPv4 address in IPv6 form counted apart")
	}
}

// However many addresses fail, the table stays within its bound; ended windows go first.
func TestFailuresMemoryBounded(t *testing.T) {
	l, clock := newTestLimiter(1)
	l.max = 100
	old := netip.MustParseAddr("198.51.100.1")
	l.fail(old)
	clock.t = clock.t.Add(2 * time.Minute)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	for i := range l.max - 1 {
		l.fail(addr(i))
	}
	l.fail(addr(l.max)) // full: the ended window makes room
	if _, ok := l.counts[old]; ok || l.size() != l.max {
		t.Fatalf("full table: ended window kept %v, %d entries", ok, l.size())
	}
	for i := range l.max - 1 {
		if l.blocked(addr(i)) == 0 {
			t.Fatalf("live address %d dropped while an ended window could go", i)
		}
	}
	for i := range 10000 {
		l.fail(addr(1000 + i))
		if n := l.size(); n > l.max {
			t.Fatalf("%d entries after %d more addresses, bound %d", n, i+1, l.max)
		}
	}
}
