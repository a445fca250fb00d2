// Package database owns the PostgreSQL connection pool: built from the settings' parts, with
// the TLS modes and pool semantics of the contract, and errors classified for clients.
package database

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// DB is the service's pool. Repositories run their statements through its helpers (Collect,
// QueryRow, ForEachRow, RunBatch, CopyTo, Ping), never on a connection of their own: each helper bounds
// the wait for a free connection by DATABASE__POOL_TIMEOUT whatever the request's own deadline,
// fails fast while the database is unreachable, measures the statement in
// db.client.operation.duration and classifies its error for clients.
type DB struct {
	pool             *pgxpool.Pool
	gate             *fairGate // the pool's connections, shared fairly by key (share.go)
	poolTimeout      time.Duration
	statementTimeout time.Duration
	exportTimeout    time.Duration
	metrics          *poolMetrics
	spans            statementSpans
	reach            *reachability
	// session is what every statement's transaction starts with behind a transaction pooler
	// (DATABASE__TRANSACTION_POOLING); empty when the session settings travel at connect.
	session   sessionSettings
	endpoints []Endpoint
	// preferStandby: DATABASE__TARGET_SESSION_ATTRS=prefer-standby, under which the pool falls
	// back to any host (CheckHosts).
	preferStandby bool
}

// Open builds the pool. It does not wait for the database: the service starts, and healthz
// reports 503, while the database is down. The pool's statistics, the waits for a connection and
// the repositories' operations are measured on mp; every statement is a span of tp's. Every
// statement runs with LIMITS__STATEMENT_TIMEOUT as its statement_timeout.
func Open(d Options, limits Timeouts, log *slog.Logger, mp metric.MeterProvider, tp trace.TracerProvider) (*DB, func(), error) {
	pc, err := PoolConfig(d, limits)
	if err != nil {
		return nil, nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, nil, fmt.Errorf("database pool: %w", err)
	}
	m, err := newPoolMetrics(mp, d, pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	plan := tlsPlanOf(&pc.ConnConfig.Config)
	eps := d.Endpoints()
	hosts := make([]string, len(eps))
	for i, e := range eps {
		hosts[i] = e.String()
	}
	log.Info("database pool ready",
		"hosts", strings.Join(hosts, ","), "target_session_attrs", string(d.TargetSessionAttrs),
		"load_balance_hosts", string(d.LoadBalanceHosts), "transaction_pooling", bool(d.TransactionPooling),
		"database", d.Name, "user", d.Username, "schema", d.Schema,
		"ssl_mode", string(d.TLSMode()), "tls", plan.String(), "pool_size", int(d.PoolSize), "max_overflow", int(d.MaxOverflow),
		"statement_timeout", limits.StatementTimeout.String())
	warnTLS(d, plan, log)
	reach := newReachability(pool, log, len(eps))
	db := &DB{pool: pool, gate: newFairGate(int(pc.MaxConns)), poolTimeout: d.PoolTimeout, metrics: m, reach: reach, spans: newStatementSpans(tp, d),
		statementTimeout: limits.StatementTimeout, exportTimeout: limits.ExportTimeout,
		endpoints: eps, preferStandby: d.TargetSessionAttrs == TargetPreferStandby}
	if d.TransactionPooling {
		db.session = newSessionSettings(d.Schema, limits.StatementTimeout)
	}
	return db, func() { reach.close(); pool.Close() }, nil
}

// milliseconds is d as a statement_timeout value: whole milliseconds, at least 1 (0 would
// mean no limit).
func milliseconds(d time.Duration) string {
	return strconv.FormatInt(max(1, d.Milliseconds()), 10)
}

// Connect timeouts for one attempt at one host. With several hosts it is shorter: a host that
// accepts TCP but never answers (a hung server, a black-holed address) holds each new
// connection that long before the next host is tried, and the contract gives 5 s to move on.
const (
	connectTimeout        = 10 * time.Second
	connectTimeoutPerHost = 4 * time.Second
)

// PoolConfig translates the settings into a pgxpool configuration. pgconn parses the connection
// parameters (connString): hosts, ports, database, user and libpq's TLS parameters, and
// DATABASE_URL's other parameters. It implements libpq's sslmode, fallbacks included: with
// several hosts, each gets its attempts in sslmode's order (prefer: TLS, then plain; allow: the
// other way round), each with a TLS configuration for that host's name. The password is set as a
// field, never pasted into a connection string.
//
// DATABASE__TARGET_SESSION_ATTRS becomes pgconn's ValidateConnect (libpq's checks, as pgx
// implements them) and DATABASE__LOAD_BALANCE_HOSTS=random a shuffle of the hosts before each
// new connection (pgx has no load_balance_hosts).
//
// The session settings (search_path, statement_timeout, read-only transactions, DateStyle)
// are startup parameters of every connection; behind a transaction pooler only those the pooler
// keeps for each client (DateStyle, application_name) are, and the others start every
// transaction instead (see sessionSettings).
func PoolConfig(d Options, limits Timeouts) (*pgxpool.Config, error) {
	eps := d.Endpoints()
	if len(eps) == 0 {
		return nil, errors.New("database config: no host")
	}
	if err := checkFiles(d); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(connString(d))
	if err != nil {
		return nil, fmt.Errorf("database settings: %w", parseConfigError(err))
	}
	cc := pc.ConnConfig
	if _, ok := d.Params["passfile"]; !ok || d.Password != "" {
		cc.Password = d.Password
	}
	if _, ok := d.Params["connect_timeout"]; !ok {
		cc.ConnectTimeout = connectTimeout
		if len(eps) > 1 {
			cc.ConnectTimeout = connectTimeoutPerHost
		}
	}
	cc.ValidateConnect = validateConnect(d.TargetSessionAttrs)
	if d.LoadBalanceHosts == LoadBalanceRandom && len(eps) > 1 {
		pc.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
			shuffleHosts(&cc.Config)
			return nil
		}
	}
	if d.TargetSessionAttrs == TargetPreferStandby && len(eps) > 1 {
		pc.AfterConnect, pc.AfterRelease = markFallback, keepUnlessStaleFallback
	}
	// Runtime parameters from PG* variables (PGOPTIONS, PGAPPNAME) are dropped: a pooler would
	// refuse them, and the service's own settings are the ones that must hold. Those that
	// DATABASE_URL gives (options, application_name) are kept: the operator wrote them.
	runtime := cc.RuntimeParams
	cc.RuntimeParams = map[string]string{"application_name": "emsquery"}
	for k := range d.Params {
		if v, ok := runtime[k]; ok {
			cc.RuntimeParams[k] = v
		}
	}
	// Values leave the database as ::text and come back as filter values: their text form must
	// not depend on the server's or role's DateStyle.
	cc.RuntimeParams["DateStyle"] = "ISO, YMD"
	if !d.TransactionPooling {
		cc.RuntimeParams["search_path"] = pgx.Identifier{d.Schema}.Sanitize()
		// Nothing the service does should ever write; make the database refuse if it tried.
		cc.RuntimeParams["default_transaction_read_only"] = "on"
		cc.RuntimeParams["statement_timeout"] = milliseconds(limits.StatementTimeout)
	}
	// Every statement is sent as an unnamed prepared statement (parse, bind and execute in one
	// round trip; pgx caches only the result description). PostgreSQL then plans each execution
	// with its values: a date range of one month and one of ten years get different plans. The
	// default (named statements cached per connection) falls into PostgreSQL's generic plan
	// after five executions, planned without the dates, which made the heavy aggregates about
	// twice as slow. Unnamed statements also live only within one message, so they work through
	// PgBouncer's transaction pooling, which cannot keep named ones.
	cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	cc.BuildFrontend = bufferedFrontend

	pc.MinConns = int32(d.PoolSize)
	pc.MaxConns = int32(d.PoolSize + d.MaxOverflow)
	pc.MaxConnLifetime = d.PoolRecycle
	pc.MaxConnLifetimeJitter = pc.MaxConnLifetime / 10
	// Connections above POOL_SIZE are the overflow: close them soon after the burst.
	pc.MaxConnIdleTime = time.Minute
	pc.HealthCheckPeriod = healthCheckPeriod
	// pgxpool pings a connection that was idle for a second before handing it out, with the
	// request's own deadline unless PingTimeout is set: a host whose open connections stall
	// (no RST, no answer) would then hold the request until its timeout. With a bound the pool
	// drops that connection and takes or opens another, on another host when this one is down.
	pc.PingTimeout = pingTimeout
	return pc, nil
}

