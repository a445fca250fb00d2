package replication_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/platform/replication"
	"github.com/emsanalytics/emsquery/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// logical is the clusters' setting that logical replication needs.
var logical = pgtest.Options{Conf: "wal_level = logical\nmax_replication_slots = 20\nmax_wal_senders = 20"}

// env is a test database on a logical cluster, with a publication of the followed tables made
// by their owner and a role like the service's (read-only sessions) with REPLICATION.
type env struct {
	c    *pgtest.Cluster
	db   string
	role string
	opts replication.Options
}

func (e *env) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	e.execIn(t, e.db, sql, args...)
}

func (e *env) execIn(t testing.TB, db, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.c.Exec(ctx, db, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// superConn is a superuser connection to the test database, closed at the end of the test.
func (e *env) superConn(t testing.TB) *pgx.Conn {
	t.Helper()
	cfg, err := e.c.ConnConfig(e.db)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

type setup struct {
	publication string // CREATE PUBLICATION's clause after the name; "" for none
	replication bool   // the role's REPLICATION attribute
}

var standard = setup{publication: "FOR TABLE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen", replication: true}

func newEnv(t testing.TB, c *pgtest.Cluster, s setup) *env {
	t.Helper()
	e := &env{c: c}
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	e.role = "r_" + hex.EncodeToString(b)
	password := hex.EncodeToString(b) + "pw"
	repl := "NOREPLICATION"
	if s.replication {
		repl = "REPLICATION"
	}
	e.execIn(t, "postgres", fmt.Sprintf("CREATE ROLE %s LOGIN %s PASSWORD '%s'", e.role, repl, password))
	e.execIn(t, "postgres", fmt.Sprintf("ALTER ROLE %s SET default_transaction_read_only = on", e.role))
	// Registered before the database's clean-up, so it runs after it: the grants go with it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+e.role)
	})
	e.db = pgtest.NewDatabase(t, c)
	e.exec(t, fmt.Sprintf("GRANT SELECT ON ALL TABLES IN SCHEMA public TO %s", e.role))
	e.exec(t, "ALTER TABLE fact_record REPLICA IDENTITY FULL")
	if s.publication != "" {
		e.exec(t, "CREATE PUBLICATION emsquery "+s.publication)
	}
	cfg, err := c.ConnConfig(e.db)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = e.role, password
	e.opts = replication.Options{
		Conn:           cfg,
		StatusInterval: 200 * time.Millisecond,
		RetryFirst:     50 * time.Millisecond,
		RetryLast:      time.Second,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	return e
}

// event is one Handler call.
type event struct {
	kind string // commit, lost, resumed
	tx   *replication.Transaction
	err  error
	at   replication.LSN
	when time.Time
}

type recorder struct{ ch chan event }

func newRecorder() *recorder { return &recorder{ch: make(chan event, 100_000)} }

func (r *recorder) Commit(tx *replication.Transaction) {
	r.ch <- event{kind: "commit", tx: tx, when: time.Now()}
}
func (r *recorder) Lost(err error) { r.ch <- event{kind: "lost", err: err, when: time.Now()} }
func (r *recorder) Resumed(at replication.LSN) {
	r.ch <- event{kind: "resumed", at: at, when: time.Now()}
}

func (r *recorder) next(t *testing.T, within time.Duration) event {
	t.Helper()
	select {
	case ev := <-r.ch:
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %v", within)
		return event{}
	}
}

func (r *recorder) commit(t *testing.T) *replication.Transaction {
	t.Helper()
	ev := r.next(t, 10*time.Second)
	if ev.kind != "commit" {
		t.Fatalf("got %s (%v), want a commit", ev.kind, ev.err)
	}
	return ev.tx
}

// none checks that no event arrives for d.
func (r *recorder) none(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case ev := <-r.ch:
		t.Fatalf("unexpected %s event: %+v", ev.kind, ev.tx)
	case <-time.After(d):
	}
}

func start(t testing.TB, e *env, h replication.Handler) *replication.Source {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := replication.Start(ctx, e.opts, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		slot := src.State().Slot // the last one, after any reconnection
		src.Close()
		// The server drops a temporary slot when the walsender exits, a moment after the
		// connection closed; the database cannot be dropped before.
		waitSlotGone(t, e, slot)
	})
	return src
}

