package replication_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/platform/replication"
)

func TestFingerprintNoticesDefinitionChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, pgtest.SharedWith(t, logical), standard)
	conn := e.superConn(t)
	ctx := context.Background()
	fp := func() string {
		t.Helper()
		f, err := replication.Fingerprint(ctx, conn, e.opts)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	rec := newRecorder()
	start(t, e, rec)
	last := fp()
	same := func(what string) {
		t.Helper()
		if f := fp(); f != last {
			t.Errorf("%s changed the fingerprint", what)
			last = f
		}
	}
	changed := func(what string) {
		t.Helper()
		f := fp()
		if f == last {
			t.Errorf("%s left the fingerprint as it was", what)
		}
		last = f
	}

	// Rows and maintenance change no definition.
	e.exec(t, inserts[0].sql)
	rec.commit(t)
	e.exec(t, "VACUUM FULL dim_station")
	e.exec(t, "ANALYZE fact_record")
	e.exec(t, "TRUNCATE fact_oxygen")
	rec.commit(t)
	same("rows, VACUUM FULL, ANALYZE and TRUNCATE")

	// ALTER TABLE ADD COLUMN; the next row change describes the new column.
	e.exec(t, "ALTER TABLE fact_record ADD COLUMN en_route_at timestamp")
	changed("ALTER TABLE fact_record ADD COLUMN")
	e.exec(t, "INSERT INTO fact_record (record_id, occurred_at, en_route_at) VALUES (1, '2024-01-01', '2024-01-01 00:05')")
	tx := rec.commit(t)
	rel := tx.Rows[0].Relation
	if i := rel.Index("en_route_at"); i < 0 || tx.Rows[0].New[i].Text != "2024-01-01 00:05:00" || rel.Columns[i].TypeName != "timestamp" {
		t.Errorf("after ADD COLUMN: columns %+v, values %+v", rel.Columns, tx.Rows[0].New)
	}

	e.exec(t, "ALTER TABLE fact_record ALTER COLUMN municipality TYPE varchar(80)")
	changed("a column's type")
	e.exec(t, "ALTER TABLE dim_patient REPLICA IDENTITY FULL")
	changed("the replica identity")
	e.exec(t, "ALTER PUBLICATION emsquery DROP TABLE fact_oxygen; ALTER TABLE fact_oxygen SET UNLOGGED")
	changed("fact_oxygen leaving the publication and the WAL")
	e.exec(t, "ALTER TABLE fact_oxygen SET LOGGED")
	changed("fact_oxygen logged again")
	e.exec(t, "ALTER PUBLICATION emsquery ADD TABLE fact_oxygen")
	changed("a table joining the publication")
	e.exec(t, "ALTER PUBLICATION emsquery DROP TABLE fact_oxygen")
	changed("a table leaving the publication")
	e.exec(t, "ALTER PUBLICATION emsquery ADD TABLE fact_oxygen")
	changed("a table joining the publication")
	// A table replaced by a rename: same name, another table.
	e.exec(t, "CREATE TABLE dim_station_new (LIKE dim_station INCLUDING ALL); ALTER TABLE dim_station RENAME TO dim_station_old; ALTER TABLE dim_station_new RENAME TO dim_station")
	changed("dim_station replaced")
	e.exec(t, "CREATE TABLE fact_unit_shift (resource_id integer NOT NULL, shift_start timestamp NOT NULL, shift_end timestamp NOT NULL)")
	changed("fact_unit_shift made")
	same("nothing")
}

func TestReplayedOnAStandby(t *testing.T) {
	t.Parallel()
	primary := pgtest.New(t, logical)
	standby := pgtest.NewStandby(t, primary)
	e := newEnv(t, primary, standard)
	rec := newRecorder()
	start(t, e, rec)
	pconn := e.superConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := standby.WaitForReplay(ctx, primary); err != nil { // the database exists there
		t.Fatal(err)
	}
	s := &env{c: standby, db: e.db}
	sconn := s.superConn(t)

	e.exec(t, inserts[0].sql)
	tx := rec.commit(t)
	if ok, err := replication.Replayed(ctx, pconn, tx.End); err != nil || !ok {
		t.Fatalf("on the primary: replayed %v, %v", ok, err)
	}
	if _, standby, err := replication.ReplayPosition(ctx, pconn); err != nil || standby {
		t.Fatalf("the primary is a standby? %v, %v", standby, err)
	}
	for {
		ok, err := replication.Replayed(ctx, sconn, tx.End)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Replayed: the row is there.
	var names []string
	rows, err := sconn.Query(ctx, "SELECT station_name FROM dim_station")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if len(names) != 1 || !slices.Contains(names, "Nord 'Ost' ✚") {
		t.Errorf("stations on the standby after replay: %q", names)
	}
	pos, isStandby, err := replication.ReplayPosition(ctx, sconn)
	if err != nil || !isStandby || pos < tx.End {
		t.Errorf("standby replay position %s (%v, %v), commit end %s", pos, isStandby, err, tx.End)
	}

	// The standby alone: no primary to make the slot on.
	onStandby := e.opts
	onStandby.Conn = e.opts.Conn.Copy()
	onStandby.Conn.Port = uint16(standby.Port())
	r, err := replication.Check(ctx, onStandby)
	if err != nil || len(r.Missing) != 1 || !strings.Contains(r.Missing[0], "no host is a primary") {
		t.Errorf("check on the standby: %+v, %v", r, err)
	}
	// The standby first, then the primary (DATABASE__HOST=standby,primary): the slot goes to
	// the primary.
	both := onStandby
	both.Conn = onStandby.Conn.Copy()
	both.Conn.Fallbacks = []*pgconn.FallbackConfig{{Host: primary.Host(), Port: uint16(primary.Port())}}
	rec2 := newRecorder()
	src := start(t, &env{c: primary, db: e.db, opts: both}, rec2)
	e.exec(t, "INSERT INTO dim_station VALUES (2, 'zwei')")
	if tx := rec2.commit(t); !tx.Changed("dim_station") {
		t.Errorf("through the host list: %v", tx.Tables)
	}
	var n int
	if err := pconn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", src.State().Slot).Scan(&n); err != nil || n != 1 {
		t.Errorf("slot on the primary: %d, %v", n, err)
	}
}

func TestParseLSN(t *testing.T) {
	for _, s := range []string{"0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF"} {
		l, err := replication.ParseLSN(s)
		if err != nil || l.String() != s {
			t.Errorf("ParseLSN(%q) = %s, %v", s, l, err)
		}
	}
	for _, s := range []string{"", "16", "x/1", "1/100000000"} {
		if _, err := replication.ParseLSN(s); err == nil {
			t.Errorf("ParseLSN(%q) accepted", s)
		}
	}
}
