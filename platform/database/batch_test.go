package database

// RunBatch against a real PostgreSQL, directly and through PgBouncer in transaction pooling
// mode: one snapshot for all statements, read-only, the statement timeout for each statement,
// and the connection left clean after a failure.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// A row committed by another session while a batch runs, between two of its statements, is
// seen by neither: the statements read one snapshot.
func TestBatchReadsOneSnapshot(t *testing.T) {
	t.Parallel()
	cfg, c, name := clusterConfig(t)
	ctx := context.Background()
	if err := c.Exec(ctx, name, "CREATE TABLE t (x int); INSERT INTO t SELECT generate_series(1, 10)"); err != nil {
		t.Fatal(err)
	}
	db, _ := open(t, cfg)

	var (
		before, after    int64
		isolation, ronly string
		slept            []string
	)
	var b Batch
	b.QueueRow("SELECT count(*) FROM t", nil, &before)
	QueueCollect(&b, "SELECT pg_sleep(0.8)::text", nil, pgx.RowTo[string], &slept)
	b.QueueRow("SELECT count(*) FROM t", nil, &after)
	b.QueueRow("SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')", nil, &isolation, &ronly)

	var wg sync.WaitGroup
	var insertErr error
	wg.Go(func() {
		// Once the sleep is under way (the first count has run in the batch's snapshot), and
		// not after a fixed time, which a busy machine can outlast before the batch begins.
		insertErr = insertDuringSleep(ctx, c, name)
	})
	err := db.RunBatch(ctx, "batch", &b)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if insertErr != nil {
		t.Fatal(insertErr)
	}
	if before != 10 || after != 10 {
		t.Errorf("counts %d and %d, want 10 and 10 (one snapshot)", before, after)
	}
	if isolation != "repeatable read" || ronly != "on" {
		t.Errorf("transaction_isolation %q, transaction_read_only %q; want repeatable read, on", isolation, ronly)
	}
	if len(slept) != 1 {
		t.Errorf("the sleep's rows: %q", slept)
	}
	// The next batch sees the new row; the connection (the pool has one) left its transaction.
	var b2 Batch
	b2.QueueRow("SELECT count(*) FROM t", nil, &after)
	if err := db.RunBatch(ctx, "batch", &b2); err != nil {
		t.Fatal(err)
	}
	if after != 11 {
		t.Errorf("count after the batch = %d, want 11", after)
	}
}

// LIMITS__STATEMENT_TIMEOUT bounds each statement of a batch, directly and behind a transaction
// pooler; a statement past it fails the batch with the contract's error, and the connection is
// good for the next statement, outside any transaction.
func TestBatchStatementTimeout(t *testing.T) {
	t.Parallel()
	cfg, c, _ := clusterConfig(t)
	cfg.Limits.StatementTimeout = 600 * time.Millisecond
	direct, _ := open(t, cfg)
	pgb := pgtest.NewPgBouncer(t, c)
	pooled := *cfg
	pooled.Database.Hosts, pooled.Database.Ports = []string{pgb.Host()}, []int{pgb.Port()}
	pooled.Database.TransactionPooling = true
	viaBouncer, _ := open(t, &pooled)

	for _, tc := range []struct {
		name string
		db   *DB
	}{{"direct", direct}, {"transaction pooling", viaBouncer}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// Three statements of 400 ms each: each within the timeout, together past it.
			var s1, s2, s3, timeout, isolation, ronly, path string
			var b Batch
			b.QueueRow("SELECT pg_sleep(0.4)::text", nil, &s1)
			b.QueueRow("SELECT pg_sleep(0.4)::text", nil, &s2)
			b.QueueRow("SELECT pg_sleep(0.4)::text", nil, &s3)
			b.QueueRow("SELECT current_setting('statement_timeout'), current_setting('transaction_isolation'), current_setting('transaction_read_only'), current_setting('search_path')",
				nil, &timeout, &isolation, &ronly, &path)
			if err := tc.db.RunBatch(ctx, "sleeps", &b); err != nil {
				t.Fatalf("three statements each within the timeout: %v", err)
			}
			if timeout != "600ms" || isolation != "repeatable read" || ronly != "on" || strings.Trim(path, `"`) != "public" {
				t.Errorf("statement_timeout %q, transaction_isolation %q, transaction_read_only %q, search_path %q",
					timeout, isolation, ronly, path)
			}

			var slow string
			var b2 Batch
			b2.QueueRow("SELECT 'x'", nil, &s1)
			b2.QueueRow("SELECT pg_sleep(5)::text", nil, &slow)
			b2.QueueRow("SELECT 'y'", nil, &s3)
			start := time.Now()
			err := tc.db.RunBatch(ctx, "sleeps", &b2)
			d := time.Since(start)
			wantAPIError(t, err, apierr.Timeout, "LIMITS__STATEMENT_TIMEOUT=0.6s")
			if d > 3*time.Second {
				t.Errorf("the slow batch failed after %s, want about 600ms", d)
			}
			var status string
			if err := tc.db.QueryRow(ctx, "status", "SELECT current_setting('transaction_isolation')", nil, &status); err != nil {
				t.Fatal(err)
			}
			if status != "read committed" {
				t.Errorf("after a failed batch the next statement runs in %q, want a transaction of its own (read committed)", status)
			}
		})
	}
}

// insertDuringSleep inserts a row into t once another session of database name runs the batch's
// pg_sleep(0.8).
func insertDuringSleep(ctx context.Context, c *pgtest.Cluster, name string) error {
	conn, err := c.Connect(ctx, name)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; {
		var sleeping bool
		// Waiting in pg_sleep, not only parsed: a pipelined batch's statements are parsed before
		// the first runs, and a Parse already shows its text as the active query.
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
			AND query LIKE 'SELECT pg_sleep(0.8)%' AND wait_event = 'PgSleep')`).Scan(&sleeping); err != nil {
			return err
		}
		if sleeping {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the batch's sleep never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, err = conn.Exec(ctx, "INSERT INTO t VALUES (11)")
	return err
}