// waitSlotGone waits until the slot left pg_replication_slots.
func waitSlotGone(t testing.TB, e *env, slot string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := e.c.ConnConfig("postgres")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil {
			t.Fatalf("slot %s: %v", slot, err)
		}
		if n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rowText reads a row's columns in the server's text output (the types' output functions, as
// the stream gives them), in column order.
func rowText(t *testing.T, conn *pgx.Conn, table, where string) (cols []string, vals []*string) {
	t.Helper()
	ctx := context.Background()
	const q = `SELECT attname::text FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`
	rows, err := conn.Query(ctx, q, table)
	if err != nil {
		t.Fatal(err)
	}
	cols, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	rows, err = conn.Query(ctx, "SELECT * FROM "+pgx.Identifier{table}.Sanitize()+" WHERE "+where,
		pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("%s where %s: no row (%v)", table, where, rows.Err())
	}
	for _, raw := range rows.RawValues() {
		if raw == nil {
			vals = append(vals, nil)
		} else {
			v := string(raw)
			vals = append(vals, &v)
		}
	}
	return cols, vals
}

// sameRow checks values against a row read by rowText.
func sameRow(t *testing.T, what string, rel *replication.Relation, got []replication.Value, cols []string, want []*string) {
	t.Helper()
	if len(rel.Columns) != len(cols) || len(got) != len(cols) {
		t.Fatalf("%s: %d columns, %d values; want %d columns %v", what, len(rel.Columns), len(got), len(cols), cols)
	}
	for i, c := range cols {
		if rel.Columns[i].Name != c {
			t.Errorf("%s: column %d is %q, want %q", what, i, rel.Columns[i].Name, c)
		}
		switch {
		case want[i] == nil && got[i].Kind != replication.Null:
			t.Errorf("%s: %s = %+v, want NULL", what, c, got[i])
		case want[i] != nil && (got[i].Kind != replication.Text || got[i].Text != *want[i]):
			t.Errorf("%s: %s = %+v, want %q", what, c, got[i], *want[i])
		}
	}
}

// The statements of one load, in foreign-key order, and what each one's transaction is.
var inserts = []struct{ table, key, sql string }{
	{"dim_station", "station_id = 1", `INSERT INTO dim_station VALUES (1, 'Nord ''Ost'' ✚')`},
	{"dim_resource", "sk_resource = 10", `INSERT INTO dim_resource VALUES (10, 100, 'RTW 1', 1, 'Nord ''Ost'' ✚', '2024-01-01', NULL)`},
	{"dim_patient", "sk_patient = 20", `INSERT INTO dim_patient VALUES (20, 42, '1982-03-04', 'female', 71.5)`},
	{"fact_record", "record_id = 30", `INSERT INTO fact_record VALUES (30, '2024-05-06 07:08:09.5', 1, 'Nord ''Ost'' ✚', 10, 20, 'A', 12.34, 456, 'Bern', true)`},
	{"fact_oxygen", "sk_oxygen = 40", `INSERT INTO fact_oxygen VALUES (40, 30, 'mask', 4.5, '2024-05-06 07:20:00')`},
}

var updates = []struct{ table, key, sql string }{
	{"dim_station", "station_id = 1", `UPDATE dim_station SET station_name = 'Süd' WHERE station_id = 1`},
	{"dim_resource", "sk_resource = 10", `UPDATE dim_resource SET valid_to = '2024-12-31' WHERE sk_resource = 10`},
	{"dim_patient", "sk_patient = 20", `UPDATE dim_patient SET weight = NULL WHERE sk_patient = 20`},
	{"fact_record", "record_id = 30", `UPDATE fact_record SET degree_of_urgency = 'B', distance = 1.5 WHERE record_id = 30`},
	{"fact_oxygen", "sk_oxygen = 40", `UPDATE fact_oxygen SET flow_rate = 15 WHERE sk_oxygen = 40`},
}

func TestChangesOfEachTableArrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgtest.SharedWith(t, logical), standard)
	conn := e.superConn(t)
	ctx := context.Background()
	rec := newRecorder()
	src := start(t, e, rec)
	startPos := src.State().Position

	for _, in := range inserts {
		if _, err := conn.Exec(ctx, in.sql); err != nil {
			t.Fatal(err)
		}
		tx := rec.commit(t)
		if !slices.Equal(tx.Tables, []string{in.table}) || len(tx.Rows) != 1 || tx.Overflow {
			t.Fatalf("%s: tables %v, %d rows, overflow %v", in.sql, tx.Tables, len(tx.Rows), tx.Overflow)
		}
		if tx.LSN <= startPos || tx.End <= tx.LSN || time.Since(tx.Time) > time.Minute {
			t.Errorf("%s: LSN %s end %s time %v (started at %s)", in.sql, tx.LSN, tx.End, tx.Time, startPos)
		}
		row := tx.Rows[0]
		if row.Op != replication.Insert || row.Old != nil || row.Relation.Table != in.table || row.Relation.Schema != "public" {
			t.Fatalf("%s: %+v", in.sql, row)
		}
		cols, want := rowText(t, conn, in.table, in.key)
		sameRow(t, in.sql, row.Relation, row.New, cols, want)
		if row.Relation.Columns[0].TypeName == "" || !row.Relation.Columns[0].Key {
			t.Errorf("%s: first column %+v, want a named key column", in.table, row.Relation.Columns[0])
		}
	}

	for _, up := range updates {
		cols, before := rowText(t, conn, up.table, up.key)
		if _, err := conn.Exec(ctx, up.sql); err != nil {
			t.Fatal(err)
		}
		tx := rec.commit(t)
		if !slices.Equal(tx.Tables, []string{up.table}) || len(tx.Rows) != 1 {
			t.Fatalf("%s: tables %v, %d rows", up.sql, tx.Tables, len(tx.Rows))
		}
		row := tx.Rows[0]
		_, after := rowText(t, conn, up.table, up.key)
		sameRow(t, up.sql+" (new)", row.Relation, row.New, cols, after)
		if up.table == "fact_record" { // REPLICA IDENTITY FULL
			if !row.OldComplete || row.Relation.ReplicaIdentity != 'f' {
				t.Fatalf("%s: old complete %v, identity %c", up.sql, row.OldComplete, row.Relation.ReplicaIdentity)
			}
			sameRow(t, up.sql+" (old)", row.Relation, row.Old, cols, before)
		} else if row.OldComplete || row.Old != nil {
			t.Errorf("%s: the default identity gave old values %+v", up.sql, row.Old)
		}
	}

	// Deletes in one transaction, children first: one transaction, every table, in order.
	if _, err := conn.Exec(ctx, `BEGIN;
DELETE FROM fact_oxygen; DELETE FROM fact_record; DELETE FROM dim_patient; DELETE FROM dim_resource; DELETE FROM dim_station;
COMMIT`); err != nil {
		t.Fatal(err)
	}
	tx := rec.commit(t)
	if want := replication.Tables; !slices.Equal(tx.Tables, want) || len(tx.Rows) != 5 {
		t.Fatalf("deletes: tables %v, %d rows; want %v, 5 rows", tx.Tables, len(tx.Rows), want)
	}
	for _, row := range tx.Rows {
		if row.Op != replication.Delete || row.New != nil {
			t.Errorf("delete: %+v", row)
		}
		switch row.Relation.Table {
		case "fact_record":
			if !row.OldComplete || row.Old[row.Relation.Index("degree_of_urgency")].Text != "B" {
				t.Errorf("fact_record delete: old %+v", row.Old)
			}
		default: // the key only
			if row.OldComplete || row.Old[0].Kind != replication.Text || row.Old[1].Kind != replication.Absent {
				t.Errorf("%s delete: old %+v, want the key only", row.Relation.Table, row.Old)
			}
		}
	}

	// TRUNCATE, after new rows in the same transaction: the order is kept.
	if _, err := conn.Exec(ctx, `BEGIN; `+inserts[0].sql+`; TRUNCATE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen; COMMIT`); err != nil {
		t.Fatal(err)
	}
	tx = rec.commit(t)
	if len(tx.Rows) != 6 || tx.Rows[0].Op != replication.Insert || len(tx.Tables) != 5 {
		t.Fatalf("truncate: tables %v, rows %+v", tx.Tables, tx.Rows)
	}
	var truncated []string
	for _, row := range tx.Rows[1:] {
		if row.Op != replication.Truncate {
			t.Errorf("truncate: %+v", row)
		}
		truncated = append(truncated, row.Relation.Table)
	}
	slices.Sort(truncated)
	if want := slices.Sorted(slices.Values(replication.Tables)); !slices.Equal(truncated, want) {
		t.Errorf("truncated %v, want %v", truncated, want)
	}

	// fact_unit_shift, made later and published, is followed too.
	e.exec(t, `CREATE TABLE fact_unit_shift (resource_id integer NOT NULL, shift_start timestamp NOT NULL, shift_end timestamp NOT NULL, CHECK (shift_end > shift_start));
ALTER PUBLICATION emsquery ADD TABLE fact_unit_shift`)
	if _, err := conn.Exec(ctx, `INSERT INTO fact_unit_shift VALUES (100, '2024-01-01 08:00', '2024-01-01 20:00')`); err != nil {
		t.Fatal(err)
	}
	tx = rec.commit(t)
	if !slices.Equal(tx.Tables, []string{"fact_unit_shift"}) {
		t.Errorf("fact_unit_shift insert: tables %v", tx.Tables)
	}
	rec.none(t, 300*time.Millisecond)
	if st := src.State(); !st.Streaming || st.Failures != 0 || st.LastCommit != tx.End {
		t.Errorf("state %+v", st)
	}
}

