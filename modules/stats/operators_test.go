package stats_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/modules/records"
)

// The operators of contract section 6.1 on every column type, alone and combined with use_or,
// over HTTP on the edge fixture; each expected answer is the SQL of the operator's definition
// written the plain way (IN as a list of parameters, NOT_IN as NOT IN, CONTAINS as ILIKE with
// an escaped pattern), never the service's own formulation.

func filterOp(column, operator string) map[string]any {
	return map[string]any{"column": column, "operator": operator}
}

func filterValues(column, operator string, values ...string) map[string]any {
	return map[string]any{"column": column, "operator": operator, "values": values}
}

// likePattern is a CONTAINS needle as an ILIKE pattern: % _ and \ escaped with the default
// escape character, wrapped in %.
func likePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// opCase is one filter and the SQL it means over rec, with its parameters from $3 on.
type opCase struct {
	name   string
	filter map[string]any
	pred   string
	args   []any
}

// operatorCases are the filters of every operator the column accepts, with values the
// fixture has for it in [from, to].
func operatorCases(t *testing.T, e env, c records.Column, from, to string) []opCase {
	t.Helper()
	id := pgx.Identifier{"rec", c.Name}.Sanitize()
	q := fmt.Sprintf(`SELECT %[1]s::text FROM %[2]s WHERE occurred_at::date BETWEEN $1::date AND $2::date AND %[1]s IS NOT NULL
GROUP BY %[1]s ORDER BY %[1]s`, id, recordsView)
	vals := queryRows(t, e.pool, q, []any{from, to}, pgx.RowTo[string])
	if len(vals) < 2 {
		t.Fatalf("fixture check: %s has %d distinct values in range", c.Name, len(vals))
	}
	lo, mid, hi := vals[0], vals[len(vals)/2], vals[len(vals)-1]
	typ := string(c.Type)
	p := func(n int) string { return fmt.Sprintf("$%d::%s", n, typ) }
	cases := []opCase{
		{"EQUALS", filter(c.Name, "EQUALS", mid), id + " = " + p(3), []any{mid}},
		{"GREATER_THAN", filter(c.Name, "GREATER_THAN", mid), id + " > " + p(3), []any{mid}},
		{"LESS_THAN", filter(c.Name, "LESS_THAN", mid), id + " < " + p(3), []any{mid}},
		{"GREATER_THAN_OR_EQUAL", filter(c.Name, "GREATER_THAN_OR_EQUAL", mid), id + " >= " + p(3), []any{mid}},
		{"LESS_THAN_OR_EQUAL", filter(c.Name, "LESS_THAN_OR_EQUAL", mid), id + " <= " + p(3), []any{mid}},
		{"NOT_EQUALS", filter(c.Name, "NOT_EQUALS", mid), id + " IS NOT NULL AND NOT (" + id + " = " + p(3) + ")", []any{mid}},
		{"IN one", filterValues(c.Name, "IN", mid), id + " IN (" + p(3) + ")", []any{mid}},
		{"IN three", filterValues(c.Name, "IN", hi, lo, mid), id + " IN (" + p(3) + ", " + p(4) + ", " + p(5) + ")", []any{hi, lo, mid}},
		{"IN repeated", filterValues(c.Name, "IN", lo, lo), id + " IN (" + p(3) + ")", []any{lo}},
		{"NOT_IN", filterValues(c.Name, "NOT_IN", lo, hi), id + " NOT IN (" + p(3) + ", " + p(4) + ")", []any{lo, hi}},
		{"NOT_IN one", filterValues(c.Name, "NOT_IN", mid), id + " NOT IN (" + p(3) + ")", []any{mid}},
		{"IS_NULL", filterOp(c.Name, "IS_NULL"), id + " IS NULL", nil},
		{"IS_NOT_NULL", filterOp(c.Name, "IS_NOT_NULL"), id + " IS NOT NULL", nil},
	}
	if c.Type == records.TypeText {
		// Needles with LIKE's wildcards and escape, letter cases, quotes, Unicode and a newline;
		// the fixture holds text that a wildcard would match too (SørXVest, Vest 1000, Backslash).
		for _, needle := range []string{"%", "_", `\`, "r_v", "100%", `k\s`, "ÅLE", "ålesund", "SØR", `"kai" 1's`, "d\ns",
			"amb 1", "C", "", "no such text"} {
			cases = append(cases, opCase{"CONTAINS " + fmt.Sprintf("%q", needle), filter(c.Name, "CONTAINS", needle),
				id + " ILIKE $3", []any{likePattern(needle)}})
		}
	}
	return cases
}

