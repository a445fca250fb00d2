package delta_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/platform/replication"
	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var logical = pgtest.Options{Conf: "wal_level = logical\nmax_replication_slots = 20\nmax_wal_senders = 20"}

// txs hands the stream's transactions to the test.
type txs chan *replication.Transaction

func (c txs) Commit(tx *replication.Transaction) { c <- tx }
func (c txs) Lost(err error)                     { panic(fmt.Sprintf("replication lost: %v", err)) }
func (c txs) Resumed(replication.LSN)            {}

// counted is one counting question: its selector, and the same question in SQL (its grouping
// expressions and its WHERE), which reads the counts afresh.
type counted struct {
	name  string
	sel   delta.Selector
	group string // SQL expressions of the key, comma separated; "" for none
	where string
}

var questions = []counted{
	{name: "records", sel: delta.Selector{Table: "fact_record"}},
	{name: "per station", sel: delta.Selector{Table: "fact_record", Key: delta.Columns("station")}, group: "station"},
	{name: "urgency and transport of station Nord or none", group: "degree_of_urgency, transported",
		where: "station = 'Nord' OR station IS NULL",
		sel: delta.Selector{Table: "fact_record", Key: delta.Columns("degree_of_urgency", "transported"),
			Where: delta.In("station", ptr("Nord"), nil)}},
	{name: "municipalities of urgent records", group: "municipality", where: "degree_of_urgency IN ('A', 'B')",
		sel: delta.Selector{Table: "fact_record", Key: delta.Columns("municipality"),
			Where: delta.All(delta.In("degree_of_urgency", ptr("A"), ptr("B")))}},
	{name: "per day", group: "occurred_at::date", sel: delta.Selector{Table: "fact_record", Key: day}},
}

func ptr(s string) *string { return &s }

// day keys a record by its date, as occurred_at::date writes it (timestamps are written
// "YYYY-MM-DD HH:MM:SS[.ffffff]" with the ISO DateStyle).
func day(r delta.Row) (delta.Key, error) {
	v, err := r.Get("occurred_at")
	if err != nil || v == nil {
		return delta.MakeKey(v), err
	}
	d, _, _ := strings.Cut(*v, " ")
	return delta.MakeKey(&d), nil
}

