package demodata_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/schema"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// load fills a fresh, empty database with the data set in layout and returns a connection to it.
func load(t *testing.T, d *demodata.Dataset, layout schema.Layout) *pgx.Conn {
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
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{ApplySchema: true, Layout: layout}); err != nil {
		t.Fatalf("%s: %v", layout, err)
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