func TestEveryOperatorOnEveryColumn(t *testing.T) {
	e := start(t)
	const from, to = "2024-01-01", "2025-12-31"
	yes := true
	var some, none int
	for _, c := range records.Columns() {
		for _, oc := range operatorCases(t, e, c, from, to) {
			alone := selection{columns: []string{"occurred_at", c.Name}, start: from, end: to,
				filters: []map[string]any{oc.filter}, pred: oc.pred, predArgs: oc.args}
			// With use_or, next to a filter of another operator on another column.
			other := filterValues("station", "IN", "Central", `Ålesund Sør, "Kai" 1's`)
			otherPred := `"rec"."station" IN ('Central', 'Ålesund Sør, "Kai" 1''s')`
			if c.Name == "station" {
				other, otherPred = filterOp("degree_of_urgency", "IS_NULL"), `"rec"."degree_of_urgency" IS NULL`
			}
			withOr := selection{columns: []string{"station", c.Name}, start: from, end: to, useOr: &yes,
				filters: []map[string]any{oc.filter, other}, pred: "(" + oc.pred + ") OR " + otherPred, predArgs: oc.args}
			for _, s := range []selection{alone, withOr} {
				name := c.Name + "/" + oc.name
				if s.useOr != nil {
					name += "/use_or"
				}
				t.Run(name, func(t *testing.T) {
					wantD, wantU := e.expectDistinct(t, s), e.expectUnique(t, s)
					if len(wantD) == 0 {
						none++
					} else {
						some++
					}
					got := e.ask(t, bothQuery, s.vars())
					if d := diff(got.DistinctValues, wantD); d != "" {
						t.Errorf("distinct_values: %s", d)
					}
					if d := diff(got.UniqueCounts, wantU); d != "" {
						t.Errorf("unique_counts: %s", d)
					}
				})
			}
		}
	}
	if some == 0 || none == 0 {
		t.Errorf("fixture check: %d cases select records, %d select none; want both kinds", some, none)
	}
}