// readCounts runs q's SQL with its statement's snapshot, as a caller would start a Counter.
func readCounts(t *testing.T, conn *pgx.Conn, q counted) (map[delta.Key]int64, *delta.Snapshot) {
	t.Helper()
	groups, by := "", ""
	if q.group != "" {
		groups, by = q.group+", ", " GROUP BY "+q.group
	}
	where := ""
	if q.where != "" {
		where = " WHERE " + q.where
	}
	sql := fmt.Sprintf(`WITH s AS (SELECT %s AS snap)
SELECT s.snap, g.* FROM s LEFT JOIN (SELECT %scount(*) FROM fact_record%s%s) AS g ON true`, delta.SnapshotQuery, groups, where, by)
	rows, err := conn.Query(context.Background(), sql, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		t.Fatalf("%s: %v", q.name, err)
	}
	defer rows.Close()
	counts := map[delta.Key]int64{}
	var snap *delta.Snapshot
	for rows.Next() {
		raw := rows.RawValues()
		if snap, err = delta.ParseSnapshot(string(raw[0])); err != nil {
			t.Fatal(err)
		}
		n := raw[len(raw)-1]
		if n == nil { // no group at all
			continue
		}
		vals := make([]*string, 0, len(raw)-2)
		for _, v := range raw[1 : len(raw)-1] {
			if v == nil {
				vals = append(vals, nil)
			} else {
				vals = append(vals, ptr(string(v)))
			}
		}
		var c int64
		fmt.Sscan(string(n), &c)
		if c > 0 { // count(*) without GROUP BY is a row of 0 for no rows
			counts[delta.MakeKey(vals...)] += c
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return counts, snap
}

// load makes random transactions of INSERT, UPDATE, DELETE and (rarely) TRUNCATE on
// fact_record.
type load struct {
	rnd    *rand.Rand
	nextID int64
}

func (l *load) pick(vals ...string) *string {
	i := l.rnd.IntN(len(vals) + 1)
	if i == len(vals) {
		return nil
	}
	return &vals[i]
}

func (l *load) tx(ctx context.Context, conn *pgx.Conn) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for range 1 + l.rnd.IntN(4) {
			var err error
			switch k := l.rnd.IntN(100); {
			case k < 45:
				n := 1 + l.rnd.IntN(30)
				ids, times := make([]int64, n), make([]time.Time, n)
				stations, urgencies, transported, municipalities := make([]*string, n), make([]*string, n), make([]*bool, n), make([]*string, n)
				for i := range n {
					l.nextID++
					ids[i] = l.nextID
					times[i] = time.Date(2024, 5, 1+l.rnd.IntN(5), l.rnd.IntN(24), l.rnd.IntN(60), 0, l.rnd.IntN(2)*500_000_000, time.UTC)
					stations[i] = l.pick("Nord", "Süd", "O'Brien ✚", "nord")
					urgencies[i] = l.pick("A", "B", "C", "D", "E")
					if b := l.rnd.IntN(3); b < 2 {
						v := b == 1
						transported[i] = &v
					}
					municipalities[i] = l.pick("Bern", "Thun", "Biel/Bienne", "")
				}
				_, err = tx.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency, transported, municipality)
SELECT * FROM unnest($1::bigint[], $2::timestamp[], $3::text[], $4::text[], $5::bool[], $6::text[])`,
					ids, times, stations, urgencies, transported, municipalities)
			case k < 65:
				_, err = tx.Exec(ctx, `UPDATE fact_record SET station = $1, degree_of_urgency = $2 WHERE record_id % $3 = $4`,
					l.pick("Nord", "Süd", "Ost"), l.pick("A", "C"), 3+l.rnd.IntN(10), l.rnd.IntN(3))
			case k < 75:
				_, err = tx.Exec(ctx, `UPDATE fact_record SET occurred_at = occurred_at + interval '13 hours', transported = NOT transported
WHERE record_id % $1 = $2`, 4+l.rnd.IntN(10), l.rnd.IntN(4))
			case k < 98:
				_, err = tx.Exec(ctx, `DELETE FROM fact_record WHERE record_id % $1 = $2`, 5+l.rnd.IntN(20), l.rnd.IntN(5))
			default:
				_, err = tx.Exec(ctx, `TRUNCATE fact_record CASCADE`)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func TestCountersFollowRandomLoads(t *testing.T) {
	c := pgtest.SharedWith(t, logical)
	db := pgtest.NewDatabase(t, c)
	ctx := context.Background()
	if err := c.Exec(ctx, db, `ALTER TABLE fact_record REPLICA IDENTITY FULL;
CREATE PUBLICATION emsquery FOR TABLE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen`); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ConnConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	connect := func() *pgx.Conn {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	conn, wconn := connect(), connect()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	l := &load{rnd: rand.New(rand.NewPCG(seed, 1))}
	for range 10 {
		if err := l.tx(ctx, conn); err != nil {
			t.Fatal(err)
		}
	}

	ch := make(txs, 10_000)
	src, err := replication.Start(ctx, replication.Options{Conn: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	// The first counts are read while a writer commits, each question under its own snapshot.
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wl := &load{rnd: rand.New(rand.NewPCG(seed, 2)), nextID: 1 << 40}
	wg.Go(func() {
		// Each transaction runs to its end under ctx, not wctx: cancelling one during its
		// COMMIT could let the server commit it after the marker below, which then no longer
		// follows every load the counts must have seen.
		for wctx.Err() == nil {
			if err := wl.tx(ctx, wconn); err != nil {
				t.Error(err)
				return
			}
		}
	})
	time.Sleep(100 * time.Millisecond)
	counters := make([]*delta.Counter, len(questions))
	for i, q := range questions {
		counts, snap := readCounts(t, conn, q)
		counters[i] = delta.NewCounter(q.sel, counts, snap)
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	stop()
	wg.Wait()

	marker := 0
	check := func(round int) {
		t.Helper()
		// A marker transaction: everything before it has been delivered when it arrives.
		marker++
		if _, err := conn.Exec(ctx, "INSERT INTO dim_station VALUES ($1, $2)", marker, fmt.Sprint("marker ", marker)); err != nil {
			t.Fatal(err)
		}
		for {
			var tx *replication.Transaction
			select {
			case tx = <-ch:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: no marker", round)
			}
			for i, ctr := range counters {
				if _, err := ctr.Apply(tx); err != nil {
					t.Fatalf("round %d, %s: %v", round, questions[i].name, err)
				}
			}
			if tx.Changed("dim_station") {
				break
			}
		}
		for i, q := range questions {
			want, _ := readCounts(t, conn, q)
			if got := counters[i].Counts(); !maps.Equal(got, want) {
				t.Fatalf("round %d, %s: followed %v, SQL %v", round, q.name, got, want)
			}
			var total int64
			for _, n := range want {
				total += n
			}
			if counters[i].Total() != total || counters[i].Len() != len(want) {
				t.Fatalf("round %d, %s: total %d len %d, SQL %d, %d", round, q.name, counters[i].Total(), counters[i].Len(), total, len(want))
			}
		}
	}
	check(0)
	for round := 1; round <= 25; round++ {
		for range 1 + l.rnd.IntN(8) {
			if err := l.tx(ctx, conn); err != nil {
				t.Fatal(err)
			}
		}
		check(round)
	}
}

func TestCountersRefuseWhatTheyCannotFollow(t *testing.T) {
	c := pgtest.SharedWith(t, logical)
	db := pgtest.NewDatabase(t, c)
	ctx := context.Background()
	if err := c.Exec(ctx, db, `CREATE PUBLICATION emsquery FOR TABLE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen;
INSERT INTO dim_station VALUES (1, 'a'), (2, 'b')`); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ConnConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(txs, 100)
	src, err := replication.Start(ctx, replication.Options{Conn: cfg, MaxTransactionRows: 5, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	stations := delta.Selector{Table: "dim_station", Key: delta.Columns("station_name")}
	records := delta.Selector{Table: "fact_record"}
	next := func() *replication.Transaction {
		select {
		case tx := <-ch:
			return tx
		case <-time.After(10 * time.Second):
			t.Fatal("no transaction")
			return nil
		}
	}

	// The default replica identity: an INSERT is followed, an UPDATE is not.
	ctr := delta.NewCounter(stations, map[delta.Key]int64{delta.MakeKey(ptr("a")): 1, delta.MakeKey(ptr("b")): 1}, nil)
	if err := c.Exec(ctx, db, "INSERT INTO dim_station VALUES (3, 'c')"); err != nil {
		t.Fatal(err)
	}
	if changed, err := ctr.Apply(next()); err != nil || !changed || ctr.Total() != 3 || ctr.Count(delta.MakeKey(ptr("c"))) != 1 {
		t.Fatalf("insert: changed %v, %v, total %d", changed, err, ctr.Total())
	}
	if err := c.Exec(ctx, db, "UPDATE dim_station SET station_name = 'z' WHERE station_id = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctr.Apply(next()); !errors.Is(err, delta.ErrCannotFollow) || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") {
		t.Fatalf("update without the old row: %v", err)
	}
	// Once lost, always lost.
	if _, err := ctr.Apply(&replication.Transaction{Tables: []string{"dim_station"}}); !errors.Is(err, delta.ErrCannotFollow) {
		t.Fatalf("after a refusal: %v", err)
	}

	// More rows than the stream keeps.
	rec := delta.NewCounter(records, nil, nil)
	if err := c.Exec(ctx, db, "INSERT INTO fact_record (record_id, occurred_at) SELECT i, now() FROM generate_series(1, 6) i"); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Apply(next()); !errors.Is(err, delta.ErrCannotFollow) {
		t.Fatalf("overflow: %v", err)
	}
	// Another table's change leaves a count alone.
	rec = delta.NewCounter(records, map[delta.Key]int64{"": 6}, nil)
	if err := c.Exec(ctx, db, "DELETE FROM dim_station WHERE station_id = 3"); err != nil {
		t.Fatal(err)
	}
	if changed, err := rec.Apply(next()); err != nil || changed || rec.Total() != 6 {
		t.Fatalf("another table: changed %v, %v, total %d", changed, err, rec.Total())
	}
}

func TestSnapshotSees(t *testing.T) {
	s, err := delta.ParseSnapshot("100:110:102,105")
	if err != nil {
		t.Fatal(err)
	}
	for xid, want := range map[uint32]bool{50: true, 99: true, 100: true, 101: true, 102: false, 105: false, 109: true, 110: false, 200: false} {
		if got := s.Sees(xid); got != want {
			t.Errorf("Sees(%d) = %v, want %v", xid, got, want)
		}
	}
	// Across an epoch: xmax just past 2^32, a 32-bit id just below it is in the epoch before.
	s, err = delta.ParseSnapshot(fmt.Sprintf("%d:%d:", uint64(1)<<32-10, uint64(1)<<32+5))
	if err != nil {
		t.Fatal(err)
	}
	for xid, want := range map[uint32]bool{1<<32 - 20: true, 1<<32 - 5: true, 3: true, 5: false, 6: false} {
		if got := s.Sees(xid); got != want {
			t.Errorf("epoch: Sees(%d) = %v, want %v", xid, got, want)
		}
	}
	for _, bad := range []string{"", "1:2", "a:2:", "3:2:", "1:2:x"} {
		if _, err := delta.ParseSnapshot(bad); err == nil {
			t.Errorf("ParseSnapshot(%q) accepted", bad)
		}
	}
}

func TestKeyRoundTrip(t *testing.T) {
	for _, vals := range [][]*string{nil, {nil}, {ptr("")}, {ptr("a"), nil, ptr("")}, {ptr("n"), ptr("t")}} {
		k := delta.MakeKey(vals...)
		got := k.Values()
		if len(got) != len(vals) {
			t.Fatalf("%q: %d values, want %d", k, len(got), len(vals))
		}
		for i := range vals {
			if (got[i] == nil) != (vals[i] == nil) || got[i] != nil && *got[i] != *vals[i] {
				t.Errorf("%q: value %d differs", k, i)
			}
		}
	}
	if delta.MakeKey(nil) == delta.MakeKey(ptr("")) || delta.MakeKey(ptr("a"), ptr("b")) == delta.MakeKey(ptr("ab")) {
		t.Error("distinct values share a key")
	}
}
