package database

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
)

// The helpers below are the repositories' only way to the database. Each runs one statement
// on a pooled connection through run, so that every statement is measured and traced the same
// way.
//
// args are the statement's values, optionally led by PlanOnce.
//
// op names the operation in errors ("unique counts: ...") and in the db.client.operation.duration
// metric's db.operation.name, so it is a constant of the repository, never built from the
// request.

// opPing is the health check's operation.
const opPing = "ping"

// querier is what a statement runs on: a pooled connection, or the transaction that carries
// the session settings behind a transaction pooler.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PlanOnce, put first among a statement's arguments, has the statement prepared under a name
// once per session and executed from there (pgx's QueryExecModeCacheStatement) instead of being
// parsed and planned on every execution: for the light statements whose own work is as small as
// their planning (station_resources' join and aggregate: 0.24 ms a run prepared against 0.40 ms
// planned each time, in pgbench), and only for those whose best plan cannot depend on their
// values. PostgreSQL plans a prepared statement with its values five times and may then settle
// on one plan for every value; that is right for a statement without parameters (it has one
// plan) and for a keyset page of a small dimension table (its key's index whatever the page), and
// wrong for anything that filters the facts (see DefaultQueryExecMode in database.go), which
// never takes it. The statements that do are fixed texts, so each session keeps a few. Behind a
// transaction pooler, which cannot keep a named statement from one transaction to the next, it
// does nothing.
var PlanOnce = planOnce{}

type planOnce struct{}

// statementArgs are pgx's arguments for a helper's args: opts (pgx's query options) first, then
// the exec mode PlanOnce asks for when it leads args, then the values.
func (db *DB) statementArgs(args []any, opts ...any) []any {
	if len(args) > 0 {
		if _, ok := args[0].(planOnce); ok {
			args = args[1:]
			if !db.session.perTransaction() {
				opts = append(opts, pgx.QueryExecModeCacheStatement)
			}
		}
	}
	if len(opts) == 0 {
		return args
	}
	return append(opts, args...)
}

// maxAttempts bounds how often run tries a statement whose connection turned out to be dead.
const maxAttempts = 3

// run acquires a connection (see acquire), runs fn on it as operation op, whose statement is q,
// and releases it. The operation is a span (spans.go) from the wait for a connection to the last
// row read, and its duration, from sending the statement to the last row read, is recorded with
// its outcome; its error comes back classified (see classify) and wrapped with op.
//
// A connection can be dead before the statement is sent: its server was stopped or restarted,
// or failed over, while the connection sat idle in the pool. Every statement of the service
// only reads, so when the connection turns out dead and nothing has been handed to the caller
// yet (delivered is nil or says false), run drops the pool's idle connections to that server
// and runs the statement again on another connection, up to maxAttempts in all: a host that
// fails costs only the requests whose rows were already on their way.
func (db *DB) run(ctx context.Context, op, q string, fn func(querier) error, delivered func() bool) error {
	return db.runOn(ctx, op, q, nil, func(conn *pgxpool.Conn) error { return db.inTransaction(ctx, conn, fn) }, delivered)
}

// runOn is run for any use of the connection, exec (RunBatch's pipeline as well as run's one
// statement); spanAttrs go on the operation's span besides the usual ones.
func (db *DB) runOn(ctx context.Context, op, q string, spanAttrs []attribute.KeyValue, exec func(*pgxpool.Conn) error, delivered func() bool) error {
	spanCtx, span := db.spans.start(ctx, op, q, spanAttrs...)
	for attempt := 1; ; attempt++ {
		conn, err := db.acquire(spanCtx)
		if err != nil {
			end(ctx, span, err)
			return fmt.Errorf("%s: %w", op, err)
		}
		connected(span, conn.conn)
		start := time.Now()
		err = exec(conn.conn)
		if err != nil && attempt < maxAttempts && ctx.Err() == nil && connectionLost(err) && (delivered == nil || !delivered()) {
			addr := remoteAddr(conn.conn)
			conn.Release()
			db.dropIdle(ctx, addr)
			continue
		}
		conn.Release()
		db.metrics.operation(ctx, op, start, err)
		end(ctx, span, err)
		if err != nil {
			return fmt.Errorf("%s: %w", op, db.classify(ctx, err))
		}
		return nil
	}
}

// inTransaction runs fn on conn, within a transaction that starts with the session settings
// when the pool leads to a transaction pooler (see sessionSettings).
func (db *DB) inTransaction(ctx context.Context, conn *pgxpool.Conn, fn func(querier) error) error {
	begin := db.session.begin
	if isStreamed(ctx) {
		// Its own transaction, for its own statement_timeout (SET LOCAL ends with it).
		if begin == "" {
			begin = "BEGIN READ ONLY"
		}
		begin += "; SET LOCAL statement_timeout = " + milliseconds(db.exportTimeout)
	}
	if begin == "" {
		return fn(conn)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{BeginQuery: begin})
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		// A rollback that fails closes the connection, which the pool then drops.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
		return err
	}
	return tx.Commit(ctx)
}

type streamedKey struct{}

// Streamed marks ctx's statements as read while their rows are sent to a client (the GraphQL
// path's whole-table lists): their time is the client's pace as much as the database's, so they
// run with LIMITS__EXPORT_TIMEOUT as their statement_timeout, as the CSV export does, instead of
// LIMITS__STATEMENT_TIMEOUT, which would cut a slow but steady reader.
func Streamed(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamedKey{}, true)
}

func isStreamed(ctx context.Context) bool { v, _ := ctx.Value(streamedKey{}).(bool); return v }