func TestWritesElsewhereEndNothing(t *testing.T) {
	t.Parallel()
	c := pgtest.SharedWith(t, logical)
	e := newEnv(t, c, standard)
	other := pgtest.NewDatabase(t, c)
	e.exec(t, "CREATE TABLE staging (id int)")
	rec := newRecorder()
	src := start(t, e, rec)
	begin := src.State().Position

	// Another database every 100 ms, this database's other tables, and maintenance.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writes int
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := c.Exec(ctx, other, "INSERT INTO fact_record (record_id, occurred_at) VALUES ($1, now())", i); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
			writes++
		}
	})
	e.exec(t, "INSERT INTO staging SELECT generate_series(1, 1000)")
	e.exec(t, "VACUUM ANALYZE fact_record")
	e.exec(t, "VACUUM FULL dim_station")
	e.exec(t, "CHECKPOINT")
	rec.none(t, 2*time.Second)
	cancel()
	wg.Wait()
	if writes < 10 {
		t.Fatalf("only %d writes to the other database", writes)
	}
	// The position processed moved past the other database's writes, so the server need not
	// keep their WAL for the slot.
	slot := src.State().Slot
	conn := e.superConn(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var confirmed string
		if err := conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&confirmed); err != nil {
			t.Fatal(err)
		}
		pos, err := replication.ParseLSN(confirmed)
		if err != nil {
			t.Fatal(err)
		}
		if pos > begin {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s confirmed %s, still at the start %s", slot, pos, begin)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A change of ours still arrives.
	e.exec(t, inserts[0].sql)
	if tx := rec.commit(t); !slices.Equal(tx.Tables, []string{"dim_station"}) {
		t.Errorf("tables %v", tx.Tables)
	}
}

