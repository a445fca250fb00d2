package stats_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// record_stats (contract section 6.3) over HTTP on the edge fixture, against SQL computed here:
// one query per percentile with percentile_cont(p), the counts with FILTER, grouped the plain
// way, labels with to_char.

type groupValue struct {
	Column string  `json:"column"`
	Value  *string `json:"value"`
}

type percentile struct {
	P     float64  `json:"p"`
	Value *float64 `json:"value"`
}

type measureStats struct {
	Bucket            *string      `json:"bucket"`
	Group             []groupValue `json:"group"`
	Count             int64        `json:"count"`
	Measured          int64        `json:"measured"`
	Min               *float64     `json:"min"`
	Max               *float64     `json:"max"`
	Avg               *float64     `json:"avg"`
	Percentiles       []percentile `json:"percentiles"`
	WithinTarget      *int64       `json:"within_target"`
	WithinTargetShare *float64     `json:"within_target_share"`
}

type statsCase struct {
	name        string
	measure     string
	groupBy     []string
	bucket      string // "" = none
	percentiles []float64
	target      *float64
	sel         selection
	wantRows    int // -1: any; otherwise the number of objects SQL must give (guards the case)
}

func (c statsCase) vars() map[string]any {
	v := c.sel.vars()
	delete(v, "columns")
	v["measure"] = c.measure
	if c.groupBy != nil {
		v["groupBy"] = c.groupBy
	}
	if c.bucket != "" {
		v["bucket"] = c.bucket
	}
	if c.percentiles != nil {
		v["percentiles"] = c.percentiles
	}
	if c.target != nil {
		v["target"] = *c.target
	}
	return v
}

const statsQuery = `query($start: String!, $end: String!, $measure: String!, $groupBy: [String!], $bucket: TimeBucket,
    $percentiles: [Float!], $target: Float, $useOr: Boolean, $filters: [Filter!]) {
  record_stats(start_date: $start, end_date: $end, measure: $measure, group_by: $groupBy, bucket: $bucket,
      percentiles: $percentiles, target: $target, use_or: $useOr, filters: $filters) {
    bucket group { column value } count measured min max avg percentiles { p value } within_target within_target_share
  }
}`

func (e env) expectStats(t *testing.T, c statsCase) []measureStats {
	t.Helper()
	where, args := c.sel.where()
	ph := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	m := pgx.Identifier{"sel", c.measure}.Sanitize()
	var keys, sel []string
	if c.bucket != "" {
		if cal, ok := calendar[c.bucket]; ok {
			k := `date_trunc(` + ph(cal[0]) + `::text, sel.occurred_at)`
			keys = append(keys, k)
			sel = append(sel, `to_char(`+k+`, `+ph(cal[2])+`::text)`)
		} else {
			k := `to_char(sel.occurred_at, ` + ph(cyclic[c.bucket][0]) + `::text)::integer`
			keys = append(keys, k)
			sel = append(sel, k+`::text`)
		}
	} else {
		sel = append(sel, `NULL::text`)
	}
	seen := map[string]bool{}
	var groups []string
	for _, g := range c.groupBy {
		if !seen[g] {
			seen[g] = true
			groups = append(groups, g)
			id := pgx.Identifier{"sel", g}.Sanitize()
			keys = append(keys, id)
			sel = append(sel, id+`::text`)
		}
	}
	ps := c.percentiles
	if ps == nil {
		ps = []float64{0.5, 0.9}
	}
	sel = append(sel, `count(*)`, `count(`+m+`)`, `min(`+m+`)::float8`, `max(`+m+`)::float8`, `avg(`+m+`)::float8`)
	for _, p := range ps {
		sel = append(sel, `percentile_cont(`+ph(p)+`::float8) WITHIN GROUP (ORDER BY `+m+`)`)
	}
	target := `NULL::bigint`
	if c.target != nil {
		target = `count(*) FILTER (WHERE ` + m + ` <= ` + ph(*c.target) + `::float8)`
	}
	sel = append(sel, target)
	q := `SELECT ` + strings.Join(sel, ", ") + ` FROM (SELECT * FROM ` + recordsView + ` WHERE ` + where + `) AS sel`
	if len(keys) > 0 {
		order := make([]string, len(keys))
		for i, k := range keys {
			order[i] = k + ` ASC NULLS LAST`
		}
		q += ` GROUP BY ` + strings.Join(keys, ", ") + ` ORDER BY ` + strings.Join(order, ", ")
	}
	return queryRows(t, e.pool, q, args, func(row pgx.CollectableRow) (measureStats, error) {
		var (
			s      measureStats
			vals   = make([]*string, len(groups))
			pcts   = make([]*float64, len(ps))
			within *int64
		)
		dest := []any{&s.Bucket}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		dest = append(dest, &s.Count, &s.Measured, &s.Min, &s.Max, &s.Avg)
		for i := range pcts {
			dest = append(dest, &pcts[i])
		}
		dest = append(dest, &within)
		if err := row.Scan(dest...); err != nil {
			return s, err
		}
		s.Group = []groupValue{}
		for i, g := range groups {
			s.Group = append(s.Group, groupValue{Column: g, Value: vals[i]})
		}
		for i, p := range ps {
			s.Percentiles = append(s.Percentiles, percentile{P: p, Value: pcts[i]})
		}
		if s.Percentiles == nil {
			s.Percentiles = []percentile{}
		}
		if c.target != nil {
			s.WithinTarget = within
			if s.Measured > 0 {
				share := float64(*within) / float64(s.Measured)
				s.WithinTargetShare = &share
			}
		}
		return s, nil
	})
}

