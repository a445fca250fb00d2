package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// TestDatesIgnoreTheDatabaseTimeZone backs docs/api.md's "Dates and time zones": occurred_at is
// the region's wall clock as stored, and the database's TimeZone setting changes no answer. The
// same questions (date ranges, every kind of bucket, a filter on occurred_at, the report's rows
// and the CSV export) get byte-identical answers from a service whose sessions run in UTC and
// from one whose sessions run in Europe/Oslo, on records placed an hour either side of midnight
// and in the hours a daylight-saving change skips and repeats there; and the day the clocks go
// forward still has 24 HOUR buckets.
func TestDatesIgnoreTheDatabaseTimeZone(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	ctx := context.Background()
	// Europe/Oslo: 2025-03-30 02:00 to 03:00 does not exist, 2025-10-26 02:00 to 03:00 happens
	// twice. An ETL that writes wall-clock time may write either.
	if _, err := pool.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency) VALUES
		(970001, '2025-03-29 23:30', 'North Harbour', 'A'), (970002, '2025-03-30 00:30', 'North Harbour', 'B'),
		(970003, '2025-03-30 01:30', 'North Harbour', 'A'), (970004, '2025-03-30 02:30', 'North Harbour', 'C'),
		(970005, '2025-03-30 03:30', 'North Harbour', 'A'), (970006, '2025-03-30 23:30', 'North Harbour', 'D'),
		(970007, '2025-10-26 02:15', 'North Harbour', 'A'), (970008, '2025-10-26 02:45', 'North Harbour', 'A'),
		(970009, '2025-10-25 23:59:59', 'North Harbour', 'E'), (970010, '2025-10-27 00:00', 'North Harbour', 'E')`); err != nil {
		t.Fatal(err)
	}
	const rng = `start_date: "2025-03-30", end_date: "2025-03-30"`
	questions := []struct{ path, query string }{
		{"/graphql", `{ record_series(` + rng + `, bucket: HOUR) { bucket count } }`},
		{"/graphql", `{ record_series(start_date: "2025-10-26", end_date: "2025-10-26", bucket: HOUR) { bucket count } }`},
		{"/graphql", `{ record_series(start_date: "2025-03-29", end_date: "2025-03-31", bucket: DAY, group_by: "degree_of_urgency") { bucket value count } }`},
		{"/graphql", `{ record_series(start_date: "2025-03-01", end_date: "2025-10-31", bucket: WEEK) { bucket count } }`},
		{"/graphql", `{ record_series(start_date: "2025-01-01", end_date: "2025-12-31", bucket: MONTH) { bucket count } }`},
		{"/graphql", `{ record_series(start_date: "2025-01-01", end_date: "2025-12-31", bucket: HOUR_OF_DAY) { bucket count } }`},
		{"/graphql", `{ record_series(start_date: "2025-01-01", end_date: "2025-12-31", bucket: DAY_OF_WEEK) { bucket count } }`},
		{"/graphql", `{ record_stats(` + rng + `, measure: "station_id", bucket: HOUR) { bucket count } }`},
		{"/graphql", `{ distinct_values(columns: ["occurred_at"], start_date: "2025-10-25", end_date: "2025-10-27") { value } }`},
		{"/graphql", `{ unique_counts(columns: ["degree_of_urgency"], ` + rng + `, filters: [{column: "occurred_at", operator: GREATER_THAN_OR_EQUAL, value: "2025-03-30 02:00"}, {column: "occurred_at", operator: LESS_THAN, value: "2025-03-30T03:00"}]) { value count } }`},
		{"/serve/graphql", `{ main_report(start_date: "2025-10-25", end_date: "2025-10-27") { total rows { record_id occurred_at } } }`},
	}
	const export = "/v1/reports/main-report/export?start_date=2025-03-30&end_date=2025-03-30&filter=occurred_at:LESS_THAN:2025-03-30%2002:45"

	answers := func(zone string) []string {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %q SET TimeZone = '%s'`, db.Name, zone)); err != nil {
			t.Fatal(err)
		}
		// A new session has it, as the service's will.
		cc, err := db.Cluster.ConnConfig(db.Name)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = conn.QueryRow(ctx, `SELECT current_setting('TimeZone')`).Scan(&got)
		_ = conn.Close(ctx)
		if err != nil || got != zone {
			t.Fatalf("a new session's TimeZone is %q (%v), want %s", got, err, zone)
		}
		svc := servicetest.Start(t, db, map[string]string{"CACHE__ENABLED": "false"})
		var out []string
		for _, q := range questions {
			r := svc.GraphQL(t, q.path, q.query, nil)
			if r.Status != 200 || len(r.Errors) > 0 {
				t.Fatalf("TimeZone %s: %s: HTTP %d %s", zone, q.query, r.Status, r.Raw)
			}
			out = append(out, string(r.Raw))
		}
		resp, csv := svc.Get(t, export, map[string]string{svc.Header: svc.Key, "SERVICE-X-API-KEY": svc.Key})
		if resp.StatusCode != 200 {
			t.Fatalf("TimeZone %s: export HTTP %d %s", zone, resp.StatusCode, csv)
		}
		return append(out, string(csv))
	}
	utc, oslo := answers("UTC"), answers("Europe/Oslo")
	for i := range utc {
		if utc[i] != oslo[i] {
			what := export
			if i < len(questions) {
				what = questions[i].query
			}
			t.Errorf("%s\nwith TimeZone UTC:         %s\nwith TimeZone Europe/Oslo: %s", what, utc[i], oslo[i])
		}
	}

	var hours struct {
		Data struct {
			RecordSeries []struct {
				Bucket string
				Count  int
			} `json:"record_series"`
		}
	}
	if err := json.Unmarshal([]byte(oslo[0]), &hours); err != nil {
		t.Fatal(err)
	}
	var labels []string
	counts := map[string]int{}
	for _, p := range hours.Data.RecordSeries {
		labels = append(labels, p.Bucket)
		counts[p.Bucket] = p.Count
	}
	if len(labels) != 24 || labels[0] != "2025-03-30 00:00" || labels[23] != "2025-03-30 23:00" || counts["2025-03-30 02:00"] != 1 {
		t.Errorf("the day the clocks go forward: want 24 HOUR buckets 00:00 to 23:00, the one at 02:00 holding its record; got %s", strings.Join(labels, ", "))
	}
}