func TestWalsenderTerminated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgtest.SharedWith(t, logical), standard)
	conn := e.superConn(t)
	rec := newRecorder()
	src := start(t, e, rec)
	e.exec(t, inserts[0].sql)
	rec.commit(t)
	oldSlot := src.State().Slot

	// A writer commits one record every 10 ms throughout, noting when each insert began.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wconn := e.superConn(t)
	var mu sync.Mutex
	began := map[string]time.Time{} // the committed ones
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; ctx.Err() == nil; i++ {
			b := time.Now()
			if _, err := wconn.Exec(ctx, "INSERT INTO fact_record (record_id, occurred_at) VALUES ($1, now())", i); err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				return
			}
			mu.Lock()
			began[fmt.Sprint(i)] = b
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	})
	time.Sleep(200 * time.Millisecond)
	var terminated bool
	if err := conn.QueryRow(context.Background(),
		"SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", oldSlot).Scan(&terminated); err != nil || !terminated {
		t.Fatalf("terminate the walsender: %v, %v", terminated, err)
	}

	// Commits, then Lost, then Resumed, then commits again.
	delivered := map[string]bool{}
	var lost, resumed event
	for resumed.kind == "" {
		ev := rec.next(t, 20*time.Second)
		switch ev.kind {
		case "commit":
			if lost.kind != "" {
				t.Fatal("a commit between Lost and Resumed")
			}
		case "lost":
			lost = ev
		case "resumed":
			if lost.kind == "" {
				t.Fatal("Resumed without Lost")
			}
			resumed = ev
		}
	}
	if lost.err == nil || !strings.Contains(lost.err.Error(), "terminat") {
		t.Errorf("lost: %v, want the termination", lost.err)
	}
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	// Wait for the writer's last commit, then check that each insert begun after Resumed was
	// delivered.
	e.exec(t, "INSERT INTO dim_station VALUES (99, 'last')")
	for {
		ev := rec.next(t, 10*time.Second)
		if ev.kind != "commit" {
			t.Fatalf("%s after the recovery: %v", ev.kind, ev.err)
		}
		if ev.tx.Changed("dim_station") {
			break
		}
		for _, row := range ev.tx.Rows {
			delivered[row.New[0].Text] = true
		}
	}
	after := 0
	for id, b := range began {
		if b.After(resumed.when) {
			after++
			if !delivered[id] {
				t.Errorf("record %s, inserted after the recovery, was not delivered", id)
			}
		}
	}
	if after < 10 {
		t.Errorf("only %d inserts after the recovery", after)
	}
	st := src.State()
	if !st.Streaming || st.Failures != 1 || st.Recoveries != 1 || st.Slot == oldSlot || st.Err == nil {
		t.Errorf("state %+v", st)
	}
	// The old temporary slot went with its connection.
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", oldSlot).Scan(&n); err != nil || n != 0 {
		t.Errorf("old slot still there: %d, %v", n, err)
	}
}

func TestCloseDropsTheSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgtest.SharedWith(t, logical), standard)
	src := start(t, e, newRecorder())
	slot := src.State().Slot
	conn := e.superConn(t)
	var temporary bool
	if err := conn.QueryRow(context.Background(), "SELECT temporary FROM pg_replication_slots WHERE slot_name = $1 AND plugin = 'pgoutput'", slot).Scan(&temporary); err != nil || !temporary {
		t.Fatalf("slot %s: temporary %v, %v", slot, temporary, err)
	}
	src.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s outlived Close", slot)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestOverflowKeepsTheTables(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgtest.SharedWith(t, logical), standard)
	e.opts.MaxTransactionRows = 10
	rec := newRecorder()
	start(t, e, rec)
	e.exec(t, "INSERT INTO fact_record (record_id, occurred_at) SELECT i, now() FROM generate_series(1, 11) i")
	tx := rec.commit(t)
	if !tx.Overflow || tx.Rows != nil || !slices.Equal(tx.Tables, []string{"fact_record"}) {
		t.Errorf("overflow %v, %d rows, tables %v", tx.Overflow, len(tx.Rows), tx.Tables)
	}
	e.exec(t, "INSERT INTO fact_record (record_id, occurred_at) SELECT i, now() FROM generate_series(12, 21) i")
	if tx := rec.commit(t); tx.Overflow || len(tx.Rows) != 10 {
		t.Errorf("10 rows: overflow %v, %d rows", tx.Overflow, len(tx.Rows))
	}
}

func missing(t *testing.T, e *env) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := replication.Check(ctx, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Missing) > 0 {
		// Start refuses with the same list.
		src, err := replication.Start(ctx, e.opts, newRecorder())
		var me *replication.MissingError
		if !errors.As(err, &me) || !slices.Equal(me.Missing, r.Missing) {
			t.Errorf("Start: %v, want the MissingError of %q", err, r.Missing)
		}
		if src != nil {
			src.Close()
		}
	}
	return r.Missing
}

func wantMissing(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("missing %q, want %d items like %q", got, len(want), want)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("missing[%d] = %q, want it to contain %q", i, got[i], want[i])
		}
	}
}

func TestCheckNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	t.Run("wal_level", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, pgtest.Shared(t), standard)
		wantMissing(t, missing(t, e), "wal_level is replica, not logical (ALTER SYSTEM SET wal_level = logical")
	})
	t.Run("everything in place", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, pgtest.SharedWith(t, logical), standard)
		ctx := context.Background()
		r, err := replication.Check(ctx, e.opts)
		if err != nil || len(r.Missing) != 0 {
			t.Fatalf("missing %q, %v", r.Missing, err)
		}
		if r.Role != e.role || len(r.Tables) != 5 || r.Table("fact_record").ReplicaIdentity != 'f' || r.Table("dim_station").ReplicaIdentity != 'd' || r.Table("fact_unit_shift") != nil {
			t.Errorf("report %+v", r)
		}
	})
	t.Run("role and publication", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, pgtest.SharedWith(t, logical), setup{})
		wantMissing(t, missing(t, e),
			fmt.Sprintf("the role %s lacks the REPLICATION attribute (ALTER ROLE %s REPLICATION)", e.role, e.role),
			"the publication emsquery does not exist (CREATE PUBLICATION emsquery FOR TABLE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen;")
	})
	t.Run("tables and operations", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, pgtest.SharedWith(t, logical), setup{replication: true,
			publication: "FOR TABLE dim_station, dim_resource, dim_patient, fact_record WITH (publish = 'insert, update')"})
		wantMissing(t, missing(t, e),
			"the publication emsquery does not publish delete, truncate (ALTER PUBLICATION emsquery SET (publish = 'insert, update, delete, truncate'))",
			"the publication emsquery does not publish fact_oxygen (ALTER PUBLICATION emsquery ADD TABLE fact_oxygen")
	})
	t.Run("row filter", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, pgtest.SharedWith(t, logical), setup{replication: true,
			publication: "FOR TABLE dim_station, dim_resource, dim_patient, fact_record WHERE (station_id > 0), fact_oxygen"})
		wantMissing(t, missing(t, e), "publishes fact_record with a row filter or column list")
	})
	t.Run("unlogged", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, pgtest.SharedWith(t, logical), setup{replication: true})
		e.exec(t, "ALTER TABLE fact_oxygen SET UNLOGGED; CREATE PUBLICATION emsquery FOR ALL TABLES")
		wantMissing(t, missing(t, e), "the table fact_oxygen is UNLOGGED: its changes are not in the WAL (ALTER TABLE fact_oxygen SET LOGGED)")
	})
	t.Run("table", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, pgtest.SharedWith(t, logical), standard)
		e.opts.Tables = append(slices.Clone(replication.Tables), "fact_missing")
		wantMissing(t, missing(t, e), "the table(s) fact_missing do not exist")
	})
	t.Run("partitioned", func(t *testing.T) {
		t.Parallel()
		c := pgtest.SharedWith(t, logical)
		e := newEnv(t, c, standard)
		db := pgtest.NewDatabaseWith(t, c, schema.PartitionedDDL)
		e.exec(t, fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", db, e.role))
		e.db = db
		e.exec(t, fmt.Sprintf("GRANT SELECT ON ALL TABLES IN SCHEMA public TO %s", e.role))
		e.exec(t, "CREATE PUBLICATION emsquery "+standard.publication)
		e.opts.Conn.Database = db
		wantMissing(t, missing(t, e), "reports changes of the partitioned table(s) fact_record under their partitions' names (ALTER PUBLICATION emsquery SET (publish_via_partition_root = true))")
		e.exec(t, "ALTER PUBLICATION emsquery SET (publish_via_partition_root = true)")
		wantMissing(t, missing(t, e))
		// Through the root: a record in a month's partition is fact_record's.
		rec := newRecorder()
		start(t, e, rec)
		e.exec(t, "SELECT create_fact_record_months('2024-01-01', '2024-02-01')")
		e.exec(t, "INSERT INTO fact_record (record_id, occurred_at) VALUES (1, '2024-01-15'), (2, '2030-01-01')")
		if tx := rec.commit(t); !slices.Equal(tx.Tables, []string{"fact_record"}) || len(tx.Rows) != 2 || tx.Rows[1].Relation.Table != "fact_record" {
			t.Errorf("tables %v, rows %+v", tx.Tables, tx.Rows)
		}
		// The TRUNCATE of one partition is not sent through the root; the catalog shows it.
		conn := e.superConn(t)
		before, err := replication.Fingerprint(context.Background(), conn, e.opts)
		if err != nil {
			t.Fatal(err)
		}
		e.exec(t, "TRUNCATE fact_record_y2024m01")
		rec.none(t, 500*time.Millisecond)
		if after, err := replication.Fingerprint(context.Background(), conn, e.opts); err != nil || after == before {
			t.Errorf("TRUNCATE of a partition left the fingerprint as it was (%v)", err)
		}
	})
}

