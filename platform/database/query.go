package database

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The helpers below are the repositories' only way to the database. Each runs one statement
// on a pooled connection through run, so that every statement is measured and traced the same
// way.
//
// op names the operation in errors ("unique counts: ...") and in the db.client.operation.duration
// metric's db.operation.name, so it is a constant of the repository, never built from the
// request.

// opPing is the health check's operation.
const opPing = "ping"

// run acquires a connection (see acquire), runs fn on it as operation op, whose statement is q,
// and releases it. The operation is a span (spans.go) from the wait for a connection to the last
// row read, and its duration, from sending the statement to the last row read, is recorded with
// its outcome; its error comes back classified (see classify) and wrapped with op.
func (db *DB) run(ctx context.Context, op, q string, fn func(*pgxpool.Conn) error) error {
	spanCtx, span := db.spans.start(ctx, op, q)
	conn, err := db.acquire(spanCtx)
	if err != nil {
		end(ctx, span, err)
		return fmt.Errorf("%s: %w", op, err)
	}
	defer conn.Release()
	connected(span, conn)
	start := time.Now()
	err = fn(conn)
	db.metrics.operation(ctx, op, start, err)
	end(ctx, span, err)
	if err != nil {
		return fmt.Errorf("%s: %w", op, db.classify(ctx, err))
	}
	return nil
}

// Collect runs query q with args and scans every row with scan.
func Collect[T any](ctx context.Context, db *DB, op, q string, args []any, scan pgx.RowToFunc[T]) ([]T, error) {
	var out []T
	err := db.run(ctx, op, q, func(conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scan)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// QueryRow runs query q with args, which returns one row, and scans it into dest. No row is
// pgx.ErrNoRows.
func (db *DB) QueryRow(ctx context.Context, op, q string, args []any, dest ...any) error {
	return db.run(ctx, op, q, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, q, args...).Scan(dest...)
	})
}

// ForEachRow runs query q with args and, for each row, scans it into dest and calls fn: for
// rows that are handled one at a time, without a slice of them all (fn's error ends the query
// and comes back, classified and wrapped with op like the database's).
func (db *DB) ForEachRow(ctx context.Context, op, q string, args []any, dest []any, fn func() error) error {
	return db.run(ctx, op, q, func(conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, dest, fn)
		return err
	})
}

// Ping runs SELECT 1 on a pooled connection.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	return db.QueryRow(ctx, opPing, "SELECT 1", nil, &one)
}