// near reports whether a and b are equal to 1e-9 relative (both nil, or both numbers).
func near(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b || math.Abs(*a-*b) <= 1e-9*math.Max(math.Abs(*a), math.Abs(*b))
}

// sameStats compares a service answer with the SQL one, floats to 1e-9 relative.
func sameStats(got, want measureStats) bool {
	if show(got.Bucket) != show(want.Bucket) || show(got.Group) != show(want.Group) || got.Count != want.Count ||
		got.Measured != want.Measured || show(got.WithinTarget) != show(want.WithinTarget) ||
		!near(got.Min, want.Min) || !near(got.Max, want.Max) || !near(got.Avg, want.Avg) ||
		!near(got.WithinTargetShare, want.WithinTargetShare) || len(got.Percentiles) != len(want.Percentiles) {
		return false
	}
	for i := range got.Percentiles {
		if got.Percentiles[i].P != want.Percentiles[i].P || !near(got.Percentiles[i].Value, want.Percentiles[i].Value) {
			return false
		}
	}
	return true
}

func TestRecordStatsMatchesSQL(t *testing.T) {
	e := start(t)
	yes := true
	f := func(v float64) *float64 { return &v }
	year := selection{start: "2024-01-01", end: "2025-12-31"}
	march := selection{start: "2024-03-01", end: "2024-03-31"}
	nothing := selection{start: "2030-01-01", end: "2030-12-31"}
	filtered := selection{start: "2024-01-01", end: "2025-12-31", useOr: &yes,
		filters: []map[string]any{filterValues("degree_of_urgency", "NOT_IN", "C", "D"), filterOp("municipality", "IS_NULL")},
		pred:    `degree_of_urgency NOT IN ('C', 'D') OR municipality IS NULL`}
	cases := []statsCase{
		{name: "one object, default percentiles", measure: "response_time_s", sel: year, wantRows: 1},
		{name: "one object when nothing matches", measure: "response_time_s", sel: nothing, target: f(720), wantRows: 1},
		{name: "numeric measure, many percentiles", measure: "distance", sel: year, percentiles: []float64{0, 0.1, 0.25, 1.0 / 3, 0.5, 0.75, 0.9, 0.95, 0.99, 1}, wantRows: 1},
		{name: "joined measure", measure: "age", groupBy: []string{"gender"}, sel: year, wantRows: -1},
		{name: "no percentiles", measure: "response_time_s", sel: march, percentiles: []float64{}, wantRows: 1},
		{name: "repeated percentiles in the order given", measure: "response_time_s", sel: march, percentiles: []float64{0.9, 0.1, 0.9}, wantRows: 1},
		{name: "target: below, at and above 720 s", measure: "response_time_s", groupBy: []string{"degree_of_urgency"}, sel: year, target: f(720), wantRows: -1},
		{name: "fractional target on a numeric measure", measure: "distance", groupBy: []string{"station"}, sel: year, target: f(9.5), wantRows: -1},
		{name: "group_by with NULL, ordered", measure: "response_time_s", groupBy: []string{"station"}, sel: year, percentiles: []float64{0.9}, wantRows: -1},
		{name: "two group_by columns", measure: "distance", groupBy: []string{"transported", "degree_of_urgency"}, sel: year, wantRows: -1},
		{name: "group_by named twice", measure: "distance", groupBy: []string{"municipality", "municipality"}, sel: year, wantRows: -1},
		{name: "group_by a number, by number", measure: "response_time_s", groupBy: []string{"distance"}, sel: year, wantRows: -1},
		{name: "bucket month and station", measure: "response_time_s", groupBy: []string{"station"}, bucket: "MONTH", sel: year, percentiles: []float64{0.5, 0.9}, target: f(720), wantRows: -1},
		{name: "bucket week across the year boundary", measure: "response_time_s", bucket: "WEEK", sel: selection{start: "2024-12-28", end: "2025-01-10"}, wantRows: 2},
		{name: "bucket day, leap day", measure: "distance", bucket: "DAY", sel: selection{start: "2024-02-28", end: "2024-03-01"}, wantRows: 2},
		{name: "bucket hour of day", measure: "distance", bucket: "HOUR_OF_DAY", groupBy: []string{"transported"}, sel: year, wantRows: -1},
		{name: "bucket day of week", measure: "age", bucket: "DAY_OF_WEEK", sel: year, wantRows: -1},
		{name: "bucket quarter", measure: "station_id", bucket: "QUARTER", sel: year, wantRows: -1},
		{name: "bucket without records", measure: "distance", bucket: "MONTH", sel: nothing, wantRows: 0},
		{name: "group whose measures are all NULL", measure: "distance", groupBy: []string{"station"}, sel: selection{start: "2025-01-06", end: "2025-01-06"}, target: f(1), wantRows: 1},
		{name: "NULL measures among others", measure: "response_time_s", groupBy: []string{"callsign"}, sel: year, target: f(600), wantRows: -1},
		{name: "filters with use_or", measure: "response_time_s", groupBy: []string{"municipality"}, bucket: "YEAR", sel: filtered, target: f(720), wantRows: -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := e.expectStats(t, c)
			if c.wantRows >= 0 && len(want) != c.wantRows {
				t.Fatalf("test check: SQL gives %d objects, want %d", len(want), c.wantRows)
			}
			resp := e.svc.GraphQL(t, "/graphql", statsQuery, c.vars())
			var d struct {
				RecordStats []measureStats `json:"record_stats"`
			}
			resp.DataInto(t, &d)
			if d.RecordStats == nil {
				t.Fatalf("record_stats is null: %s", resp.Raw)
			}
			if len(d.RecordStats) != len(want) {
				t.Fatalf("%d objects, want %d\n got %s\nwant %s", len(d.RecordStats), len(want), show(d.RecordStats), show(want))
			}
			for i := range want {
				if !sameStats(d.RecordStats[i], want[i]) {
					t.Errorf("object %d\n got %s\nwant %s", i, show(d.RecordStats[i]), show(want[i]))
				}
			}
		})
	}
}

