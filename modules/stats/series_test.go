package stats_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// record_series (contract section 6.2) over HTTP on the edge fixture. The expected series is
// computed by SQL written the plain way: the buckets from generate_series over the whole days
// of the range, labelled with to_char, and for each bucket (and value) a count(*) of the
// selected records inside it; never the service's statement.

type seriesPoint struct {
	Bucket string  `json:"bucket"`
	Column *string `json:"column"`
	Value  *string `json:"value"`
	Count  int64   `json:"count"`
}

// seriesCase is one set of record_series arguments; sel gives the dates, filters and their SQL.
type seriesCase struct {
	name    string
	bucket  string
	groupBy string // "" = none
	sel     selection
	labels  []string // when set, the bucket labels the answer must have, in order (without group_by)
}

// calendar buckets: date_trunc unit, the step between buckets, the label's to_char format.
var calendar = map[string][3]string{
	"HOUR":    {"hour", "1 hour", "YYYY-MM-DD HH24:00"},
	"DAY":     {"day", "1 day", "YYYY-MM-DD"},
	"WEEK":    {"week", "1 week", "YYYY-MM-DD"},
	"MONTH":   {"month", "1 month", "YYYY-MM"},
	"QUARTER": {"quarter", "3 months", `YYYY-"Q"Q`},
	"YEAR":    {"year", "1 year", "YYYY"},
}

// cyclic buckets: the record's place as to_char gives it, and the first and last place.
var cyclic = map[string][3]string{
	"HOUR_OF_DAY":   {"HH24", "0", "23"},
	"DAY_OF_WEEK":   {"ID", "1", "7"},
	"MONTH_OF_YEAR": {"MM", "1", "12"},
}

func (e env) expectSeries(t *testing.T, c seriesCase) []seriesPoint {
	t.Helper()
	where, args := c.sel.where()
	n := len(args)
	ph := func(v any) string { args = append(args, v); n++; return fmt.Sprintf("$%d", n) }
	var buckets, inBucket, label string
	if cal, ok := calendar[c.bucket]; ok {
		unit, step, format := ph(cal[0]), ph(cal[1]), ph(cal[2])
		buckets = `SELECT b FROM generate_series(date_trunc(` + unit + `::text, $1::date::timestamp), ($2::date + 1)::timestamp - interval '1 microsecond', ` + step + `::interval) AS b`
		inBucket = `sel.occurred_at >= g.b AND sel.occurred_at < g.b + ` + step + `::interval`
		label = `to_char(g.b, ` + format + `::text)`
	} else {
		cy := cyclic[c.bucket]
		format := ph(cy[0])
		buckets = `SELECT b FROM generate_series(` + cy[1] + `, ` + cy[2] + `) AS b`
		inBucket = `to_char(sel.occurred_at, ` + format + `::text)::integer = g.b`
		label = `g.b::text`
	}
	sel := `SELECT * FROM ` + recordsView + ` WHERE ` + where
	var q string
	if c.groupBy == "" {
		q = `WITH sel AS (` + sel + `), g AS (` + buckets + `)
SELECT ` + label + `, NULL::text, NULL::text, (SELECT count(*) FROM sel WHERE ` + inBucket + `) FROM g ORDER BY g.b`
	} else {
		col := pgx.Identifier{"sel", c.groupBy}.Sanitize()
		q = `WITH sel AS (` + sel + `), g AS (` + buckets + `), v AS (SELECT DISTINCT ` + col + ` AS v FROM sel)
SELECT ` + label + `, ` + ph(c.groupBy) + `::text, v.v::text, (SELECT count(*) FROM sel WHERE ` + inBucket + ` AND ` + col + ` IS NOT DISTINCT FROM v.v)
FROM g CROSS JOIN v ORDER BY g.b, v.v ASC NULLS LAST`
	}
	return queryRows(t, e.pool, q, args, pgx.RowToStructByPos[seriesPoint])
}

const seriesQuery = `query($start: String!, $end: String!, $bucket: TimeBucket!, $groupBy: String, $useOr: Boolean, $filters: [Filter!]) {
  record_series(start_date: $start, end_date: $end, bucket: $bucket, group_by: $groupBy, use_or: $useOr, filters: $filters) { bucket column value count }
}`