// readBufferSize is what one read from a database connection takes at most. pgx reads into
// its 8 KiB message buffer, often only the part of it left after the last whole message: a
// whole-table list (1,000,000 patients, 60 MB from the database) took about 18,000 read system
// calls, which cost more processor time than encoding the rows. Through a buffer this large,
// each read takes what the socket holds.
const readBufferSize = 64 << 10

// bufferedFrontend is pgx's frontend reading its connection through a readBufferSize buffer.
// The frontend is the connection's only reader (the service never uses the net.Conn directly,
// nor pgconn's SyncConn or Hijack, which would not see this buffer), and its message buffer
// already reads ahead of the message being read: this buffer only reads further ahead.
func bufferedFrontend(r io.Reader, w io.Writer) *pgproto3.Frontend {
	return pgproto3.NewFrontend(bufio.NewReaderSize(r, readBufferSize), w)
}

// healthCheckPeriod is how often pgxpool closes idle connections past MaxConnIdleTime or
// DATABASE__POOL_RECYCLE (a connection past its lifetime is also closed when released, and a
// dead one is replaced at once). It is long because each check costs more than it looks: the
// pool hands out its idle connections most recently used first, which keeps a light load on the
// few server sessions whose caches are warm, but the check takes every idle connection and
// gives them back in that order, which turns the stack upside down. The next request then runs
// on the connection used least recently, often one never used since it was opened: a server
// session whose first heavy statement pays for its catalog caches, memory and the loading of
// the JIT compiler (measured: 110 to 150 ms more on record_stats' statement at 1,000,000
// records, about 300 ms with JIT inlining and optimisation, which the 10,000,000-record
// statements get). With 15 s, a dashboard query every few seconds met such a session every 15 s
// until all POOL_SIZE sessions had run it.
const healthCheckPeriod = time.Minute