// The fixture's checks that the cases above mean something: NULL measures, a group with no
// measured value, response times below, at and above the target.
func TestRecordStatsFixture(t *testing.T) {
	e := start(t)
	var nullMeasures, at, below, above int64
	err := e.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE response_time_s IS NULL),
  count(*) FILTER (WHERE response_time_s = 720), count(*) FILTER (WHERE response_time_s = 719), count(*) FILTER (WHERE response_time_s = 721)
FROM fact_record`).Scan(&nullMeasures, &at, &below, &above)
	if err != nil {
		t.Fatal(err)
	}
	if nullMeasures == 0 || at == 0 || below == 0 || above == 0 {
		t.Errorf("fixture lacks NULL response times (%d) or times at (%d), just below (%d), just above (%d) 720 s", nullMeasures, at, below, above)
	}
	// Selecting fewer fields gives the same values for those.
	c := statsCase{measure: "response_time_s", groupBy: []string{"station"}, bucket: "MONTH", sel: selection{start: "2024-01-01", end: "2025-12-31"}}
	want := e.expectStats(t, c)
	resp := e.svc.GraphQL(t, "/graphql", `{ record_stats(start_date: "2024-01-01", end_date: "2025-12-31", measure: "response_time_s",
  group_by: ["station"], bucket: MONTH) { bucket group { value } percentiles { value } } }`, nil)
	var d struct {
		RecordStats []measureStats `json:"record_stats"`
	}
	resp.DataInto(t, &d)
	if len(d.RecordStats) != len(want) || len(want) < 3 {
		t.Fatalf("%d objects, want %d", len(d.RecordStats), len(want))
	}
	for i, w := range want {
		g := d.RecordStats[i]
		if show(g.Bucket) != show(w.Bucket) || show(g.Group[0].Value) != show(w.Group[0].Value) ||
			!near(g.Percentiles[0].Value, w.Percentiles[0].Value) || !near(g.Percentiles[1].Value, w.Percentiles[1].Value) {
			t.Errorf("object %d: got %s, want %s", i, show(g), show(w))
		}
	}
}

func TestRecordStatsBadInput(t *testing.T) {
	svc := servicetest.Start(t, servicetest.FixtureDB(t), map[string]string{"LIMITS__MAX_COLUMNS": "3"})
	base := func() map[string]any {
		return map[string]any{"start": "2024-03-01", "end": "2024-03-31", "measure": "response_time_s"}
	}
	with := func(k string, v any) map[string]any { m := base(); m[k] = v; return m }
	numeric := "station_id, distance, response_time_s, resource_id, age"
	cases := []struct {
		name string
		vars map[string]any
		want []string
	}{
		{"text measure", with("measure", "station"), []string{"measure", "station", "text", numeric}},
		{"timestamp measure", with("measure", "occurred_at"), []string{"measure", "occurred_at", numeric}},
		{"boolean measure", with("measure", "transported"), []string{"measure", "transported", numeric}},
		{"unknown measure", with("measure", "speed"), []string{"measure", `"speed"`}},
		{"unknown group_by", with("groupBy", []string{"station", "nope"}), []string{"group_by[1]", `"nope"`}},
		{"too many group_by", with("groupBy", []string{"station", "age", "gender", "callsign"}), []string{"group_by", "4 columns", "LIMITS__MAX_COLUMNS=3"}},
		{"percentile above 1", with("percentiles", []float64{0.5, 1.5}), []string{"percentiles[1]", "1.5"}},
		{"negative percentile", with("percentiles", []float64{-0.1}), []string{"percentiles[0]", "-0.1"}},
		{"eleven percentiles", with("percentiles", []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}), []string{"percentiles", "11", "10"}},
		{"bad date", with("end", "2024-13-01"), []string{"end_date", `"2024-13-01"`}},
		{"bad filter", with("filters", []any{filter("age", "GREATER_THAN", "old")}), []string{"filters[0]", "age", `"old"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := svc.GraphQL(t, "/graphql", statsQuery, c.vars)
			if len(resp.Errors) != 1 || resp.Errors[0].Code() != "BAD_USER_INPUT" {
				t.Fatalf("want one BAD_USER_INPUT: %s", resp.Raw)
			}
			for _, w := range c.want {
				if !strings.Contains(resp.Errors[0].Message, w) {
					t.Errorf("message %q does not name %q", resp.Errors[0].Message, w)
				}
			}
		})
	}
}
