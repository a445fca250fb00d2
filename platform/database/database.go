// Package database owns the PostgreSQL connection pool: built from the settings' parts, with
// the TLS modes and pool semantics of the contract, and errors classified for clients.
package database

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/config"
)

// DB is the service's pool. Repositories run their statements through its helpers (Collect,
// QueryRow, ForEachRow, CopyTo, Ping), never on a connection of their own: each helper bounds
// the wait for a free connection by DATABASE__POOL_TIMEOUT whatever the request's own deadline,
// fails fast while the database is unreachable, measures the statement in
// db.client.operation.duration and classifies its error for clients.
type DB struct {
	pool             *pgxpool.Pool
	poolTimeout      time.Duration
	statementTimeout time.Duration
	exportTimeout    time.Duration
	metrics          *poolMetrics
	spans            statementSpans
	reach            *reachability
}

// Open builds the pool. It does not wait for the database: the service starts, and healthz
// reports 503, while the database is down. The pool's statistics, the waits for a connection and
// the repositories' operations are measured on mp; every statement is a span of tp's. Every
// session runs with LIMITS__STATEMENT_TIMEOUT as its statement_timeout.
func Open(d config.Database, limits config.Limits, log *slog.Logger, mp metric.MeterProvider, tp trace.TracerProvider) (*DB, func(), error) {
	pc, err := PoolConfig(d)
	if err != nil {
		return nil, nil, err
	}
	pc.ConnConfig.RuntimeParams["statement_timeout"] = milliseconds(limits.StatementTimeout.Duration())
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, nil, fmt.Errorf("database pool: %w", err)
	}
	m, err := newPoolMetrics(mp, d, pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	log.Info("database pool ready",
		"host", d.Host, "port", int(d.Port), "database", d.Name, "user", d.Username, "schema", d.Schema,
		"tls", tlsMode(d), "pool_size", int(d.PoolSize), "max_overflow", int(d.MaxOverflow),
		"statement_timeout", limits.StatementTimeout.Duration().String())
	reach := newReachability(pool, log)
	db := &DB{pool: pool, poolTimeout: d.PoolTimeout.Duration(), metrics: m, reach: reach, spans: newStatementSpans(tp, d),
		statementTimeout: limits.StatementTimeout.Duration(), exportTimeout: limits.ExportTimeout.Duration()}
	return db, func() { reach.close(); pool.Close() }, nil
}

// milliseconds is d as a statement_timeout value: whole milliseconds, at least 1 (0 would
// mean no limit).
func milliseconds(d time.Duration) string {
	return strconv.FormatInt(max(1, d.Milliseconds()), 10)
}

// PoolConfig translates the settings into a pgxpool configuration. The password is set as a
// field, never pasted into a connection string, so any character in it works.
func PoolConfig(d config.Database) (*pgxpool.Config, error) {
	// An empty connection string still reads PG* environment variables; the fields set below
	// override everything that matters.
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("database config: %w", err)
	}
	cc := pc.ConnConfig
	cc.Host = d.Host
	cc.Port = uint16(d.Port)
	cc.Database = d.Name
	cc.User = d.Username
	cc.Password = d.Password.Reveal()
	cc.Fallbacks = nil
	cc.ConnectTimeout = 10 * time.Second
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["search_path"] = pgx.Identifier{d.Schema}.Sanitize()
	cc.RuntimeParams["application_name"] = "emsquery"
	// Values leave the database as ::text and come back as filter values: their text form must
	// not depend on the server's or role's DateStyle.
	cc.RuntimeParams["DateStyle"] = "ISO, YMD"
	// Nothing the service does should ever write; make the database refuse if it tried.
	cc.RuntimeParams["default_transaction_read_only"] = "on"
	// Every statement is sent as an unnamed prepared statement (parse, bind and execute in one
	// round trip; pgx caches only the result description). PostgreSQL then plans each execution
	// with its values: a date range of one month and one of ten years get different plans. The
	// default (named statements cached per connection) falls into PostgreSQL's generic plan
	// after five executions, planned without the dates, which made the heavy aggregates about
	// twice as slow. Unnamed statements also live only within one message, so they work through
	// PgBouncer's transaction pooling, which cannot keep named ones.
	cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	tlsConfig, err := TLSConfig(d)
	if err != nil {
		return nil, err
	}
	cc.TLSConfig = tlsConfig

	pc.MinConns = int32(d.PoolSize)
	pc.MaxConns = int32(d.PoolSize + d.MaxOverflow)
	pc.MaxConnLifetime = d.PoolRecycle.Duration()
	pc.MaxConnLifetimeJitter = pc.MaxConnLifetime / 10
	// Connections above POOL_SIZE are the overflow: close them soon after the burst.
	pc.MaxConnIdleTime = time.Minute
	pc.HealthCheckPeriod = 15 * time.Second
	return pc, nil
}

// TLSConfig returns the TLS configuration for the DATABASE__ENCRYPT and
// DATABASE__TRUST_SERVER_CERTIFICATE settings; nil means no TLS.
func TLSConfig(d config.Database) (*tls.Config, error) {
	if !d.Encrypt {
		return nil, nil
	}
	if d.TrustServerCertificate {
		// The settings ask for encryption without checking who is at the other end.
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, nil //nolint:gosec
	}
	tc := &tls.Config{ServerName: d.Host, MinVersion: tls.VersionTLS12}
	if d.SSLRootCert != "" {
		pem, err := os.ReadFile(d.SSLRootCert)
		if err != nil {
			return nil, fmt.Errorf("DATABASE__SSL_ROOT_CERT: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("DATABASE__SSL_ROOT_CERT: %q holds no PEM certificate", d.SSLRootCert)
		}
		tc.RootCAs = roots
	}
	return tc, nil
}

func tlsMode(d config.Database) string {
	switch {
	case !bool(d.Encrypt):
		return "off"
	case bool(d.TrustServerCertificate):
		return "on, certificate not verified"
	default:
		return "on, certificate verified"
	}
}

// acquire waits at most DATABASE__POOL_TIMEOUT for a connection. The caller releases it. Only
// this package's helpers (query.go, copy.go) hold connections, so every statement is measured.
//
// While the database is known to be unreachable (an attempt to connect failed and no probe has
// reached it since) and the pool has no idle connection, it fails at once with
// SERVICE_UNAVAILABLE instead of letting every request wait for a connection attempt of its
// own; see reachability.
func (db *DB) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if db.reach.failFast() {
		return nil, apierr.Unavailable(errUnreachable)
	}
	actx, cancel := context.WithTimeout(ctx, db.poolTimeout)
	defer cancel()
	db.metrics.pending.Add(1)
	start := time.Now()
	conn, err := db.pool.Acquire(actx)
	db.metrics.pending.Add(-1)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
	db.metrics.acquired(ctx, start, timedOut)
	if err != nil {
		if ctx.Err() != nil {
			// The caller's deadline passed first: as ambiguous as DATABASE__POOL_TIMEOUT.
			db.reach.failed(err, errors.Is(ctx.Err(), context.DeadlineExceeded))
			return nil, ClassifyContext(ctx, err)
		}
		db.reach.failed(err, timedOut)
		return nil, apierr.Unavailable(fmt.Errorf("acquire connection: %w", err))
	}
	db.reach.succeeded()
	return conn, nil
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
