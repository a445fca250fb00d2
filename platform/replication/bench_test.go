package replication_test

import (
	"context"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

// BenchmarkLoadDelivery measures a load of rows records in one transaction (the contract's
// measure loads 1,000 at a time): the time from COMMIT returning to the handler receiving the
// transaction with every row, and the rows decoded per second. Run:
//
//	go test -run '^$' -bench LoadDelivery -benchtime 20x ./platform/replication/
func BenchmarkLoadDelivery(b *testing.B) {
	for _, rows := range []int{1_000, 100_000} {
		b.Run(map[int]string{1_000: "1k", 100_000: "100k"}[rows], func(b *testing.B) {
			c := pgtest.SharedWith(b, logical)
			e := newEnv(b, c, standard)
			rec := newRecorder()
			e.opts.MaxTransactionRows = rows
			start(b, e, rec)
			ctx := context.Background()
			conn := e.superConn(b)
			// The test clusters commit asynchronously (synchronous_commit=off), so their WAL
			// reaches the disk, and the WAL sender, up to 600 ms later; a database that serves
			// commits synchronously.
			if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
				b.Fatal(err)
			}
			var delivery time.Duration
			next := int64(0)
			b.ResetTimer()
			for range b.N {
				from := next
				next += int64(rows)
				if _, err := conn.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency, distance, transported, municipality)
SELECT i, timestamp '2024-01-01' + i * interval '1 minute', 'Nord', 'A', 1.25, true, 'Bern' FROM generate_series($1::bigint, $2::bigint) i`, from+1, next); err != nil {
					b.Fatal(err)
				}
				committed := time.Now()
				select {
				case ev := <-rec.ch:
					if ev.kind != "commit" {
						b.Fatalf("%s: %v", ev.kind, ev.err)
					}
					if len(ev.tx.Rows) != rows {
						b.Fatalf("%d rows, want %d", len(ev.tx.Rows), rows)
					}
					delivery += ev.when.Sub(committed)
				case <-time.After(time.Minute):
					b.Fatal("no delivery")
				}
			}
			b.ReportMetric(float64(delivery.Milliseconds())/float64(b.N), "delivery-ms/load")
			b.ReportMetric(float64(rows*b.N)/delivery.Seconds(), "rows/s")
		})
	}
}