func (c seriesCase) vars() map[string]any {
	v := c.sel.vars()
	delete(v, "columns")
	v["bucket"] = c.bucket
	if c.groupBy != "" {
		v["groupBy"] = c.groupBy
	}
	return v
}

func TestRecordSeriesMatchesSQL(t *testing.T) {
	e := start(t)
	yes := true
	rng := func(start, end string) selection { return selection{start: start, end: end} }
	march := rng("2024-03-01", "2024-03-31")
	filtered := selection{start: "2024-01-01", end: "2025-12-31", useOr: &yes,
		filters: []map[string]any{filterValues("degree_of_urgency", "IN", "A", "B"), filter("municipality", "CONTAINS", "sør")},
		pred:    `degree_of_urgency IN ('A', 'B') OR municipality ILIKE '%sør%'`}
	cases := []seriesCase{
		// Across the year boundary: ISO week 1 of 2025 starts on Monday 2024-12-30.
		{name: "ISO weeks across the year", bucket: "WEEK", sel: rng("2024-12-28", "2025-01-10"),
			labels: []string{"2024-12-23", "2024-12-30", "2025-01-06"}},
		{name: "ISO week starting on the range's first day", bucket: "WEEK", sel: rng("2024-12-30", "2025-01-05"),
			labels: []string{"2024-12-30"}},
		{name: "leap day", bucket: "DAY", sel: rng("2024-02-27", "2024-03-02"),
			labels: []string{"2024-02-27", "2024-02-28", "2024-02-29", "2024-03-01", "2024-03-02"}},
		{name: "leap day, hours", bucket: "HOUR", sel: rng("2024-02-29", "2024-02-29")},
		{name: "hours of two days", bucket: "HOUR", sel: rng("2024-03-01", "2024-03-02")},
		{name: "days of march, gaps filled", bucket: "DAY", sel: march},
		{name: "partial first and last months", bucket: "MONTH", sel: rng("2024-03-15", "2024-06-10"),
			labels: []string{"2024-03", "2024-04", "2024-05", "2024-06"}},
		{name: "partial quarters", bucket: "QUARTER", sel: rng("2024-02-15", "2025-01-10"),
			labels: []string{"2024-Q1", "2024-Q2", "2024-Q3", "2024-Q4", "2025-Q1"}},
		{name: "years, an empty first one", bucket: "YEAR", sel: rng("2023-06-01", "2025-06-01"), labels: []string{"2023", "2024", "2025"}},
		{name: "one day, one month bucket", bucket: "MONTH", sel: rng("2024-03-31", "2024-03-31"), labels: []string{"2024-03"}},
		{name: "nothing in range", bucket: "WEEK", sel: rng("2030-01-01", "2030-01-31")},
		{name: "hours of the day", bucket: "HOUR_OF_DAY", sel: rng("2024-01-01", "2025-12-31")},
		{name: "days of the week", bucket: "DAY_OF_WEEK", sel: rng("2024-01-01", "2025-12-31")},
		{name: "months of the year", bucket: "MONTH_OF_YEAR", sel: rng("2024-01-01", "2025-12-31")},
		{name: "cyclic with nothing in range", bucket: "DAY_OF_WEEK", sel: rng("2030-01-01", "2030-01-31")},
		{name: "filters with use_or", bucket: "MONTH", sel: filtered},
		{name: "filters with use_or, cyclic", bucket: "HOUR_OF_DAY", sel: filtered},

		{name: "group_by station (NULL included)", bucket: "DAY", groupBy: "station", sel: march},
		{name: "group_by urgency across the year", bucket: "WEEK", groupBy: "degree_of_urgency", sel: rng("2024-12-28", "2025-01-10")},
		{name: "group_by boolean", bucket: "MONTH", groupBy: "transported", sel: rng("2024-01-01", "2025-12-31")},
		{name: "group_by numeric, by number", bucket: "QUARTER", groupBy: "distance", sel: rng("2024-01-01", "2025-12-31")},
		{name: "group_by joined column", bucket: "DAY_OF_WEEK", groupBy: "callsign", sel: march},
		{name: "group_by joined integer", bucket: "MONTH_OF_YEAR", groupBy: "age", sel: rng("2024-01-01", "2025-12-31")},
		{name: "group_by timestamp", bucket: "YEAR", groupBy: "occurred_at", sel: rng("2024-12-01", "2025-01-31")},
		{name: "group_by with filters", bucket: "MONTH", groupBy: "gender", sel: filtered},
		{name: "group_by, nothing in range", bucket: "DAY", groupBy: "station", sel: rng("2030-01-01", "2030-01-31")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := e.expectSeries(t, c)
			if c.labels != nil {
				var labels []string
				for _, p := range want {
					labels = append(labels, p.Bucket)
				}
				if !reflect.DeepEqual(labels, c.labels) {
					t.Fatalf("test check: SQL buckets %v, want %v", labels, c.labels)
				}
			}
			resp := e.svc.GraphQL(t, "/graphql", seriesQuery, c.vars())
			var d struct {
				RecordSeries []seriesPoint `json:"record_series"`
			}
			resp.DataInto(t, &d)
			if d.RecordSeries == nil {
				t.Fatalf("record_series is null: %s", resp.Raw)
			}
			if diff := diff(d.RecordSeries, want); diff != "" {
				t.Errorf("record_series: %s", diff)
			}
		})
	}
}

