package auth

import (
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// AUTHENTICATION__FAILURES_PER_MINUTE: a remote address that sent that many requests with a
// missing or wrong key within a minute is refused (429 RATE_LIMITED, Retry-After) until that
// minute is over, without its keys being looked at. A key is 32 or more random characters, so
// guessing is hopeless anyway; the bound keeps a guesser from spending the service's processor
// time on hashing and comparing at network speed, and makes its attempts show in the log.
//
// The minute is a fixed window that starts at the address's first failure, as the contract
// words it ("until the minute is over"), not a sliding rate: a client told Retry-After: 40 that
// comes back then is counted afresh. Requests refused with 429 are not failures of their own
// (they were not checked), so the window ends when it says.
//
// IPv6 addresses are counted by their /64: one host is commonly given a whole /64 and can send
// from any address in it, so counting single addresses would give it 2^64 budgets.

// failureWindow is the window the limit counts in.
const failureWindow = time.Minute

// maxFailureEntries bounds the addresses tracked at once (about 100 bytes each). Past it, an
// address whose window ended is dropped first; when every window is still running, one entry
// picked at random (Go's map order) is, so that many addresses cannot grow the memory (they can
// at most forget some addresses' counts, which each of them could also get by waiting a minute).
const maxFailureEntries = 1 << 16

// sweepEvery is how often, at most, a full table is swept for ended windows: a sweep looks at
// every entry, so a stream of new addresses must not cause one per request.
const sweepEvery = time.Second

type failureCount struct {
	start time.Time // the first failure of the window
	n     int
}

// failureLimiter counts failures per address. The zero limit turns it off.
type failureLimiter struct {
	limit int
	max   int // maxFailureEntries, smaller in tests
	now   func() time.Time
	log   *slog.Logger

	mu        sync.Mutex
	counts    map[netip.Addr]*failureCount
	lastSweep time.Time
	// refused and lastWarn make the warning at most once a minute.
	refused  int
	lastWarn time.Time
}

func newFailureLimiter(limit int, log *slog.Logger) *failureLimiter {
	return &failureLimiter{limit: limit, max: maxFailureEntries, now: time.Now, log: log, counts: map[netip.Addr]*failureCount{}}
}

// clientKey is what failures are counted by: the IPv4 address, or the /64 of an IPv6 address.
func clientKey(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

// blocked returns how long the address is still refused; zero when it is not.
func (l *failureLimiter) blocked(ip netip.Addr) time.Duration {
	if l == nil || l.limit <= 0 || !ip.IsValid() {
		return 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts[clientKey(ip)]
	if c == nil || c.n < l.limit {
		return 0
	}
	left := c.start.Add(failureWindow).Sub(now)
	if left <= 0 {
		return 0
	}
	l.refused++
	if now.Sub(l.lastWarn) >= failureWindow {
		n := l.refused
		l.refused, l.lastWarn = 0, now
		// No address: the log says that the bound works; a firewall, not this log, is the
		// place to act on addresses.
		l.log.Warn("requests refused: an address sent AUTHENTICATION__FAILURES_PER_MINUTE requests with a missing or wrong API key within a minute, and is refused until the minute is over (logged at most once a minute)",
			"failures_per_minute", l.limit, "refused", n)
	}
	return left
}

// fail counts one request with a missing or wrong key from the address.
func (l *failureLimiter) fail(ip netip.Addr) {
	if l == nil || l.limit <= 0 || !ip.IsValid() {
		return
	}
	now := l.now()
	key := clientKey(ip)
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts[key]
	switch {
	case c == nil:
		l.makeRoom(now)
		l.counts[key] = &failureCount{start: now, n: 1}
	case now.Sub(c.start) >= failureWindow:
		c.start, c.n = now, 1
	default:
		c.n++
	}
}

// makeRoom keeps the table under max entries before one is added.
func (l *failureLimiter) makeRoom(now time.Time) {
	if len(l.counts) < l.max {
		return
	}
	if now.Sub(l.lastSweep) >= sweepEvery {
		l.lastSweep = now
		for k, c := range l.counts {
			if now.Sub(c.start) >= failureWindow {
				delete(l.counts, k)
			}
		}
	}
	for k := range l.counts {
		if len(l.counts) < l.max {
			break
		}
		delete(l.counts, k)
	}
}

// size is the number of addresses tracked (for tests).
func (l *failureLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.counts)
}
