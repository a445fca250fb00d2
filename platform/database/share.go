package database

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/emsanalytics/emsquery/platform/requestctx"
)

// Sharing the pool (contract 6.10: no single caller takes the service down). Two bounds stand
// in front of pgxpool's Acquire, in this order, for every statement of the service:
//
//   - the request's own slots (WithRequestLimit): one request holds at most that many
//     connections at once, LIMITS__REQUEST_PARALLELISM for a GraphQL request, whose root fields
//     gqlgen resolves all at once; its other statements wait their turn there, a wait bounded by
//     the request's own deadline (LIMITS__REQUEST_TIMEOUT), not by DATABASE__POOL_TIMEOUT: it is
//     the request's own queue, not the pool's;
//   - the fair gate (fairGate): as many places as the pool has connections, handed to the
//     statements waiting for one by key (the API key's name, requestctx.KeyName): the next free
//     place goes to the waiting key that holds the fewest, so that the queue of one key that
//     sends many requests never stands in front of another key's request. pgxpool alone would
//     hand its connections out first come, first served.
//
// A statement that has both then finds a connection in the pool at once (or the pool opens
// one), so its wait for the pool is the gate's; DATABASE__POOL_TIMEOUT bounds the two together.

type requestLimitKey struct{}

// WithRequestLimit returns ctx under which the statements run hold at most n connections at
// once (n < 1: no bound): the GraphQL path gives each request's context this, so that every
// statement the request runs, the whole-table lists streamed after gqlgen's executor returned
// included, takes one of the request's n slots for as long as it holds its connection.
func WithRequestLimit(ctx context.Context, n int) context.Context {
	if n < 1 {
		return ctx
	}
	return context.WithValue(ctx, requestLimitKey{}, semaphore.NewWeighted(int64(n)))
}

// requestSlot waits for a slot of ctx's request limit, if it has one, and returns the limit
// (nil: none), which releaseSlot gives the slot back to.
func requestSlot(ctx context.Context) (*semaphore.Weighted, error) {
	sem, _ := ctx.Value(requestLimitKey{}).(*semaphore.Weighted)
	if sem == nil {
		return nil, nil
	}
	if err := sem.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	return sem, nil
}

// releaseSlot gives back a slot that requestSlot took (nil: none).
func releaseSlot(sem *semaphore.Weighted) {
	if sem != nil {
		sem.Release(1)
	}
}

// fairGate hands out capacity places (the pool's connections) to keys. A place is taken at once
// while one is free and nobody waits; otherwise the caller waits in its key's queue, first come
// first served within the key. When a place is given back, it goes to the head of the queue of
// the waiting key that holds the fewest places (of two such keys, the one whose head has waited
// longer).
type fairGate struct {
	mu       sync.Mutex
	capacity int
	inUse    int
	held     map[string]int           // places held, per key
	queues   map[string][]*gateWaiter // waiting, per key, in order
	waiting  int
	seq      uint64
}

type gateWaiter struct {
	key     string
	seq     uint64        // arrival order, for ties between keys
	ready   chan struct{} // closed when granted
	granted bool          // under fairGate.mu
}

func newFairGate(capacity int) *fairGate {
	return &fairGate{capacity: max(1, capacity), held: map[string]int{}, queues: map[string][]*gateWaiter{}}
}

// enter waits for a place for key until ctx is done. The caller gives it back with leave(key).
func (g *fairGate) enter(ctx context.Context, key string) error {
	g.mu.Lock()
	if g.inUse < g.capacity && g.waiting == 0 {
		g.take(key)
		g.mu.Unlock()
		return nil
	}
	g.seq++
	w := &gateWaiter{key: key, seq: g.seq, ready: make(chan struct{})}
	g.queues[key] = append(g.queues[key], w)
	g.waiting++
	g.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if w.granted {
		// Granted while the caller gave up: the place goes on to the next.
		g.mu.Unlock()
		g.leave(key)
		return ctx.Err()
	}
	q := g.queues[key]
	for i, o := range q {
		if o == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(g.queues, key)
	} else {
		g.queues[key] = q
	}
	g.waiting--
	g.mu.Unlock()
	return ctx.Err()
}

// leave gives back a place of key's and hands the free places on.
func (g *fairGate) leave(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inUse--
	if g.held[key]--; g.held[key] <= 0 {
		delete(g.held, key)
	}
	for g.inUse < g.capacity && g.waiting > 0 {
		next := ""
		var best *gateWaiter
		for k, q := range g.queues {
			if best == nil || g.held[k] < g.held[next] || g.held[k] == g.held[next] && q[0].seq < best.seq {
				next, best = k, q[0]
			}
		}
		if q := g.queues[next][1:]; len(q) == 0 {
			delete(g.queues, next)
		} else {
			g.queues[next] = q
		}
		g.waiting--
		g.take(next)
		best.granted = true
		close(best.ready)
	}
}

func (g *fairGate) take(key string) {
	g.inUse++
	g.held[key]++
}

// gateKey is the key a statement of ctx waits under: the request's API key name; requests
// without one (the health check, internal work) share the anonymous key "".
func gateKey(ctx context.Context) string { return requestctx.KeyName(ctx) }
