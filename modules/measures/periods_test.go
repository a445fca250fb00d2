package measures_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// period_comparison (contract 6.12.5) against SQL: each period aggregated on its own, the
// values of both joined; the previous periods are the contract's calendar rules, worked out
// by hand per case (leap years, month ends) and checked against date - interval '1 year'.

const periodQuery = `query($start: String!, $end: String!, $compare: ComparePeriod, $groupBy: String, $from: TimePoint, $to: TimePoint,
    $fractile: Float, $target: Float, $maxSeconds: Float, $minCell: Int, $filters: [Filter!]) {
  period_comparison(start_date: $start, end_date: $end, compare_to: $compare, group_by: $groupBy, from: $from, to: $to,
      fractile: $fractile, target: $target, max_seconds: $maxSeconds, min_cell: $minCell, filters: $filters) {
    current_start current_end previous_start previous_end
    rows { column value current { count measured fractile share suppressed } previous { count measured fractile share suppressed } change change_ratio }
  }
}`

type periodCase struct {
	name               string
	start, end         string
	compare            string // "" : the default PREVIOUS_YEAR
	prevStart, prevEnd string
	groupBy            string
	from, to           string
	fractile           float64 // 0: the default 0.9
	target             *float64
	maxSeconds         *float64
	filters            []map[string]any
	pred               string
	minRows            int
}

func (c periodCase) vars() map[string]any {
	v := map[string]any{"start": c.start, "end": c.end}
	set := func(k string, x any, ok bool) {
		if ok {
			v[k] = x
		}
	}
	set("compare", c.compare, c.compare != "")
	set("groupBy", c.groupBy, c.groupBy != "")
	set("from", c.from, c.from != "")
	set("to", c.to, c.to != "")
	set("fractile", c.fractile, c.fractile != 0)
	if c.target != nil {
		v["target"] = *c.target
	}
	if c.maxSeconds != nil {
		v["maxSeconds"] = *c.maxSeconds
	}
	set("filters", c.filters, c.filters != nil)
	return v
}

func (e env) expectPeriods(t *testing.T, c periodCase) (json.RawMessage, int) {
	t.Helper()
	args := []any{c.start, c.end, c.prevStart, c.prevEnd}
	ph := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	pred := c.pred
	if pred == "" {
		pred = "true"
	}
	iv := "NULL::float8"
	if c.from != "" {
		iv = intervalSQL[[2]string{c.from, c.to}]
	}
	ok := "b.s >= 0"
	if c.maxSeconds != nil {
		ok = "b.s BETWEEN 0 AND " + ph(*c.maxSeconds) + "::float8"
	}
	f := c.fractile
	if f == 0 {
		f = 0.9
	}
	fr := ph(f) + "::float8"
	target := "NULL::float8"
	if c.target != nil {
		target = ph(*c.target) + "::float8"
	}
	g, column := "NULL::text", "NULL::text"
	if c.groupBy != "" {
		g = pgx.Identifier{"b", c.groupBy}.Sanitize()
		column = ph(c.groupBy) + "::text"
	}
	period := func(from, to string) string {
		return fmt.Sprintf(`SELECT %[1]s AS v, count(*) AS n, count(*) FILTER (WHERE %[2]s) AS m,
  percentile_disc(%[3]s) WITHIN GROUP (ORDER BY b.s) FILTER (WHERE %[2]s) AS fr,
  count(*) FILTER (WHERE %[2]s AND b.s <= %[4]s) AS w
  FROM %[5]s WHERE b.occurred_at::date BETWEEN %[6]s::date AND %[7]s::date AND (%[8]s) GROUP BY 1`, g, ok, fr, target, base(iv), from, to, pred)
	}
	vals := "SELECT v FROM cur UNION SELECT v FROM prev"
	if c.groupBy == "" {
		vals = "SELECT NULL::text AS v"
	}
	intervals := c.from != ""
	figures := func(s string) string {
		return fmt.Sprintf(`json_build_object('count', coalesce(%[1]s.n, 0),
      'measured', CASE WHEN %[2]t THEN coalesce(%[1]s.m, 0) END,
      'fractile', CASE WHEN %[2]t THEN %[1]s.fr END,
      'share', CASE WHEN %[3]t AND %[1]s.m > 0 THEN %[1]s.w::float8 / %[1]s.m END,
      'suppressed', false)`, s, intervals, intervals && c.target != nil)
	}
	q := fmt.Sprintf(`WITH cur AS (%s), prev AS (%s), vals AS (%s)
SELECT json_build_object('current_start', $1::text, 'current_end', $2::text, 'previous_start', $3::text, 'previous_end', $4::text,
  'rows', json_agg(json_build_object('column', %s, 'value', vals.v::text, 'current', %s, 'previous', %s,
     'change', coalesce(cur.n, 0) - coalesce(prev.n, 0),
     'change_ratio', CASE WHEN coalesce(prev.n, 0) <> 0 THEN (coalesce(cur.n, 0) - prev.n)::float8 / prev.n END)
     ORDER BY vals.v ASC NULLS LAST)), count(*)
  FROM vals LEFT JOIN cur ON cur.v IS NOT DISTINCT FROM vals.v LEFT JOIN prev ON prev.v IS NOT DISTINCT FROM vals.v`,
		period("$1", "$2"), period("$3", "$4"), vals, column, figures("cur"), figures("prev"))
	var (
		out json.RawMessage
		n   int
	)
	if err := e.pool.QueryRow(context.Background(), q, args...).Scan(&out, &n); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	return out, n
}