// The gaps are really filled: a range with one record has every other bucket at 0, and the
// records inside the range all count once.
func TestRecordSeriesCountsEveryRecordOnce(t *testing.T) {
	e := start(t)
	for _, bucket := range []string{"HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR", "HOUR_OF_DAY", "DAY_OF_WEEK", "MONTH_OF_YEAR"} {
		for _, groupBy := range []string{"", "municipality"} {
			t.Run(bucket+"/"+groupBy, func(t *testing.T) {
				c := seriesCase{bucket: bucket, groupBy: groupBy, sel: selection{start: "2024-02-01", end: "2024-04-30"}}
				resp := e.svc.GraphQL(t, "/graphql", seriesQuery, c.vars())
				var d struct {
					RecordSeries []seriesPoint `json:"record_series"`
				}
				resp.DataInto(t, &d)
				var total int64
				zeros := 0
				for _, p := range d.RecordSeries {
					total += p.Count
					if p.Count == 0 {
						zeros++
					}
				}
				var inRange int64
				where, args := c.sel.where()
				if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+recordsView+` WHERE `+where, args...).Scan(&inRange); err != nil {
					t.Fatal(err)
				}
				if total != inRange || (int64(len(d.RecordSeries)) > inRange && zeros == 0) {
					t.Errorf("counts add up to %d, %d records are in range; %d zero points", total, inRange, zeros)
				}
			})
		}
	}
}