// connectionLost says whether err shows that the connection itself is gone: the server ended
// the session (shutdown, crash) or the socket closed.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03": // admin shutdown, crash shutdown, cannot connect now
			return true
		}
		return len(pgErr.Code) == 5 && pgErr.Code[:2] == "08" // connection exception
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed)
}

// remoteAddr is the server address of conn, "" when unknown.
func remoteAddr(conn *pgxpool.Conn) string {
	if nc := conn.Conn().PgConn().Conn(); nc != nil && nc.RemoteAddr() != nil {
		return nc.RemoteAddr().String()
	}
	return ""
}

// dropIdle closes the pool's idle connections to addr, whose server was just found gone: they
// died with it, and the next requests would only find that out one by one.
func (db *DB) dropIdle(ctx context.Context, addr string) {
	if addr == "" {
		return
	}
	for _, c := range db.pool.AcquireAllIdle(ctx) {
		if remoteAddr(c) == addr {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 100*time.Millisecond)
			_ = c.Conn().Close(cctx)
			cancel()
		}
		c.Release()
	}
}

// Collect runs query q with args and scans every row with scan.
func Collect[T any](ctx context.Context, db *DB, op, q string, args []any, scan pgx.RowToFunc[T]) ([]T, error) {
	return CollectAtMost(ctx, db, op, q, args, -1, nil, scan)
}

// ErrTooManyRows is what CollectAtMost reports of a statement that returned more rows than
// asked for.
var ErrTooManyRows = errors.New("more rows than allowed")

// CollectAtMost is Collect for at most max rows (max < 0: no bound): on the row after the max-th it stops reading
// and fails with ErrTooManyRows (tooMany, when given, replaces it: the caller's error that names
// its setting), so that an answer too large costs no more memory than max rows, whatever the
// statement would have returned. Give the statement a LIMIT of max+1 as well: reading stops
// here, the database stops there.
func CollectAtMost[T any](ctx context.Context, db *DB, op, q string, args []any, max int, tooMany error, scan pgx.RowToFunc[T]) ([]T, error) {
	if tooMany == nil {
		tooMany = ErrTooManyRows
	}
	var out []T
	qargs := db.statementArgs(args)
	err := db.run(ctx, op, q, func(conn querier) error {
		rows, err := conn.Query(ctx, q, qargs...)
		if err != nil {
			return err
		}
		out, err = collectAtMost(rows, max, tooMany, scan)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// collectRows is pgx.CollectRows with the slice doubled as it grows: append grows large slices
// by a quarter at a time, which for a few hundred rows allocated and copied them five times over.
func collectRows[T any](rows pgx.Rows, scan pgx.RowToFunc[T]) ([]T, error) {
	return collectAtMost(rows, -1, nil, scan)
}

// collectAtMost is collectRows failing with tooMany on the row after the max-th (max < 0: no
// bound).
func collectAtMost[T any](rows pgx.Rows, max int, tooMany error, scan pgx.RowToFunc[T]) ([]T, error) {
	defer rows.Close()
	out := make([]T, 0, 16)
	for rows.Next() {
		if max >= 0 && len(out) == max {
			return nil, tooMany
		}
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		if len(out) == cap(out) {
			if max >= 0 && 2*len(out) > max {
				// Never room for more than max rows (slices.Grow rounds up).
				grown := make([]T, len(out), max)
				copy(grown, out)
				out = grown
			} else {
				out = slices.Grow(out, len(out))
			}
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// QueryRow runs query q with args, which returns one row, and scans it into dest. No row is
// pgx.ErrNoRows.
func (db *DB) QueryRow(ctx context.Context, op, q string, args []any, dest ...any) error {
	qargs := db.statementArgs(args)
	return db.run(ctx, op, q, func(conn querier) error {
		return conn.QueryRow(ctx, q, qargs...).Scan(dest...)
	}, nil)
}

// ForEachRow runs query q with args and, for each row, scans it into dest and calls fn: for
// rows that are handled one at a time, without a slice of them all (fn's error ends the query
// and comes back, classified and wrapped with op like the database's).
func (db *DB) ForEachRow(ctx context.Context, op, q string, args []any, dest []any, fn func() error) error {
	called := false
	qargs := db.statementArgs(args)
	return db.run(ctx, op, q, func(conn querier) error {
		rows, err := conn.Query(ctx, q, qargs...)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, dest, func() error {
			called = true
			return fn()
		})
		return err
	}, func() bool { return called })
}

// ForEachRawRow runs query q with args, asking for result column i in formats[i]
// (pgx.TextFormatCode or pgx.BinaryFormatCode), and calls fn with each row's values as the
// database sent them, nil for NULL: for rows written out as they arrive (a whole table as JSON),
// where decoding each value into a Go value only to encode it again costs more than the rest of
// the work. The values are valid only until fn returns. When fn returns false no further row is
// handed on and complete is false (the caller then answers another way).
func (db *DB) ForEachRawRow(ctx context.Context, op, q string, args []any, formats []int16, fn func(row [][]byte) bool) (complete bool, err error) {
	called := false
	qargs := db.statementArgs(args, pgx.QueryResultFormats(formats))
	err = db.run(ctx, op, q, func(conn querier) error {
		rows, err := conn.Query(ctx, q, qargs...)
		if err != nil {
			return err
		}
		defer rows.Close()
		complete = true
		for rows.Next() {
			called = true
			if !fn(rows.RawValues()) {
				complete = false
				return nil
			}
		}
		return rows.Err()
	}, func() bool { return called })
	return complete && err == nil, err
}

// Ping runs SELECT 1 on a pooled connection.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	return db.QueryRow(ctx, opPing, "SELECT 1", nil, &one)
}