func TestPeriodComparisonMatchesSQL(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	cases := []periodCase{
		{name: "whole February after a leap year: the whole leap February", start: "2025-02-01", end: "2025-02-28", prevStart: "2024-02-01", prevEnd: "2024-02-29", minRows: 1},
		{name: "whole leap February: the whole February before", start: "2024-02-01", end: "2024-02-29", prevStart: "2023-02-01", prevEnd: "2023-02-28",
			groupBy: "station", from: "CALL", to: "ARRIVED_ON_SCENE", target: ptr(600.0), minRows: 3},
		{name: "a quarter against the one before", start: "2024-01-01", end: "2024-03-31", compare: "PREVIOUS_PERIOD", prevStart: "2023-10-01", prevEnd: "2023-12-31",
			groupBy: "degree_of_urgency", from: "UNIT_NOTIFIED", to: "EN_ROUTE", fractile: 0.5, target: ptr(60.0), maxSeconds: ptr(120.0), minRows: 4},
		{name: "days across the leap day, a year earlier", start: "2024-02-29", end: "2024-03-05", prevStart: "2023-02-28", prevEnd: "2023-03-05",
			groupBy: "resource_id", from: "CALL", to: "ARRIVED_ON_SCENE", minRows: 3},
		{name: "days across the leap day, the days before", start: "2024-02-28", end: "2024-03-02", compare: "PREVIOUS_PERIOD", prevStart: "2024-02-24", prevEnd: "2024-02-27",
			filters: []map[string]any{{"column": "transported", "operator": "EQUALS", "value": "true"}}, pred: "b.transported", minRows: 1},
		{name: "a month end that is not whole months", start: "2024-01-31", end: "2024-02-29", compare: "PREVIOUS_PERIOD", prevStart: "2024-01-01", prevEnd: "2024-01-30",
			groupBy: "station", minRows: 3},
		{name: "values of one period only", start: "2023-01-01", end: "2023-01-31", prevStart: "2022-01-01", prevEnd: "2022-01-31", groupBy: "callsign", minRows: 4},
		{name: "a range longer than a year overlaps its previous year", start: "2023-03-15", end: "2024-06-14", prevStart: "2022-03-15", prevEnd: "2023-06-14",
			from: "CALL", to: "ARRIVED_ON_SCENE", target: ptr(480.0), minRows: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.compare == "" && !(c.start[8:] == "01" && c.prevEnd[5:7] == c.end[5:7]) {
				// Not whole months: the previous dates are date - interval '1 year'.
				var ps, pe string
				if err := e.pool.QueryRow(context.Background(), `SELECT ($1::date - interval '1 year')::date::text, ($2::date - interval '1 year')::date::text`,
					c.start, c.end).Scan(&ps, &pe); err != nil || ps != c.prevStart || pe != c.prevEnd {
					t.Fatalf("the case's previous period %s..%s is not PostgreSQL's %s..%s (%v)", c.prevStart, c.prevEnd, ps, pe, err)
				}
			}
			want, n := e.expectPeriods(t, c)
			if n < c.minRows {
				t.Fatalf("%d rows, the case wants at least %d: %s", n, c.minRows, want)
			}
			got := e.ask(t, periodQuery, c.vars(), "period_comparison")
			sameAnswer(t, c.name, got, want)
		})
	}
}