// waitFor reads events until one of kind, failing on a commit in between when strict.
func waitFor(t *testing.T, rec *recorder, kind string, within time.Duration) event {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ev := rec.next(t, time.Until(deadline))
		if ev.kind == kind {
			return ev
		}
		if ev.kind != "commit" {
			t.Fatalf("got %s (%v) waiting for %s", ev.kind, ev.err, kind)
		}
	}
}

func TestServerRestarted(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, logical)
	e := newEnv(t, c, standard)
	rec := newRecorder()
	src := start(t, e, rec)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	lost := waitFor(t, rec, "lost", 10*time.Second)
	// Down for a while: reconnecting fails, with a growing pause, and is reported in the state.
	time.Sleep(time.Second)
	if st := src.State(); st.Streaming || st.Failures != 1 || st.Err == nil {
		t.Errorf("while down: %+v", st)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	resumed := waitFor(t, rec, "resumed", 20*time.Second)
	if !resumed.when.After(lost.when) {
		t.Error("resumed before lost")
	}
	e.exec(t, inserts[0].sql)
	if tx := rec.commit(t); !tx.Changed("dim_station") {
		t.Errorf("after the restart: %v", tx.Tables)
	}
}

func TestSilentServerIsLeft(t *testing.T) {
	t.Parallel()
	// A cluster of its own: a stopped process blocks what waits for every process to answer
	// (DROP DATABASE's barrier), and creating a slot waits for that.
	e := newEnv(t, pgtest.New(t, logical), standard)
	e.opts.SilenceTimeout = time.Second
	rec := newRecorder()
	src := start(t, e, rec)
	conn := e.superConn(t)
	var pid int
	oldSlot := src.State().Slot
	if err := conn.QueryRow(context.Background(), "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", oldSlot).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// The walsender stops answering without closing the connection, as a server or network
	// gone silent would.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	lost := waitFor(t, rec, "lost", 10*time.Second)
	if !strings.Contains(lost.err.Error(), "no message from the server") {
		t.Errorf("lost: %v", lost.err)
	}
	select {
	case ev := <-rec.ch:
		if ev.kind != "resumed" {
			t.Fatalf("%s (%v), want resumed", ev.kind, ev.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("not resumed within 30 s: %+v", src.State())
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	waitSlotGone(t, e, oldSlot) // the walsender, woken, finds its connection closed
	e.exec(t, inserts[0].sql)
	if tx := rec.commit(t); !tx.Changed("dim_station") {
		t.Errorf("after the recovery: %v", tx.Tables)
	}
}

func TestConnectionSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgtest.SharedWith(t, logical), setup{replication: true})
	e.exec(t, "CREATE SCHEMA analytics; SET search_path = analytics;\n"+schema.DDL)
	e.exec(t, fmt.Sprintf("GRANT USAGE ON SCHEMA analytics TO %s; GRANT SELECT ON ALL TABLES IN SCHEMA analytics TO %s", e.role, e.role))
	e.exec(t, "CREATE PUBLICATION emsquery FOR TABLE public.dim_station, analytics.dim_station, analytics.dim_resource, analytics.dim_patient, analytics.fact_record, analytics.fact_oxygen")
	e.opts.Schema = "analytics"
	// The pool's settings: a statement timeout the stream must outlive, and a DateStyle the
	// values' text follows.
	e.opts.Conn.RuntimeParams["statement_timeout"] = "1000"
	e.opts.Conn.RuntimeParams["DateStyle"] = "SQL, DMY"
	rec := newRecorder()
	start(t, e, rec)
	time.Sleep(1500 * time.Millisecond)
	e.exec(t, "INSERT INTO public.dim_station VALUES (1, 'elsewhere')")
	e.exec(t, "INSERT INTO analytics.dim_patient (sk_patient, date_of_birth) VALUES (1, '1982-03-04')")
	tx := rec.commit(t)
	if !slices.Equal(tx.Tables, []string{"dim_patient"}) || tx.Rows[0].Relation.Schema != "analytics" {
		t.Fatalf("tables %v, rows %+v", tx.Tables, tx.Rows)
	}
	if v := tx.Rows[0].New[2]; v.Text != "04/03/1982" {
		t.Errorf("date_of_birth %+v, want it in the connection's DateStyle (SQL, DMY)", v)
	}
	rec.none(t, 300*time.Millisecond)
}
