package database

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// errUnreachable is the cause (for the log) of a request refused because the database could not
// be reached a moment ago.
var errUnreachable = errors.New("the database could not be reached a moment ago; not waiting for a connection until a probe reaches it")

// Probing: how often while the database is down, and how long one attempt (connect and ping)
// may take before the database counts as unreachable.
const (
	probeInterval = time.Second
	probeTimeout  = 3 * time.Second
)

// reachability is a small circuit breaker in front of the pool. Without it, every request made
// while the database is down waits for a connection attempt of its own: on a refused port that
// is quick, but a database host that does not answer at all holds each request for
// DATABASE__POOL_TIMEOUT (30 s by default).
//
// The database counts as down when an attempt to connect failed: one of the pool's, or one of
// the probe's. While it is down, acquire refuses at once with SERVICE_UNAVAILABLE as long as the
// pool has no idle connection, and the probe connects every probeInterval on a connection of its
// own (so it never waits for the pool). The first connection that works, the probe's or a
// request's, ends the outage; nothing needs a restart.
//
// A wait for a connection that ends without one (DATABASE__POOL_TIMEOUT, or the caller's
// deadline) while the pool has no idle connection is ambiguous: a busy pool or a database that
// hangs. It starts one probe, which decides: a busy pool is no outage.
type reachability struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	interval time.Duration
	timeout  time.Duration

	down    atomic.Bool
	mu      sync.Mutex
	since   time.Time // start of the outage
	probing bool
	closed  bool
	ctx     context.Context // cancelled by close
	cancel  context.CancelFunc
	probes  sync.WaitGroup
}

// newReachability watches pool, whose connections go to one of hosts hosts. A probe tries them
// all, in order, as the pool does: the database counts as down only when none of them answers,
// and the probe has time for each host to hang for its whole connect timeout.
func newReachability(pool *pgxpool.Pool, log *slog.Logger, hosts int) *reachability {
	ctx, cancel := context.WithCancel(context.Background())
	timeout := probeTimeout
	if hosts > 1 {
		timeout = time.Duration(hosts) * connectTimeoutPerHost
	}
	return &reachability{pool: pool, log: log, interval: probeInterval, timeout: timeout, ctx: ctx, cancel: cancel}
}

// failFast says whether a request should be refused without waiting: the database is down and
// the pool holds no idle connection that might still work.
func (r *reachability) failFast() bool {
	return r.down.Load() && r.pool.Stat().IdleConns() == 0
}

// failed notes an acquire that got no connection. waited says it ran out of time (its own
// DATABASE__POOL_TIMEOUT or the caller's deadline) rather than failing to connect.
func (r *reachability) failed(err error, waited bool) {
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &ce):
		r.markDown(err)
		r.startProbe(r.interval)
	case waited && !r.down.Load() && r.pool.Stat().IdleConns() == 0:
		r.startProbe(0)
	}
}

func (r *reachability) markDown(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.down.Load() {
		return
	}
	r.down.Store(true)
	r.since = time.Now()
	attrs := []any{"error", err.Error(), "probe_interval", r.interval.String()}
	if hint := poolerHint(err); hint != "" {
		attrs = append(attrs, "hint", hint)
	}
	r.log.Warn("database unreachable: requests fail at once with SERVICE_UNAVAILABLE until it answers again", attrs...)
}

// poolerHint explains a refusal that comes from PgBouncer rather than from PostgreSQL: it
// refuses the startup parameters it does not keep for each client, which the service sends
// unless told that it talks to a transaction pooler.
func poolerHint(err error) string {
	if strings.Contains(err.Error(), "unsupported startup parameter") {
		return "the host looks like PgBouncer, which refuses the session settings sent at connect; set DATABASE__TRANSACTION_POOLING=yes"
	}
	return ""
}

// succeeded notes a connection that works: the outage, if any, is over.
func (r *reachability) succeeded() {
	if !r.down.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down.Load() {
		r.down.Store(false)
		r.log.Info("database reachable again", "down_for", time.Since(r.since).Round(time.Millisecond).String())
	}
}

// startProbe starts the probe after delay unless one is running.
func (r *reachability) startProbe(delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.probing {
		return
	}
	r.probing = true
	r.probes.Add(1)
	go r.probe(delay)
}

// probe connects until a connection works (or the pool closes), marking the database down at
// the first failure.
func (r *reachability) probe(delay time.Duration) {
	defer r.probes.Done()
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		err := r.try()
		if err == nil {
			r.mu.Lock()
			r.probing = false
			r.mu.Unlock()
			r.succeeded()
			return
		}
		if r.ctx.Err() != nil {
			return
		}
		r.markDown(err)
		t.Reset(r.interval)
	}
}

// try opens a connection of its own with the pool's settings, pings and closes it.
func (r *reachability) try() error {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, r.pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	return conn.Ping(ctx)
}

// close stops the probe; the pool is closed next.
func (r *reachability) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.probes.Wait()
}