// LIMITS__MAX_SERIES_POINTS: a bucket count above it is refused before the query runs; with
// group_by, the buckets times the values; exactly the limit is answered.
func TestRecordSeriesPointsLimit(t *testing.T) {
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{"LIMITS__MAX_SERIES_POINTS": "100"})
	pool := db.Pool(t)
	var stations int64 // values of station in march, NULL included
	if err := pool.QueryRow(t.Context(), `SELECT count(DISTINCT coalesce(station, '<null>')) FROM fact_record
WHERE occurred_at::date BETWEEN '2024-03-01' AND '2024-03-31'`).Scan(&stations); err != nil {
		t.Fatal(err)
	}
	if stations*31 <= 100 || stations*16 > 100 || stations*24 <= 100 {
		t.Fatalf("fixture check: %d stations in march", stations)
	}
	for _, tc := range []struct {
		name, start, end, bucket, groupBy string
		want                              []string // empty: answered, with points
		points                            int
	}{
		{name: "hours of five days", start: "2024-03-01", end: "2024-03-05", bucket: "HOUR", want: []string{"120 points", "LIMITS__MAX_SERIES_POINTS=100"}},
		{name: "101 days", start: "2024-01-01", end: "2024-04-10", bucket: "DAY", want: []string{"101 points", "LIMITS__MAX_SERIES_POINTS=100"}},
		{name: "100 days", start: "2024-01-01", end: "2024-04-09", bucket: "DAY", points: 100},
		{name: "all years", start: "0001-01-01", end: "9999-12-31", bucket: "HOUR", want: []string{"LIMITS__MAX_SERIES_POINTS=100"}},
		{name: "101 days, grouped", start: "2024-01-01", end: "2024-04-10", bucket: "DAY", groupBy: "station", want: []string{"101 points", "LIMITS__MAX_SERIES_POINTS=100"}},
		{name: "days of march times the stations", start: "2024-03-01", end: "2024-03-31", bucket: "DAY", groupBy: "station",
			want: []string{fmt.Sprintf("%d points", stations*31), fmt.Sprintf("%d values of station", stations), "LIMITS__MAX_SERIES_POINTS=100"}},
		{name: "16 days of march times the stations", start: "2024-03-01", end: "2024-03-16", bucket: "DAY", groupBy: "station", points: int(stations * 16)},
		{name: "12 months of the year, grouped", start: "2024-03-01", end: "2024-03-31", bucket: "MONTH_OF_YEAR", groupBy: "station", points: int(stations * 12)},
		{name: "24 hours of the day, grouped", start: "2024-03-01", end: "2024-03-31", bucket: "HOUR_OF_DAY", groupBy: "station",
			want: []string{fmt.Sprintf("%d points", stations*24), "LIMITS__MAX_SERIES_POINTS=100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]any{"start": tc.start, "end": tc.end, "bucket": tc.bucket}
			if tc.groupBy != "" {
				vars["groupBy"] = tc.groupBy
			}
			resp := svc.GraphQL(t, "/graphql", seriesQuery, vars)
			if len(tc.want) == 0 {
				var d struct {
					RecordSeries []seriesPoint `json:"record_series"`
				}
				resp.DataInto(t, &d)
				if len(d.RecordSeries) != tc.points {
					t.Errorf("%d points, want %d", len(d.RecordSeries), tc.points)
				}
				return
			}
			if len(resp.Errors) != 1 || resp.Errors[0].Code() != "BAD_USER_INPUT" {
				t.Fatalf("want one BAD_USER_INPUT: %s", resp.Raw)
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.Errors[0].Message, w) {
					t.Errorf("message %q does not name %q", resp.Errors[0].Message, w)
				}
			}
		})
	}
}

func TestRecordSeriesBadInput(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		name string
		vars map[string]any
		want []string
	}{
		{"unknown group_by", map[string]any{"start": "2024-03-01", "end": "2024-03-31", "bucket": "DAY", "groupBy": "nope"}, []string{"group_by", `"nope"`, "station, station_id"}},
		{"injection in group_by", map[string]any{"start": "2024-03-01", "end": "2024-03-31", "bucket": "DAY", "groupBy": `station"; DROP TABLE fact_record; --`}, []string{"group_by"}},
		{"bad date", map[string]any{"start": "2024-02-30", "end": "2024-03-31", "bucket": "DAY"}, []string{"start_date", `"2024-02-30"`}},
		{"start after end", map[string]any{"start": "2024-04-01", "end": "2024-03-31", "bucket": "DAY"}, []string{"start_date", "end_date"}},
		{"unknown filter column", map[string]any{"start": "2024-03-01", "end": "2024-03-31", "bucket": "DAY", "filters": []any{filter("nope", "EQUALS", "1")}}, []string{"filters[0].column"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := e.svc.GraphQL(t, "/graphql", seriesQuery, tc.vars)
			if len(resp.Errors) != 1 || resp.Errors[0].Code() != "BAD_USER_INPUT" {
				t.Fatalf("want one BAD_USER_INPUT: %s", resp.Raw)
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.Errors[0].Message, w) {
					t.Errorf("message %q does not name %q", resp.Errors[0].Message, w)
				}
			}
		})
	}
	resp := e.svc.GraphQL(t, "/graphql", `{ record_series(start_date: "2024-03-01", end_date: "2024-03-31", bucket: FORTNIGHT) { count } }`, nil)
	if len(resp.Errors) == 0 || !strings.Contains(resp.Errors[0].Message, "FORTNIGHT") || resp.Errors[0].Code() == "INTERNAL" {
		t.Errorf("unknown bucket: %s", resp.Raw)
	}
}
