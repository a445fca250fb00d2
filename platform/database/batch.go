package database

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Batch is statements that answer one question together, run by RunBatch as one operation.
// Queue them with QueueRow and QueueCollect; a Batch is run once.
type Batch struct {
	stmts []batched
}

// batched is one statement of a Batch and how its result is read.
type batched struct {
	q    string
	args []any
	read func(pgx.BatchResults) error
}

// QueueRow queues query q with args, which returns one row, scanned into dest as QueryRow
// scans it (no row is pgx.ErrNoRows).
func (b *Batch) QueueRow(q string, args []any, dest ...any) {
	b.stmts = append(b.stmts, batched{q: q, args: args, read: func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(dest...)
	}})
}

// QueueCollect queues query q with args and sets *out to its rows, each scanned with scan, as
// Collect returns them. *out is replaced, never appended to: when RunBatch runs the batch again
// on another connection, its rows are read anew.
func QueueCollect[T any](b *Batch, q string, args []any, scan pgx.RowToFunc[T], out *[]T) {
	b.stmts = append(b.stmts, batched{q: q, args: args, read: func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		*out, err = collectRows(rows, scan)
		return err
	}})
}

// RunBatch runs b's statements as operation op: in one round trip and on one snapshot of the
// database.
//
// A question that takes several statements (a summary's figures and its breakdowns) is best
// answered by several plain statements, each with its own plan (parallel where it can), rather
// than by one statement that holds the matching rows for all of them; but sent one after the
// other they would cost a round trip each, and each would see the data as it is when it starts:
// after an ETL load committed between two of them, the parts of one answer would disagree. So
// the statements go in one pipeline (extended protocol, one Sync), inside one REPEATABLE READ
// READ ONLY transaction that the pipeline begins and commits itself: every statement reads the
// snapshot the first one took, and the whole costs one round trip, as one statement does.
//
// Everything else is as for the other helpers (run): the batch is one operation in
// db.client.operation.duration and one span, whose db.query.text is the statements joined by
// "; " and whose db.operation.batch.size is their number; LIMITS__STATEMENT_TIMEOUT bounds each
// statement (PostgreSQL times each Execute of a pipeline on its own); behind a transaction
// pooler the transaction sets search_path and statement_timeout first, one round trip more
// (sessionSettings.snapshot); and a
// connection found dead runs the batch again on another, which is why the results are read
// into their places anew each time (QueueRow scans over dest, QueueCollect replaces *out). A
// failed batch leaves the transaction aborted; it is rolled back before the connection goes
// back to the pool.
func (db *DB) RunBatch(ctx context.Context, op string, b *Batch) error {
	texts := make([]string, len(b.stmts))
	for i, s := range b.stmts {
		texts[i] = s.q
	}
	var attrs []attribute.KeyValue
	if len(b.stmts) > 1 {
		// The conventions count a batch from two operations.
		attrs = []attribute.KeyValue{semconv.DBOperationBatchSize(len(b.stmts))}
	}
	return db.runOn(ctx, op, strings.Join(texts, "; "), attrs, func(conn *pgxpool.Conn) error {
		return db.pipeline(ctx, conn, b)
	}, nil)
}

// pipeline sends b on conn, within its transaction (the pipeline's first statement, or behind a
// transaction pooler a round trip before it: see sessionSettings.snapshot), followed by a
// COMMIT, and reads every result.
func (db *DB) pipeline(ctx context.Context, conn *pgxpool.Conn, b *Batch) error {
	err := db.sendPipeline(ctx, conn, b)
	if err != nil {
		if pg := conn.Conn().PgConn(); !pg.IsClosed() && pg.TxStatus() != 'I' {
			// As inTransaction: a rollback that fails closes the connection, which the pool
			// then drops (as it drops any connection released inside a transaction).
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_, _ = conn.Exec(rctx, "ROLLBACK")
		}
	}
	return err
}

func (db *DB) sendPipeline(ctx context.Context, conn *pgxpool.Conn, b *Batch) error {
	pb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.stmts)+2)}
	if db.session.perTransaction() {
		if _, err := conn.Exec(ctx, db.session.snapshot); err != nil {
			return err
		}
	} else {
		pb.Queue(beginSnapshot)
	}
	for _, s := range b.stmts {
		pb.Queue(s.q, s.args...)
	}
	pb.Queue("COMMIT")
	br := conn.SendBatch(ctx, pb)
	err := readBatch(br, !db.session.perTransaction(), b)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// readBatch reads the results of the pipeline's BEGIN (when it has one), b's statements and the
// COMMIT, in order.
func readBatch(br pgx.BatchResults, begins bool, b *Batch) error {
	if begins {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	for _, s := range b.stmts {
		if err := s.read(br); err != nil {
			return err
		}
	}
	_, err := br.Exec()
	return err
}
