package stats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Outside-in tests: the real service binary over HTTP, on a fresh database holding the edge-case
// fixture. Every expected answer is computed here with plain SQL, written the simple way (one
// query per column, occurred_at::date BETWEEN, ORDER BY the typed value), never copied.

type env struct {
	svc  *servicetest.Service
	pool *pgxpool.Pool
}

func start(t *testing.T) env {
	t.Helper()
	db := servicetest.FixtureDB(t)
	return env{svc: servicetest.Start(t, db, nil), pool: db.Pool(t)}
}

// recordsView is every record with the attributes its keys reach, under the queryable names.
const recordsView = `(SELECT f.*, res.callsign, res.resource_id, pat.gender, pat.age
  FROM fact_record f
  LEFT JOIN dim_resource res ON res.sk_resource = f.sk_resource
  LEFT JOIN dim_patient pat ON pat.sk_patient = f.sk_patient) AS rec`

// allColumns is contract section 2's list, in a mixed order so that one request mixes types.
var allColumns = []string{"occurred_at", "distance", "transported", "station", "age", "gender", "callsign",
	"resource_id", "station_id", "degree_of_urgency", "response_time_s", "municipality"}

type distinctValue struct {
	Column string  `json:"column"`
	Value  *string `json:"value"`
}

type uniqueCount struct {
	Column string  `json:"column"`
	Count  int64   `json:"count"`
	Value  *string `json:"value"`
}

func filter(column, operator, value string) map[string]any {
	return map[string]any{"column": column, "operator": operator, "value": value}
}

// selection is one set of arguments for distinct_values and unique_counts, and the SQL
// condition (over rec, parameters from $3 on) that the filters mean.
type selection struct {
	name       string
	columns    []string
	start, end string
	useOr      *bool // nil: argument omitted
	filters    []map[string]any
	pred       string // SQL over rec's columns; empty: true
	predArgs   []any
	empty      bool // the expected answer is empty (guards against vacuous cases)
}

func (s selection) vars() map[string]any {
	v := map[string]any{"columns": s.columns, "start": s.start, "end": s.end}
	if s.useOr != nil {
		v["useOr"] = *s.useOr
	}
	if s.filters != nil {
		v["filters"] = s.filters
	}
	return v
}

func (s selection) uniqueColumns() []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range s.columns {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

func (s selection) where() (string, []any) {
	pred := s.pred
	if pred == "" {
		pred = "true"
	}
	return "occurred_at::date BETWEEN $1::date AND $2::date AND (" + pred + ")", append([]any{s.start, s.end}, s.predArgs...)
}

func queryRows[T any](t *testing.T, pool *pgxpool.Pool, q string, args []any, scan pgx.RowToFunc[T]) []T {
	t.Helper()
	rows, err := pool.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	return out
}

func (e env) expectDistinct(t *testing.T, s selection) []distinctValue {
	t.Helper()
	out := []distinctValue{}
	where, args := s.where()
	for _, c := range s.uniqueColumns() {
		// Qualified, so that ORDER BY sorts the typed column, not the text output of the same name.
		id := pgx.Identifier{"rec", c}.Sanitize()
		q := fmt.Sprintf(`SELECT %[1]s::text AS v FROM %[2]s WHERE %[3]s GROUP BY %[1]s ORDER BY %[1]s ASC NULLS LAST`, id, recordsView, where)
		for _, v := range queryRows(t, e.pool, q, args, pgx.RowTo[*string]) {
			out = append(out, distinctValue{Column: c, Value: v})
		}
	}
	return out
}

func (e env) expectUnique(t *testing.T, s selection) []uniqueCount {
	t.Helper()
	out := []uniqueCount{}
	where, args := s.where()
	for _, c := range s.uniqueColumns() {
		id := pgx.Identifier{"rec", c}.Sanitize()
		q := fmt.Sprintf(`SELECT count(*) AS n, %[1]s::text AS v FROM %[2]s WHERE %[3]s GROUP BY %[1]s ORDER BY count(*) DESC, %[1]s ASC NULLS LAST`, id, recordsView, where)
		for _, r := range queryRows(t, e.pool, q, args, pgx.RowToStructByPos[struct {
			N int64
			V *string
		}]) {
			out = append(out, uniqueCount{Column: c, Count: r.N, Value: r.V})
		}
	}
	return out
}

const bothQuery = `query Stats($columns: [String!]!, $start: String!, $end: String!, $useOr: Boolean, $filters: [Filter!]) {
  distinct_values(columns: $columns, start_date: $start, end_date: $end, use_or: $useOr, filters: $filters) { column value }
  unique_counts(columns: $columns, start_date: $start, end_date: $end, use_or: $useOr, filters: $filters) { column count value }
}`

type bothData struct {
	DistinctValues []distinctValue `json:"distinct_values"`
	UniqueCounts   []uniqueCount   `json:"unique_counts"`
}

func (e env) ask(t *testing.T, query string, vars map[string]any) bothData {
	t.Helper()
	resp := e.svc.GraphQL(t, "/graphql", query, vars)
	if resp.Status != 200 {
		t.Fatalf("status %d: %s", resp.Status, resp.Raw)
	}
	var d bothData
	resp.DataInto(t, &d)
	// An empty answer is an empty list, never null.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(resp.Data, &raw); err != nil {
		t.Fatal(err)
	}
	for k, v := range raw {
		if string(v) == "null" {
			t.Errorf("%s is null without an error: %s", k, resp.Raw)
		}
	}
	return d
}