// pingTimeout is generous for an empty statement on an idle session, even on a busy server.
const pingTimeout = 2 * time.Second

// validateConnect is libpq's target_session_attrs check, pgx's implementation of it. As with
// libpq, read-only accepts a session that is read-only by default, and the service's own
// sessions are (default_transaction_read_only), so it accepts every host; behind a transaction
// pooler that setting travels with each transaction instead, so there read-only accepts the
// hosts that are read-only by themselves. standby and prefer-standby ask the server whether it
// is in recovery.
func validateConnect(t TargetSessionAttrs) pgconn.ValidateConnectFunc {
	switch t {
	case TargetReadOnly:
		return pgconn.ValidateConnectTargetSessionAttrsReadOnly
	case TargetPrimary:
		return pgconn.ValidateConnectTargetSessionAttrsPrimary
	case TargetStandby:
		return pgconn.ValidateConnectTargetSessionAttrsStandby
	case TargetPreferStandby:
		return pgconn.ValidateConnectTargetSessionAttrsPreferStandby
	default:
		return nil
	}
}

// fallbackRetry is how long a connection that prefer-standby had to make to a primary (no
// standby answered) is kept before it is closed, so that its replacement tries the standbys
// again: a standby that comes back takes the reads back within about this time, instead of
// after DATABASE__POOL_RECYCLE.
const fallbackRetry = 10 * time.Second

// fallbackSince is the CustomData key of the time a fallback connection was made.
const fallbackSince = "emsquery.fallback_since"

// markFallback notes a connection to a server that is not a hot standby. The server says so
// at connect time (in_hot_standby, reported by PostgreSQL 14 and later), so this costs no round
// trip; without it, nothing is marked.
func markFallback(_ context.Context, conn *pgx.Conn) error {
	if conn.PgConn().ParameterStatus("in_hot_standby") == "off" {
		conn.PgConn().CustomData()[fallbackSince] = time.Now()
	}
	return nil
}

// keepUnlessStaleFallback is the pool's AfterRelease: false closes a fallback connection older
// than fallbackRetry.
func keepUnlessStaleFallback(conn *pgx.Conn) bool {
	since, ok := conn.PgConn().CustomData()[fallbackSince].(time.Time)
	return !ok || time.Since(since) < fallbackRetry
}

// lease is a connection acquired for one statement, with the places it took on the way (see
// share.go). Release gives all back, the connection first, so that the statement the gate lets
// in next finds it idle in the pool; a second Release does nothing.
type lease struct {
	conn *pgxpool.Conn
	// What Release gives back besides the connection: the gate's place for key, and the
	// request's slot (nil: none was taken). Fields, not a closure: acquire runs for every
	// statement.
	gate     *fairGate
	key      string
	slot     *semaphore.Weighted
	released bool
}

