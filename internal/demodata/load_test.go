package demodata_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// load fills a fresh, empty database with the data set in layout and returns a connection to it.
func load(t *testing.T, d *demodata.Dataset, layout schema.Layout) *pgx.Conn {
	t.Helper()
	return loadWith(t, d, demodata.LoadOptions{ApplySchema: true, Layout: layout})
}

func loadWith(t *testing.T, d *demodata.Dataset, opt demodata.LoadOptions) *pgx.Conn {
	t.Helper()
	c := pgtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := c.ConnConfig(pgtest.NewDatabaseWith(t, c, ""))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := demodata.Load(ctx, conn, d, opt); err != nil {
		t.Fatalf("%s: %v", opt.Layout, err)
	}
	return conn
}

// Both layouts hold the same rows, the indexes and keys are back after the load, and the
// partitioned one has a partition per month of the period with the default partition empty.
func TestLoadBothLayouts(t *testing.T) {
	t.Parallel()
	d, err := demodata.New(demodata.Config{Records: 3000, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	plain, part := load(t, d, schema.Plain), load(t, d, schema.Partitioned)
	ctx := context.Background()
	const digest = `SELECT (SELECT md5(string_agg(r::text, ',' ORDER BY record_id)) FROM fact_record r)
		|| (SELECT md5(string_agg(o::text, ',' ORDER BY sk_oxygen)) FROM fact_oxygen o)
		|| (SELECT count(*) FROM pg_index WHERE indrelid = 'fact_record'::regclass AND indisvalid)::text
		|| (SELECT count(*) FROM pg_constraint WHERE conrelid = 'fact_record'::regclass AND contype = 'f')::text`
	var a, b string
	if err := plain.QueryRow(ctx, digest).Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := part.QueryRow(ctx, digest).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("layouts differ: plain %s, partitioned %s", a, b)
	}
	var months, inDefault int
	if err := part.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'fact_record'::regclass`).Scan(&months); err != nil {
		t.Fatal(err)
	}
	if err := part.QueryRow(ctx, `SELECT count(*) FROM fact_record_default`).Scan(&inDefault); err != nil {
		t.Fatal(err)
	}
	if months != 24+1 || inDefault != 0 {
		t.Errorf("%d partitions (want 24 months and the default), %d rows in the default partition (want 0)", months, inDefault)
	}
	// A second load into the other layout's tables is refused.
	if _, err := demodata.Load(ctx, plain, d, demodata.LoadOptions{Replace: true, Layout: schema.Partitioned}); err == nil {
		t.Error("loading the partitioned layout into plain tables was not refused")
	}
}

// With Measures, the five tables hold the same rows as without (the time columns aside), on
// both layouts; the time points and shifts are there as generated, and arrival on scene
// (occurred_at + response_time_s) is after en route wherever both are known.
func TestLoadMeasures(t *testing.T) {
	t.Parallel()
	d, err := demodata.New(demodata.Config{Records: 3000, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const digest = `SELECT (SELECT md5(string_agg(row(record_id, occurred_at, station_id, station, sk_resource, sk_patient,
			degree_of_urgency, distance, response_time_s, municipality, transported)::text, ',' ORDER BY record_id)) FROM fact_record)
		|| (SELECT md5(string_agg(o::text, ',' ORDER BY sk_oxygen)) FROM fact_oxygen o)
		|| (SELECT md5(string_agg(p::text, ',' ORDER BY sk_patient)) FROM dim_patient p)
		|| (SELECT md5(string_agg(r::text, ',' ORDER BY sk_resource)) FROM dim_resource r)`
	var without string
	if err := load(t, d, schema.Plain).QueryRow(ctx, digest).Scan(&without); err != nil {
		t.Fatal(err)
	}
	var times []string
	for it := d.RecordRows(); it.Next(); {
		for _, v := range it.Times().Values() {
			if ts := v.(pgtype.Timestamp); ts.Valid {
				times = append(times, ts.Time.Format("2006-01-02 15:04:05"))
			} else {
				times = append(times, "")
			}
		}
	}
	for _, layout := range []schema.Layout{schema.Plain, schema.Partitioned} {
		conn := loadWith(t, d, demodata.LoadOptions{ApplySchema: true, Layout: layout, Measures: true})
		var with string
		if err := conn.QueryRow(ctx, digest).Scan(&with); err != nil {
			t.Fatal(err)
		}
		if with != without {
			t.Errorf("%s: the five tables differ with the measures' columns", layout)
		}
		rows, err := conn.Query(ctx, `SELECT coalesce(to_char(t, 'YYYY-MM-DD HH24:MI:SS'), '')
			FROM fact_record r, unnest(ARRAY[unit_notified_at, en_route_at, at_patient_at, left_scene_at,
				at_destination_at, transfer_of_care_at, back_in_service_at]) WITH ORDINALITY AS u(t, i)
			ORDER BY record_id, i`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, times) {
			t.Errorf("%s: the time columns differ from the generator's", layout)
		}
		var shifts, late int
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM fact_unit_shift),
			(SELECT count(*) FROM fact_record WHERE en_route_at >= occurred_at + response_time_s * interval '1 second')`).Scan(&shifts, &late); err != nil {
			t.Fatal(err)
		}
		if shifts != len(d.Shifts()) || late != 0 {
			t.Errorf("%s: %d shifts (want %d), %d records en route at or after arrival (want 0)", layout, shifts, len(d.Shifts()), late)
		}
	}
	// Measures needs the extension: without the schema, the load says what is missing.
	c := pgtest.Shared(t)
	cfg, err := c.ConnConfig(pgtest.NewDatabase(t, c))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{Measures: true}); err == nil || !strings.Contains(err.Error(), "schema/measures.sql") {
		t.Errorf("load with Measures into tables without the extension: %v, want an error naming schema/measures.sql", err)
	}
}
