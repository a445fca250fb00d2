package database

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The helpers below are the repositories' only way to the database. Each runs one statement
// on a pooled connection through run, so that every statement is measured the same way (and
// traced, where spans will be started).
//
// op names the operation in errors ("unique counts: ...") and in the db.client.operation.duration
// metric's db.operation.name, so it is a constant of the repository, never built from the
// request.

// opPing is the health check's operation.
const opPing = "ping"

// run acquires a connection (see acquire), runs fn on it as operation op and releases it. The
// operation's duration, from sending the statement to the last row read, is recorded with its
// outcome; its error comes back classified (see classify) and wrapped with op.
func (db *DB) run(ctx context.Context, op string, fn func(*pgxpool.Conn) error) error {
	conn, err := db.acquire(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer conn.Release()
	start := time.Now()
	err = fn(conn)
	db.metrics.operation(ctx, op, start, err)
	if err != nil {
		return fmt.Errorf("%s: %w", op, db.classify(ctx, err))
	}
	return nil
}

// Collect runs query q with args and scans every row with scan.
func Collect[T any](ctx context.Context, db *DB, op, q string, args []any, scan pgx.RowToFunc[T]) ([]T, error) {
	var out []T
	err := db.run(ctx, op, func(conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		out, err = collectRows(rows, scan)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// collectRows is pgx.CollectRows with the slice doubled as it grows: append grows large slices
// by a quarter at a time, which for a few hundred rows allocated and copied them five times over.
func collectRows[T any](rows pgx.Rows, scan pgx.RowToFunc[T]) ([]T, error) {
	defer rows.Close()
	out := make([]T, 0, 16)
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		if len(out) == cap(out) {
			out = slices.Grow(out, len(out))
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
	return db.run(ctx, op, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, q, args...).Scan(dest...)
	})
}

// ForEachRow runs query q with args and, for each row, scans it into dest and calls fn: for
// rows that are handled one at a time, without a slice of them all (fn's error ends the query
// and comes back, classified and wrapped with op like the database's).
func (db *DB) ForEachRow(ctx context.Context, op, q string, args []any, dest []any, fn func() error) error {
	return db.run(ctx, op, func(conn *pgxpool.Conn) error {
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