func (l *lease) Release() {
	if l.released {
		return
	}
	l.released = true
	l.conn.Release()
	l.gate.leave(l.key)
	releaseSlot(l.slot)
}

// acquire waits for a slot of the request's own (WithRequestLimit), then at most
// DATABASE__POOL_TIMEOUT for a connection: for a place at the fair gate, then for pgxpool (see
// share.go). The caller releases the lease. Only this package's helpers (query.go, copy.go) hold
// connections, so every statement is measured, bounded per request and shared fairly by key.
//
// While the database is known to be unreachable (an attempt to connect failed and no probe has
// reached it since) and the pool has no idle connection, it fails at once with
// SERVICE_UNAVAILABLE instead of letting every request wait for a connection attempt of its
// own; see reachability.
func (db *DB) acquire(ctx context.Context) (*lease, error) {
	if db.reach.failFast() {
		return nil, apierr.Unavailable(errUnreachable)
	}
	slot, err := requestSlot(ctx)
	if err != nil {
		return nil, ClassifyContext(ctx, fmt.Errorf("wait for the request's turn: %w", err))
	}
	actx, cancel := context.WithTimeout(ctx, db.poolTimeout)
	defer cancel()
	db.metrics.pending.Add(1)
	start := time.Now()
	key := gateKey(ctx)
	var conn *pgxpool.Conn
	err = db.gate.enter(actx, key)
	if err == nil {
		conn, err = db.pool.Acquire(actx)
		if err != nil {
			db.gate.leave(key)
		}
	}
	db.metrics.pending.Add(-1)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
	db.metrics.acquired(ctx, start, timedOut)
	if err != nil {
		releaseSlot(slot)
		if ctx.Err() != nil {
			// The caller's deadline passed first: as ambiguous as DATABASE__POOL_TIMEOUT.
			db.reach.failed(err, errors.Is(ctx.Err(), context.DeadlineExceeded))
			return nil, ClassifyContext(ctx, err)
		}
		db.reach.failed(err, timedOut)
		return nil, apierr.Unavailable(fmt.Errorf("acquire connection: %w", err))
	}
	db.reach.succeeded()
	return &lease{conn: conn, gate: db.gate, key: key, slot: slot}, nil
}

// classify is ClassifyContext with this pool's settings: a statement timeout's message names
// LIMITS__STATEMENT_TIMEOUT with its value.
func (db *DB) classify(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if err != nil && ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == "57014" {
		return apierr.StatementTimedOut(db.statementTimeout, err)
	}
	return ClassifyContext(ctx, err)
}

// ClassifyContext is Classify for an operation that ran with ctx: when ctx is done, the
// operation did not fail on its own but was stopped, and the error says why. A request past its
// LIMITS__REQUEST_TIMEOUT is TIMEOUT naming that setting (or whatever apierr.Error the context
// was given as its cause); a request whose client went away keeps a plain context.Canceled.
// Both matter because cancelling a query also makes PostgreSQL report 57014 (query_canceled),
// the code of a statement timeout.
func ClassifyContext(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil {
		return Classify(err)
	}
	var ae *apierr.Error
	if cause := context.Cause(ctx); errors.As(cause, &ae) {
		return &apierr.Error{Code: ae.Code, Message: ae.Message, Err: fmt.Errorf("%w (%w)", cause, err)}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &apierr.Error{Code: apierr.Timeout, Message: apierr.RequestTimeoutMessage, Err: fmt.Errorf("%w (%w)", ctx.Err(), err)}
	}
	return fmt.Errorf("%w: %w", context.Cause(ctx), err)
}

// Classify marks errors that mean "the database cannot serve now" as SERVICE_UNAVAILABLE and
// statement timeouts as TIMEOUT naming LIMITS__STATEMENT_TIMEOUT; other errors pass through
// unchanged. Prefer ClassifyContext where the operation's context is at hand: 57014 is also
// what a cancelled query reports.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "57014": // query_canceled: statement_timeout (a cancel is told apart by ClassifyContext)
			return apierr.TimedOut(err)
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, crash, cannot connect now
			pgErr.Code == "53300",                          // too_many_connections
			len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection exceptions
			return apierr.Unavailable(err)
		}
		return err
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	if errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) ||
		// The server went away mid-query (stopped, crashed, restarted): the connection ended.
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return apierr.Unavailable(err)
	}
	return err
}
