package schema_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// database returns a connection to a fresh, empty database with layout applied (twice: the
// files are idempotent).
func database(t *testing.T, layout schema.Layout) *pgx.Conn {
	t.Helper()
	c := pgtest.Shared(t)
	ctx := context.Background()
	name := pgtest.NewDatabaseWith(t, c, "")
	for i := 0; i < 2; i++ {
		if err := c.Exec(ctx, name, layout.DDL()); err != nil {
			t.Fatalf("%s DDL, run %d: %v", layout, i+1, err)
		}
	}
	cfg, err := c.ConnConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func strings(t *testing.T, conn *pgx.Conn, q string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The service sees the same tables, columns and types on both layouts, and the same indexes
// (on the partitioned layout, declared on fact_record and present on each partition).
func TestLayoutsHaveTheSameTables(t *testing.T) {
	t.Parallel()
	plain, part := database(t, schema.Plain), database(t, schema.Partitioned)
	const columns = `SELECT table_name || '.' || column_name || ' ' || data_type || coalesce('(' || numeric_precision || ',' || numeric_scale || ')', '') || ' ' || is_nullable
		FROM information_schema.columns
		WHERE table_schema = 'public' AND table_name IN ('dim_station', 'dim_resource', 'dim_patient', 'fact_record', 'fact_oxygen')
		ORDER BY table_name, ordinal_position`
	if p, q := strings(t, plain, columns), strings(t, part, columns); !reflect.DeepEqual(p, q) {
		t.Errorf("columns differ:\nplain       %q\npartitioned %q", p, q)
	}
	// Index names and their column lists, primary keys aside (the partitioned one holds
	// occurred_at too).
	const indexes = `SELECT c.relname || ' ' || pg_get_indexdef(i.indexrelid, 1, true) || coalesce(',' || pg_get_indexdef(i.indexrelid, 2, true), '')
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = ANY ($1::regclass[]) AND NOT i.indisprimary ORDER BY 1`
	tables := []string{"dim_station", "dim_resource", "dim_patient", "fact_record", "fact_oxygen"}
	if p, q := strings(t, plain, indexes, tables), strings(t, part, indexes, tables); !reflect.DeepEqual(p, q) {
		t.Errorf("indexes differ:\nplain       %q\npartitioned %q", p, q)
	}
	if kind := strings(t, part, "SELECT relkind::text FROM pg_class WHERE oid = 'fact_record'::regclass"); kind[0] != "p" {
		t.Errorf("fact_record relkind %s, want p (partitioned)", kind[0])
	}
}

func TestCreateFactRecordMonths(t *testing.T) {
	t.Parallel()
	conn := database(t, schema.Partitioned)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Rows before their month exists wait in the default partition.
	if _, err := conn.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at) VALUES (1, '2024-02-29 23:59:59'), (2, '2024-03-01'), (3, '2024-04-01')`); err != nil {
		t.Fatal(err)
	}
	var made int
	if err := conn.QueryRow(ctx, "SELECT create_fact_record_months('2024-02-10', '2024-03-31')").Scan(&made); err != nil || made != 2 {
		t.Fatalf("made %d partitions (%v), want 2", made, err)
	}
	if err := conn.QueryRow(ctx, "SELECT create_fact_record_months('2024-02-01', '2024-03-01')").Scan(&made); err != nil || made != 0 {
		t.Fatalf("again: made %d partitions (%v), want 0", made, err)
	}
	got := strings(t, conn, `SELECT tableoid::regclass::text || ' ' || record_id FROM fact_record ORDER BY record_id`)
	want := []string{"fact_record_y2024m02 1", "fact_record_y2024m03 2", "fact_record_default 3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows in %q, want %q", got, want)
	}
	// Every partition has every index of fact_record.
	missing := strings(t, conn, `
		SELECT p.relid::regclass::text || ' lacks ' || pi.indexrelid::regclass::text
		FROM pg_partition_tree('fact_record') p
		CROSS JOIN pg_index pi
		WHERE p.isleaf AND pi.indrelid = 'fact_record'::regclass
		  AND NOT EXISTS (SELECT 1 FROM pg_inherits h JOIN pg_index ci ON ci.indexrelid = h.inhrelid
		                  WHERE h.inhparent = pi.indexrelid AND ci.indrelid = p.relid)`)
	if len(missing) > 0 {
		t.Errorf("indexes missing on partitions: %q", missing)
	}
	// With fact_record's REPLICA IDENTITY FULL, the months made after it have it too; the ones
	// made before keep theirs (the DBA sets those once, docs/replication.md).
	if _, err := conn.Exec(ctx, `ALTER TABLE fact_record REPLICA IDENTITY FULL`); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT create_fact_record_months('2024-04-01', '2024-04-30')").Scan(&made); err != nil || made != 1 {
		t.Fatalf("April: made %d partitions (%v), want 1", made, err)
	}
	got = strings(t, conn, `SELECT p.relid::regclass::text || ' ' || c.relreplident::text FROM pg_partition_tree('fact_record') p
		JOIN pg_class c ON c.oid = p.relid WHERE p.isleaf ORDER BY 1`)
	want = []string{"fact_record_default d", "fact_record_y2024m02 d", "fact_record_y2024m03 d", "fact_record_y2024m04 f"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replica identities %q, want %q", got, want)
	}
}

// The role the service logs in as reads every table, on both layouts, and writes none; its
// sessions start read-only.
func TestReaderRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, layout := range []schema.Layout{schema.Plain, schema.Partitioned} {
		conn := database(t, layout)
		if _, err := conn.Exec(ctx, "SET ROLE emsquery_reader"); err != nil {
			t.Fatalf("%s: %v", layout, err)
		}
		for _, table := range []string{"dim_station", "dim_resource", "dim_patient", "fact_record", "fact_oxygen"} {
			if _, err := conn.Exec(ctx, "SELECT count(*) FROM "+table); err != nil {
				t.Errorf("%s: emsquery_reader cannot read %s: %v", layout, table, err)
			}
		}
		_, err := conn.Exec(ctx, "INSERT INTO dim_station VALUES (1, 'x')")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: emsquery_reader's INSERT: %v, want insufficient_privilege (42501)", layout, err)
		}
		if _, err := conn.Exec(ctx, "RESET ROLE"); err != nil {
			t.Fatal(err)
		}
	}
	conn := database(t, schema.Plain)
	got := strings(t, conn, "SELECT unnest(rolconfig) FROM pg_roles WHERE rolname = 'emsquery_reader'")
	if !reflect.DeepEqual(got, []string{"default_transaction_read_only=on"}) {
		t.Errorf("emsquery_reader's settings %q, want default_transaction_read_only=on", got)
	}
}

// The measures extension applies on both layouts, twice (idempotent): fact_record gains the
// seven nullable time columns, on every partition too, and fact_unit_shift refuses a shift that
// does not end after it starts; the reader role reads the new table.
func TestMeasuresExtension(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wantColumns := []string{
		"unit_notified_at timestamp without time zone YES", "en_route_at timestamp without time zone YES",
		"at_patient_at timestamp without time zone YES", "left_scene_at timestamp without time zone YES",
		"at_destination_at timestamp without time zone YES", "transfer_of_care_at timestamp without time zone YES",
		"back_in_service_at timestamp without time zone YES",
	}
	for _, layout := range []schema.Layout{schema.Plain, schema.Partitioned} {
		conn := database(t, layout)
		if layout == schema.Partitioned {
			if _, err := conn.Exec(ctx, "SELECT create_fact_record_months('2024-01-01', '2024-02-29')"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at) VALUES (1, '2024-01-15 10:00')`); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if _, err := conn.Exec(ctx, schema.MeasuresDDL); err != nil {
				t.Fatalf("%s: measures DDL, run %d: %v", layout, i+1, err)
			}
		}
		// Every table that holds fact_record's rows (the partitions, or the table itself).
		tables := strings(t, conn, `SELECT relid::regclass::text FROM pg_partition_tree('fact_record') WHERE isleaf`)
		if len(tables) == 0 {
			tables = []string{"fact_record"}
		}
		for _, table := range tables {
			got := strings(t, conn, `SELECT column_name || ' ' || data_type || ' ' || is_nullable FROM information_schema.columns
				WHERE table_schema = 'public' AND table_name = $1 AND column_name LIKE '%\_at' AND column_name <> 'occurred_at'
				ORDER BY ordinal_position`, table)
			if !reflect.DeepEqual(got, wantColumns) {
				t.Errorf("%s: %s has %q, want %q", layout, table, got, wantColumns)
			}
		}
		if _, err := conn.Exec(ctx, `UPDATE fact_record SET unit_notified_at = occurred_at + interval '40 seconds', en_route_at = occurred_at + interval '85 seconds'`); err != nil {
			t.Errorf("%s: filling the time columns: %v", layout, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO fact_unit_shift VALUES (7, '2024-01-15 07:00', '2024-01-15 19:00')`); err != nil {
			t.Errorf("%s: a shift: %v", layout, err)
		}
		_, err := conn.Exec(ctx, `INSERT INTO fact_unit_shift VALUES (7, '2024-01-15 19:00', '2024-01-15 19:00')`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			t.Errorf("%s: an empty shift: %v, want check_violation (23514)", layout, err)
		}
		if _, err := conn.Exec(ctx, "SET ROLE emsquery_reader"); err != nil {
			t.Fatal(err)
		}
		var shifts, notified int
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM fact_unit_shift), (SELECT count(unit_notified_at) FROM fact_record)`).Scan(&shifts, &notified); err != nil || shifts != 1 || notified != 1 {
			t.Errorf("%s: emsquery_reader reads %d shifts and %d notified times (%v), want 1 and 1", layout, shifts, notified, err)
		}
		if _, err := conn.Exec(ctx, "RESET ROLE"); err != nil {
			t.Fatal(err)
		}
	}
}