func show(v any) string { b, _ := json.Marshal(v); return string(b) }

// diff describes how got and want differ: lengths and the first differing entries.
func diff[T any](got, want []T) string {
	if reflect.DeepEqual(got, want) {
		return ""
	}
	i := 0
	for i < len(got) && i < len(want) && reflect.DeepEqual(got[i], want[i]) {
		i++
	}
	end := func(s []T) []T { return s[i:min(len(s), i+3)] }
	return fmt.Sprintf("%d entries, want %d; from entry %d\n got %s\nwant %s", len(got), len(want), i, show(end(got)), show(end(want)))
}

func TestDistinctValuesAndUniqueCountsMatchSQL(t *testing.T) {
	e := start(t)
	yes, no := true, false
	const m1, m31 = "2024-03-01", "2024-03-31"
	cases := []selection{
		{name: "range only, every column", columns: allColumns, start: m1, end: m31},
		{name: "wider range, every column", columns: allColumns, start: "2024-01-01", end: "2025-12-31", useOr: &no},
		{name: "whole history", columns: allColumns, start: "0001-01-01", end: "9999-12-31"},
		{name: "one day, first second in", columns: []string{"occurred_at", "station"}, start: m1, end: m1},
		{name: "one day, last second in", columns: []string{"occurred_at", "station"}, start: m31, end: m31},
		{name: "day before the range", columns: []string{"occurred_at"}, start: "2024-02-29", end: "2024-02-29"},
		{name: "no record in range", columns: []string{"station", "distance"}, start: "2030-01-01", end: "2030-12-31", empty: true},
		{name: "repeated column", columns: []string{"station", "distance", "station", "distance"}, start: m1, end: m31},
		{name: "two columns", columns: []string{"degree_of_urgency", "municipality"}, start: m1, end: m31},

		{name: "text EQUALS", columns: []string{"distance", "station"}, start: m1, end: m31,
			filters: []map[string]any{filter("station", "EQUALS", "Central")}, pred: `station = 'Central'`},
		{name: "text EQUALS with quotes and non-ASCII", columns: []string{"station", "occurred_at"}, start: "2024-01-01", end: "2024-12-31",
			filters: []map[string]any{filter("station", "EQUALS", `Ålesund Sør, "Kai" 1's`)}, pred: `station = $3`, predArgs: []any{`Ålesund Sør, "Kai" 1's`}},
		{name: "text EQUALS with a newline", columns: []string{"callsign"}, start: m1, end: m31,
			filters: []map[string]any{filter("station", "EQUALS", "Fjord\nside")}, pred: `station = $3`, predArgs: []any{"Fjord\nside"}},
		{name: "text EQUALS is case-sensitive", columns: []string{"station"}, start: m1, end: m31,
			filters: []map[string]any{filter("station", "EQUALS", "central")}, empty: true, pred: `station = 'central'`},
		{name: "injection attempt in a text value is just a value", columns: []string{"station"}, start: m1, end: m31,
			filters: []map[string]any{filter("station", "EQUALS", "' OR 1=1 --")}, empty: true, pred: `station = $3`, predArgs: []any{"' OR 1=1 --"}},
		{name: "text GREATER_THAN by collation", columns: []string{"degree_of_urgency"}, start: m1, end: m31,
			filters: []map[string]any{filter("degree_of_urgency", "GREATER_THAN", "C")}, pred: `degree_of_urgency > 'C'`},
		{name: "text LESS_THAN by collation", columns: []string{"municipality", "station"}, start: m1, end: m31,
			filters: []map[string]any{filter("municipality", "LESS_THAN", "Oslo")}, pred: `municipality < 'Oslo'`},

		{name: "numeric GREATER_THAN 9.5", columns: []string{"distance", "station"}, start: m1, end: m31,
			filters: []map[string]any{filter("distance", "GREATER_THAN", "9.5")}, pred: `distance > 9.5`},
		{name: "numeric GREATER_THAN 10 (not text order)", columns: []string{"distance"}, start: m1, end: m31,
			filters: []map[string]any{filter("distance", "GREATER_THAN", "10")}, pred: `distance > 10`},
		{name: "numeric LESS_THAN 10 (not text order)", columns: []string{"distance"}, start: m1, end: m31,
			filters: []map[string]any{filter("distance", "LESS_THAN", "10")}, pred: `distance < 10`},
		{name: "numeric GREATER_THAN_OR_EQUAL 9.50", columns: []string{"distance", "occurred_at"}, start: m1, end: m31,
			filters: []map[string]any{filter("distance", "GREATER_THAN_OR_EQUAL", "9.50")}, pred: `distance >= 9.5`},
		{name: "numeric LESS_THAN_OR_EQUAL 10.25", columns: []string{"distance"}, start: m1, end: m31,
			filters: []map[string]any{filter("distance", "LESS_THAN_OR_EQUAL", "10.25")}, pred: `distance <= 10.25`},
		{name: "numeric EQUALS 100", columns: []string{"distance", "callsign"}, start: m1, end: m31,
			filters: []map[string]any{filter("distance", "EQUALS", "100")}, pred: `distance = 100`},
		{name: "integer GREATER_THAN_OR_EQUAL", columns: []string{"response_time_s"}, start: m1, end: m31,
			filters: []map[string]any{filter("response_time_s", "GREATER_THAN_OR_EQUAL", "600")}, pred: `response_time_s >= 600`},
		{name: "integer LESS_THAN", columns: []string{"station_id", "station"}, start: m1, end: m31,
			filters: []map[string]any{filter("station_id", "LESS_THAN", "3")}, pred: `station_id < 3`},
		{name: "integer LESS_THAN_OR_EQUAL", columns: []string{"response_time_s"}, start: m1, end: m31,
			filters: []map[string]any{filter("response_time_s", "LESS_THAN_OR_EQUAL", "480")}, pred: `response_time_s <= 480`},

		{name: "boolean EQUALS true", columns: []string{"transported", "station"}, start: m1, end: m31,
			filters: []map[string]any{filter("transported", "EQUALS", "true")}, pred: `transported = true`},
		{name: "boolean EQUALS FALSE", columns: []string{"transported", "municipality"}, start: m1, end: m31,
			filters: []map[string]any{filter("transported", "EQUALS", "FALSE")}, pred: `transported = false`},
		{name: "boolean GREATER_THAN false", columns: []string{"transported"}, start: m1, end: m31,
			filters: []map[string]any{filter("transported", "GREATER_THAN", "false")}, pred: `transported > false`},

		{name: "timestamp GREATER_THAN_OR_EQUAL a date", columns: []string{"occurred_at"}, start: "2024-02-01", end: "2024-04-30",
			filters: []map[string]any{filter("occurred_at", "GREATER_THAN_OR_EQUAL", "2024-03-01")}, pred: `occurred_at >= '2024-03-01'`},
		{name: "timestamp LESS_THAN_OR_EQUAL the last second", columns: []string{"occurred_at"}, start: "2024-02-01", end: "2024-04-30",
			filters: []map[string]any{filter("occurred_at", "LESS_THAN_OR_EQUAL", "2024-03-31 23:59:59")}, pred: `occurred_at <= '2024-03-31 23:59:59'`},
		{name: "timestamp EQUALS midnight", columns: []string{"occurred_at", "distance"}, start: "2024-02-01", end: "2024-04-30",
			filters: []map[string]any{filter("occurred_at", "EQUALS", "2024-03-01 00:00:00")}, pred: `occurred_at = '2024-03-01 00:00:00'`},
		{name: "timestamp LESS_THAN with T", columns: []string{"occurred_at"}, start: "2024-02-01", end: "2024-04-30",
			filters: []map[string]any{filter("occurred_at", "LESS_THAN", "2024-03-01T00:00:01")}, pred: `occurred_at < '2024-03-01 00:00:01'`},
		{name: "timestamp GREATER_THAN the second before the end", columns: []string{"occurred_at"}, start: "2024-02-01", end: "2024-04-30",
			filters: []map[string]any{filter("occurred_at", "GREATER_THAN", "2024-03-31 23:59:58")}, pred: `occurred_at > '2024-03-31 23:59:58'`},

		{name: "AND", columns: []string{"station", "distance"}, start: m1, end: m31, useOr: &no,
			filters: []map[string]any{filter("station", "EQUALS", "North Harbour"), filter("distance", "GREATER_THAN_OR_EQUAL", "10")},
			pred:    `station = 'North Harbour' AND distance >= 10`},
		{name: "AND by default", columns: []string{"station", "distance"}, start: m1, end: m31,
			filters: []map[string]any{filter("station", "EQUALS", "Central"), filter("transported", "EQUALS", "false")},
			pred:    `station = 'Central' AND transported = false`},
		{name: "OR", columns: []string{"station", "distance"}, start: m1, end: m31, useOr: &yes,
			filters: []map[string]any{filter("station", "EQUALS", "North Harbour"), filter("distance", "GREATER_THAN_OR_EQUAL", "10")},
			pred:    `station = 'North Harbour' OR distance >= 10`},
		{name: "OR keeps the range", columns: []string{"occurred_at"}, start: m1, end: m31, useOr: &yes,
			filters: []map[string]any{filter("station", "EQUALS", "Central"), filter("degree_of_urgency", "EQUALS", "B")},
			pred:    `station = 'Central' OR degree_of_urgency = 'B'`},
		{name: "OR of three with NULLs", columns: []string{"transported", "municipality", "age"}, start: m1, end: m31, useOr: &yes,
			filters: []map[string]any{filter("transported", "EQUALS", "true"), filter("municipality", "EQUALS", "Molde"), filter("age", "LESS_THAN_OR_EQUAL", "9")},
			pred:    `transported = true OR municipality = 'Molde' OR age <= 9`},
		{name: "OR with no filter", columns: []string{"gender"}, start: m1, end: m31, useOr: &yes},

		{name: "joined columns listed", columns: []string{"gender", "age", "callsign", "resource_id"}, start: m1, end: m31},
		{name: "joined filter, record columns listed", columns: []string{"station", "age"}, start: m1, end: m31, useOr: &yes,
			filters: []map[string]any{filter("callsign", "EQUALS", "AMB 1-2"), filter("gender", "EQUALS", "female")},
			pred:    `callsign = 'AMB 1-2' OR gender = 'female'`},
		{name: "resource_id and age AND", columns: []string{"callsign", "gender"}, start: m1, end: m31,
			filters: []map[string]any{filter("resource_id", "EQUALS", "1002"), filter("age", "GREATER_THAN", "18")},
			pred:    `resource_id = 1002 AND age > 18`},
		{name: "age LESS_THAN", columns: []string{"gender", "age", "callsign", "resource_id"}, start: m1, end: m31,
			filters: []map[string]any{filter("age", "LESS_THAN", "18")}, pred: `age < 18`},
		{name: "callsign GREATER_THAN", columns: []string{"callsign", "station"}, start: m1, end: m31,
			filters: []map[string]any{filter("callsign", "GREATER_THAN", "AMB 1-2")}, pred: `callsign > 'AMB 1-2'`},
		{name: "gender EQUALS", columns: allColumns, start: "2024-01-01", end: "2025-12-31",
			filters: []map[string]any{filter("gender", "EQUALS", "female")}, pred: `gender = 'female'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantD, wantU := e.expectDistinct(t, c), e.expectUnique(t, c)
			if (len(wantD) == 0) != c.empty || (len(wantU) == 0) != c.empty {
				t.Fatalf("fixture check: expected empty=%v, SQL gives %d distinct values", c.empty, len(wantD))
			}
			got := e.ask(t, bothQuery, c.vars())
			if d := diff(got.DistinctValues, wantD); d != "" {
				t.Errorf("distinct_values: %s", d)
			}
			if d := diff(got.UniqueCounts, wantU); d != "" {
				t.Errorf("unique_counts: %s", d)
			}
		})
	}

	t.Run("literal arguments and enum", func(t *testing.T) {
		s := selection{columns: []string{"distance"}, start: m1, end: m31, pred: `distance > 10 OR station = 'Central'`}
		got := e.ask(t, `{
  distinct_values(columns: ["distance"], start_date: "2024-03-01", end_date: "2024-03-31", use_or: true,
    filters: [{column: "distance", value: "10", operator: GREATER_THAN}, {column: "station", operator: EQUALS, value: "Central"}]) { column value }
  unique_counts(columns: "distance", start_date: "2024-03-01", end_date: "2024-03-31", use_or: true,
    filters: [{column: "distance", value: "10", operator: GREATER_THAN}, {column: "station", operator: EQUALS, value: "Central"}]) { value count column }
}`, nil)
		if want := e.expectDistinct(t, s); !reflect.DeepEqual(got.DistinctValues, want) {
			t.Errorf("distinct_values\n got %s\nwant %s", show(got.DistinctValues), show(want))
		}
		if want := e.expectUnique(t, s); !reflect.DeepEqual(got.UniqueCounts, want) {
			t.Errorf("unique_counts\n got %s\nwant %s", show(got.UniqueCounts), show(want))
		}
	})

	t.Run("null use_or and filters", func(t *testing.T) {
		s := selection{columns: []string{"station"}, start: m1, end: m31}
		v := s.vars()
		v["useOr"], v["filters"] = nil, nil
		got := e.ask(t, bothQuery, v)
		if want := e.expectUnique(t, s); !reflect.DeepEqual(got.UniqueCounts, want) {
			t.Errorf("unique_counts\n got %s\nwant %s", show(got.UniqueCounts), show(want))
		}
	})
}

// Every value distinct_values returns, sent back as an EQUALS filter, selects exactly the records
// unique_counts counted for it.
func TestValuesRoundTripAsFilters(t *testing.T) {
	e := start(t)
	const from, to = "2024-01-01", "2025-12-31"
	for _, c := range allColumns {
		t.Run(c, func(t *testing.T) {
			all := e.ask(t, bothQuery, map[string]any{"columns": []string{c}, "start": from, "end": to})
			counts := map[string]int64{}
			var total, inRange int64
			for _, u := range all.UniqueCounts {
				total += u.Count
				if u.Value != nil {
					counts[*u.Value] = u.Count
				}
			}
			if err := e.pool.QueryRow(context.Background(),
				`SELECT count(*) FROM fact_record WHERE occurred_at::date BETWEEN $1::date AND $2::date`, from, to).Scan(&inRange); err != nil {
				t.Fatal(err)
			}
			if total != inRange {
				t.Errorf("counts of %s add up to %d, %d records are in range", c, total, inRange)
			}
			nonNull := 0
			for _, d := range all.DistinctValues {
				if d.Value == nil {
					continue
				}
				nonNull++
				v := *d.Value
				got := e.ask(t, bothQuery, map[string]any{"columns": []string{c}, "start": from, "end": to,
					"filters": []map[string]any{filter(c, "EQUALS", v)}})
				if want := []distinctValue{{Column: c, Value: &v}}; !reflect.DeepEqual(got.DistinctValues, want) {
					t.Errorf("%s EQUALS %q: distinct_values %s", c, v, show(got.DistinctValues))
				}
				var sqlCount int64
				q := fmt.Sprintf(`SELECT count(*) FROM %s WHERE occurred_at::date BETWEEN $1::date AND $2::date AND %s::text = $3`, recordsView, pgx.Identifier{c}.Sanitize())
				if err := e.pool.QueryRow(context.Background(), q, from, to, v).Scan(&sqlCount); err != nil {
					t.Fatal(err)
				}
				want := []uniqueCount{{Column: c, Count: counts[v], Value: &v}}
				if counts[v] != sqlCount || !reflect.DeepEqual(got.UniqueCounts, want) {
					t.Errorf("%s EQUALS %q: unique_counts %s, counted %d before, SQL counts %d", c, v, show(got.UniqueCounts), counts[v], sqlCount)
				}
			}
			if nonNull == 0 || nonNull != len(counts) {
				t.Errorf("%d non-null distinct values, %d counted", nonNull, len(counts))
			}
		})
	}
}

func tableCounts(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range []string{"dim_station", "dim_resource", "dim_patient", "fact_record", "fact_oxygen"} {
		var n int64
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

func TestBadInputIsRefused(t *testing.T) {
	e := start(t)
	before := tableCounts(t, e.pool)
	if before["fact_record"] == 0 {
		t.Fatal("fixture not loaded")
	}
	accepted := "station, station_id, degree_of_urgency, distance, response_time_s, municipality, transported, occurred_at, callsign, resource_id, gender, age"
	base := func() map[string]any {
		return map[string]any{"columns": []string{"station"}, "start": "2024-03-01", "end": "2024-03-31"}
	}
	with := func(k string, v any) map[string]any { m := base(); m[k] = v; return m }
	withFilter := func(column, op, value string) map[string]any {
		return with("filters", []map[string]any{filter("station", "EQUALS", "Central"), filter(column, op, value)})
	}
	q := func(s string) string { return strconv.Quote(s) }
	cases := []struct {
		name string
		vars map[string]any
		want []string
	}{
		{"unknown column", with("columns", []string{"nope"}), []string{"columns", q("nope"), accepted}},
		{"unknown second column", with("columns", []string{"station", "nope"}), []string{"columns[1]", q("nope"), accepted}},
		{"statement in a column name", with("columns", []string{"station; DROP TABLE fact_record"}), []string{q("station; DROP TABLE fact_record"), accepted}},
		{"quoted column name", with("columns", []string{`"station"`}), []string{q(`"station"`), accepted}},
		{"comment in a column name", with("columns", []string{"station--"}), []string{q("station--"), accepted}},
		{"qualified column name", with("columns", []string{"r.station"}), []string{q("r.station")}},
		{"column name in another case", with("columns", []string{"Station"}), []string{q("Station")}},
		{"empty column name", with("columns", []string{""}), []string{q(""), accepted}},
		{"no columns", with("columns", []string{}), []string{"columns", accepted}},
		{"unknown filter column", withFilter("nope", "EQUALS", "1"), []string{"filters[1].column", q("nope"), accepted}},
		{"statement in a filter column", withFilter("station; DROP TABLE fact_record", "EQUALS", "1"), []string{"filters[1].column", q("station; DROP TABLE fact_record")}},
		{"quoted filter column", withFilter(`"distance"`, "GREATER_THAN", "1"), []string{q(`"distance"`)}},
		{"injection in a numeric value", withFilter("distance", "GREATER_THAN", "' OR 1=1 --"), []string{"distance", q("' OR 1=1 --")}},
		{"injection in an integer value", withFilter("station_id", "EQUALS", "1 OR 1=1"), []string{"station_id", q("1 OR 1=1")}},
		{"word for a number", withFilter("distance", "LESS_THAN", "ten"), []string{"distance", q("ten")}},
		{"decimal comma", withFilter("distance", "LESS_THAN", "9,5"), []string{"distance", q("9,5")}},
		{"fraction for an integer", withFilter("age", "GREATER_THAN", "12.5"), []string{"age", q("12.5")}},
		{"integer out of range", withFilter("response_time_s", "GREATER_THAN", "99999999999"), []string{"response_time_s", q("99999999999")}},
		{"not a boolean", withFilter("transported", "EQUALS", "yes"), []string{"transported", q("yes")}},
		{"impossible timestamp", withFilter("occurred_at", "GREATER_THAN", "2024-02-30"), []string{"occurred_at", q("2024-02-30")}},
		{"not a timestamp", withFilter("occurred_at", "GREATER_THAN", "yesterday"), []string{"occurred_at", q("yesterday")}},
		{"NUL in text", withFilter("station", "EQUALS", "a\x00b"), []string{"station", q("a\x00b")}},
		{"start after end", with("start", "2024-04-01"), []string{"start_date", "end_date", "2024-04-01", "2024-03-31"}},
	}
	for _, arg := range []string{"start", "end"} {
		for _, bad := range []string{"2024-13-01", "2024-02-30", "24-3-1", "", "2024-03-01T00:00:00", "2024/03/01"} {
			cases = append(cases, struct {
				name string
				vars map[string]any
				want []string
			}{arg + "_date " + q(bad), with(arg, bad), []string{arg + "_date", q(bad)}})
		}
	}
	for _, field := range []string{"distinct_values", "unique_counts"} {
		query := fmt.Sprintf(`query Q($columns: [String!]!, $start: String!, $end: String!, $useOr: Boolean, $filters: [Filter!]) {
  %s(columns: $columns, start_date: $start, end_date: $end, use_or: $useOr, filters: $filters) { column value }
}`, field)
		for _, c := range cases {
			t.Run(field+"/"+c.name, func(t *testing.T) {
				resp := e.svc.GraphQL(t, "/graphql", query, c.vars)
				if resp.Status != 200 {
					t.Errorf("status %d", resp.Status)
				}
				if len(resp.Errors) != 1 {
					t.Fatalf("want exactly one error: %s", resp.Raw)
				}
				er := resp.Errors[0]
				if er.Code() != "BAD_USER_INPUT" {
					t.Errorf("code %q, want BAD_USER_INPUT: %s", er.Code(), resp.Raw)
				}
				for _, w := range c.want {
					if !strings.Contains(er.Message, w) {
						t.Errorf("message %q does not name %q", er.Message, w)
					}
				}
				if !reflect.DeepEqual(er.Path, []any{field}) {
					t.Errorf("path %v, want [%s]", er.Path, field)
				}
				if want := `{"` + field + `":null}`; string(resp.Data) != want {
					t.Errorf("data %s, want %s", resp.Data, want)
				}
			})
		}
	}

	t.Run("error in one field leaves the other", func(t *testing.T) {
		resp := e.svc.GraphQL(t, "/graphql", `{
  distinct_values(columns: ["nope"], start_date: "2024-03-01", end_date: "2024-03-31") { column value }
  records_count { count }
}`, nil)
		var d struct {
			DistinctValues []distinctValue        `json:"distinct_values"`
			RecordsCount   *struct{ Count int64 } `json:"records_count"`
		}
		if err := json.Unmarshal(resp.Data, &d); err != nil {
			t.Fatal(err)
		}
		if len(resp.Errors) != 1 || resp.Errors[0].Code() != "BAD_USER_INPUT" || d.DistinctValues != nil || d.RecordsCount == nil || d.RecordsCount.Count != before["fact_record"] {
			t.Errorf("got %s", resp.Raw)
		}
	})

	t.Run("operator outside the enum", func(t *testing.T) {
		resp := e.svc.GraphQL(t, "/graphql", `query Q($f: [Filter!]) {
  unique_counts(columns: ["station"], start_date: "2024-03-01", end_date: "2024-03-31", filters: $f) { column count value }
}`, map[string]any{"f": []map[string]any{filter("station", "LIKE", "%")}})
		if len(resp.Errors) == 0 || resp.Errors[0].Code() == "INTERNAL" || resp.Errors[0].Code() == "" || !strings.Contains(resp.Errors[0].Message, "LIKE") {
			t.Errorf("got %s", resp.Raw)
		}
		if string(resp.Data) != "" && string(resp.Data) != "null" && string(resp.Data) != `{"unique_counts":null}` {
			t.Errorf("data %s", resp.Data)
		}
	})

	if after := tableCounts(t, e.pool); !reflect.DeepEqual(after, before) {
		t.Errorf("tables changed: before %v, after %v", before, after)
	}
}

func TestRecordsCount(t *testing.T) {
	e := start(t)
	count := func(t *testing.T, query string, vars map[string]any) int64 {
		t.Helper()
		resp := e.svc.GraphQL(t, "/graphql", query, vars)
		var d struct {
			RecordsCount struct {
				Count int64 `json:"count"`
			} `json:"records_count"`
		}
		resp.DataInto(t, &d)
		return d.RecordsCount.Count
	}
	sqlCount := func(t *testing.T, where string, args ...any) int64 {
		t.Helper()
		var n int64
		if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM fact_record WHERE "+where, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	all := sqlCount(t, "true")
	if all == 0 {
		t.Fatal("fixture not loaded")
	}
	const byVar = `query Q($s: String) { records_count(station: $s) { count } }`

	t.Run("omitted", func(t *testing.T) {
		if got := count(t, `{ records_count { count } }`, nil); got != all {
			t.Errorf("got %d, want %d", got, all)
		}
	})
	t.Run("null literal", func(t *testing.T) {
		if got := count(t, `{ records_count(station: null) { count } }`, nil); got != all {
			t.Errorf("got %d, want %d", got, all)
		}
	})
	t.Run("null variable", func(t *testing.T) {
		if got := count(t, byVar, map[string]any{"s": nil}); got != all {
			t.Errorf("got %d, want %d", got, all)
		}
	})
	t.Run("variable not sent", func(t *testing.T) {
		if got := count(t, byVar, nil); got != all {
			t.Errorf("got %d, want %d", got, all)
		}
	})
	for _, station := range []string{"Central", "North Harbour", `Ålesund Sør, "Kai" 1's`, "Fjord\nside"} {
		t.Run("station "+strconv.Quote(station), func(t *testing.T) {
			want := sqlCount(t, "station = $1", station)
			if want == 0 {
				t.Fatal("fixture check: no record of this station")
			}
			if got := count(t, byVar, map[string]any{"s": station}); got != want {
				t.Errorf("got %d, want %d", got, want)
			}
		})
	}
	for _, station := range []string{"central", "CENTRAL", "Central ", " Central", "Nowhere", "", "Empty Station", "Alesund Sør, \"Kai\" 1's", "' OR 1=1 --", "a\x00b"} {
		t.Run("no records "+strconv.Quote(station), func(t *testing.T) {
			if got := count(t, byVar, map[string]any{"s": station}); got != 0 {
				t.Errorf("got %d, want 0", got)
			}
		})
	}
}