// The CONTAINS cases above must tell a plain substring from a LIKE pattern: each needle with a
// wildcard or a backslash has text that a pattern would match and the substring does not.
func TestContainsIsNotAPattern(t *testing.T) {
	e := start(t)
	for _, tc := range []struct{ needle, pattern string }{{"r_v", "%r_v%"}, {"100%", "%100%%"}, {`k\s`, `%k\s%`}} {
		var plain, differ int64
		err := e.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE municipality ILIKE $1),
  count(*) FILTER (WHERE (municipality ILIKE $1) <> (municipality ILIKE $2)) FROM fact_record`, likePattern(tc.needle), tc.pattern).Scan(&plain, &differ)
		if err != nil {
			t.Fatal(err)
		}
		if plain == 0 || differ == 0 {
			t.Fatalf("fixture check: %q matches %d records as a substring, and as a pattern %d others", tc.needle, plain, differ)
		}
		s := selection{columns: []string{"municipality"}, start: "2000-01-01", end: "2030-12-31",
			filters: []map[string]any{filter("municipality", "CONTAINS", tc.needle)}, pred: "municipality ILIKE $3", predArgs: []any{likePattern(tc.needle)}}
		got := e.ask(t, bothQuery, s.vars())
		var n int64
		for _, u := range got.UniqueCounts {
			n += u.Count
		}
		if n != plain {
			t.Errorf("CONTAINS %q: %d records, want %d (%s)", tc.needle, n, plain, show(got.UniqueCounts))
		}
	}
}

// Every bad combination of operator and operands is a BAD_USER_INPUT naming the filter's
// position and operator, on every /graphql field that takes filters.
func TestBadFilterCombinations(t *testing.T) {
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{"LIMITS__MAX_FILTER_VALUES": "3"})
	ok := filter("station", "EQUALS", "Central")
	cases := []struct {
		name string
		bad  map[string]any
		want []string
	}{
		{"EQUALS without value", filterOp("station", "EQUALS"), []string{"filters[1] (EQUALS)", "value"}},
		{"GREATER_THAN with values", filterValues("distance", "GREATER_THAN", "1"), []string{"filters[1] (GREATER_THAN)", "values"}},
		{"NOT_EQUALS without value", filterOp("age", "NOT_EQUALS"), []string{"filters[1] (NOT_EQUALS)", "value"}},
		{"IN without values", filterOp("station", "IN"), []string{"filters[1] (IN)", "values"}},
		{"IN with empty values", filterValues("station", "IN"), []string{"filters[1] (IN)", "values"}},
		{"IN with value", filter("station", "IN", "Central"), []string{"filters[1] (IN)", "value"}},
		{"NOT_IN without values", filterOp("age", "NOT_IN"), []string{"filters[1] (NOT_IN)", "values"}},
		{"IS_NULL with value", filter("station", "IS_NULL", ""), []string{"filters[1] (IS_NULL)", "neither"}},
		{"IS_NOT_NULL with values", filterValues("station", "IS_NOT_NULL", "x"), []string{"filters[1] (IS_NOT_NULL)", "neither"}},
		{"CONTAINS on a number", filter("distance", "CONTAINS", "1"), []string{"filters[1] (CONTAINS)", "distance", "text"}},
		{"CONTAINS on an integer", filter("age", "CONTAINS", "1"), []string{"filters[1] (CONTAINS)", "age"}},
		{"CONTAINS on a timestamp", filter("occurred_at", "CONTAINS", "2024"), []string{"filters[1] (CONTAINS)", "occurred_at"}},
		{"CONTAINS on a boolean", filter("transported", "CONTAINS", "t"), []string{"filters[1] (CONTAINS)", "transported"}},
		{"CONTAINS without value", filterOp("station", "CONTAINS"), []string{"filters[1] (CONTAINS)", "value"}},
		{"too many values", filterValues("station", "IN", "a", "b", "c", "d"), []string{"filters[1] (IN)", "4 values", "LIMITS__MAX_FILTER_VALUES=3"}},
		{"a value that does not convert", filterValues("age", "NOT_IN", "1", "old"), []string{"filters[1] (NOT_IN)", "values[1]", "age", `"old"`}},
		{"NUL in text", filterValues("station", "IN", "a\x00b"), []string{"filters[1] (IN)", "station"}},
	}
	fields := map[string]string{
		"distinct_values": `distinct_values(columns: ["station"], start_date: "2024-03-01", end_date: "2024-03-31", filters: $f) { value }`,
		"unique_counts":   `unique_counts(columns: ["station"], start_date: "2024-03-01", end_date: "2024-03-31", filters: $f) { count }`,
		"record_series":   `record_series(start_date: "2024-03-01", end_date: "2024-03-31", bucket: DAY, filters: $f) { count }`,
		"record_stats":    `record_stats(start_date: "2024-03-01", end_date: "2024-03-31", measure: "distance", filters: $f) { count }`,
	}
	for field, sel := range fields {
		for _, c := range cases {
			t.Run(field+"/"+c.name, func(t *testing.T) {
				resp := svc.GraphQL(t, "/graphql", `query($f: [Filter!]) { `+sel+` }`, map[string]any{"f": []any{ok, c.bad}})
				if len(resp.Errors) != 1 || resp.Errors[0].Code() != "BAD_USER_INPUT" {
					t.Fatalf("want one BAD_USER_INPUT: %s", resp.Raw)
				}
				for _, w := range c.want {
					if !strings.Contains(resp.Errors[0].Message, w) {
						t.Errorf("message %q does not name %q", resp.Errors[0].Message, w)
					}
				}
				if want := `{"` + field + `":null}`; string(resp.Data) != want && string(resp.Data) != "null" {
					t.Errorf("data %s, want %s", resp.Data, want)
				}
			})
		}
	}
	// Within the limit, the same list is accepted.
	resp := svc.GraphQL(t, "/graphql", `query($f: [Filter!]) { unique_counts(columns: ["station"], start_date: "2024-03-01", end_date: "2024-03-31", filters: $f) { count } }`,
		map[string]any{"f": []any{filterValues("station", "IN", "a", "b", "Central")}})
	if len(resp.Errors) != 0 {
		t.Errorf("three values refused: %s", resp.Raw)
	}
}
