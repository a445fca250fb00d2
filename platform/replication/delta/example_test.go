package delta_test

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/platform/replication"
	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

// follower keeps one count of records per station, as a kept records_count or unique_counts
// answer would be kept.
type follower struct {
	mu  sync.Mutex
	ctr *delta.Counter // nil: unknown, compute afresh
}

func (f *follower) Commit(tx *replication.Transaction) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctr == nil {
		return
	}
	if _, err := f.ctr.Apply(tx); err != nil {
		f.ctr = nil // cannot follow (no old row, a huge load): the next question computes it
	}
}

// Lost and Resumed: nothing known survives a gap in the stream.
func (f *follower) Lost(error) { f.mu.Lock(); f.ctr = nil; f.mu.Unlock() }

func (f *follower) Resumed(replication.LSN) { f.mu.Lock(); f.ctr = nil; f.mu.Unlock() }

// The order that makes a followed count exact: start the stream first (every commit after
// Start returns is delivered), then read the counts with the snapshot of the same statement;
// the Counter skips the delivered transactions that snapshot already saw.
func Example() {
	ctx := context.Background()
	cfg, _ := pgx.ParseConfig("postgres://emsquery_reader@db/ems")
	f := &follower{}
	src, err := replication.Start(ctx, replication.Options{Conn: cfg}, f)
	if err != nil {
		return // a *replication.MissingError names what the server lacks
	}
	defer src.Close()

	conn, _ := pgx.ConnectConfig(ctx, cfg)
	// One statement: the snapshot comes back even when there is no group (an empty table).
	rows, _ := conn.Query(ctx, `WITH s AS (SELECT `+delta.SnapshotQuery+` AS snap)
SELECT s.snap, g.station, g.n FROM s LEFT JOIN (SELECT station, count(*) AS n FROM fact_record GROUP BY station) AS g ON true`)
	counts := map[delta.Key]int64{}
	var snap *delta.Snapshot
	for rows.Next() {
		var s string
		var station *string
		var n *int64
		_ = rows.Scan(&s, &station, &n)
		snap, _ = delta.ParseSnapshot(s)
		if n != nil {
			counts[delta.MakeKey(station)] = *n
		}
	}
	f.mu.Lock()
	f.ctr = delta.NewCounter(delta.Selector{Table: "fact_record", Key: delta.Columns("station")}, counts, snap)
	f.mu.Unlock()
	// Meanwhile, every CACHE__MAX_STALENESS: replication.Fingerprint(ctx, conn, opts), and
	// everything is dropped when it changed.
}
