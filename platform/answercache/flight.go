package answercache

import (
	"context"
	"sync"
)

// Identical questions in flight share one computation, but no caller waits on another caller's
// reading (contract 6.10): the computation is made into memory, not into its caller's socket,
// and each caller then sends its own copy at its own pace. A computation whose answer outgrows
// what may be kept ends its flight early (End(nil)) and goes on streaming to its own caller
// alone; the callers that waited compute their own, so that a slow reader of a whole table holds
// nobody else. golang.org/x/sync/singleflight cannot end a flight before its function returns,
// nor let a waiter leave when its own client does, hence this small group.

// flight is one computation that identical requests wait for.
type flight struct {
	done   chan struct{}
	answer *Answer
}

type flightGroup struct {
	mu sync.Mutex
	m  map[string]*flight
}

// Flight is the computation a request must make for the others that ask the same question:
// it ends it with End, once, whatever happens.
type Flight struct {
	c     *Cache
	k     Key
	epoch uint64
	reads []string
	keyed bool // under its tables' versions: reads are indexed
	key   string
	f     *flight
	once  sync.Once
}

// Join returns, for question k in version v, either an answer to send (kept, or just made by an
// identical request in flight), or the Flight this request must compute and End, or neither:
// the computation waited for could not be shared (errors may be its own request's, or it was
// too large to keep), or ctx ended while waiting; the request then computes its own answer
// without sharing it. With the cache off (or v not ok) every request computes its own.
func (c *Cache) Join(ctx context.Context, k Key, v Version) (*Answer, *Flight) {
	if c == nil || !v.ok {
		return nil, nil
	}
	k = v.keyOf(k)
	key := flightKey(k, v.epoch)
	c.flights.mu.Lock()
	if f := c.flights.m[key]; f != nil {
		c.flights.mu.Unlock()
		select {
		case <-f.done:
			return f.answer, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
	if kept := c.store.get(k, v.epoch); kept != nil {
		c.flights.mu.Unlock()
		return kept, nil
	}
	f := &flight{done: make(chan struct{})}
	if c.flights.m == nil {
		c.flights.m = map[string]*flight{}
	}
	c.flights.m[key] = f
	c.flights.mu.Unlock()
	return nil, &Flight{c: c, k: k, epoch: v.epoch, reads: v.reads, keyed: v.tables != "", key: key, f: f}
}

// End ends the flight with a, the answer the requests waiting for it get and the cache keeps,
// or nil: they compute their own. Only the first call counts; a request that joins the
// question after End starts a flight of its own (or finds a kept).
func (f *Flight) End(a *Answer) {
	if f == nil {
		return
	}
	f.once.Do(func() {
		if a != nil {
			f.c.store.put(f.k, a, f.epoch, f.keyed, f.reads)
		}
		f.c.flights.mu.Lock()
		if f.c.flights.m[f.key] == f.f {
			delete(f.c.flights.m, f.key)
		}
		f.c.flights.mu.Unlock()
		f.f.answer = a
		close(f.f.done)
	})
}

// Share computes the answer to k in version v once for all the requests that ask it at once:
// the first runs compute (into memory: it returns the answer when it may be kept); the others
// wait and get that answer. mine says whether compute ran here; a is nil when the answer could
// not be shared (the waiter computes its own). An answer found kept meanwhile is returned as
// found.
func (c *Cache) Share(k Key, v Version, compute func() *Answer) (a *Answer, mine bool) {
	a, f := c.Join(context.Background(), k, v)
	if a != nil {
		return a, false
	}
	if f == nil && c != nil && v.ok {
		return nil, false
	}
	defer f.End(nil) // a compute that panics lets the waiters go
	a = compute()
	f.End(a)
	return a, true
}
