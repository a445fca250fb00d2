package measures_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// interval_stats (contract 6.12.1, 6.12.2) over HTTP on the fixture, against SQL written here
// the plain way: each record's interval from its own columns (response_time_s itself for the
// response interval, a join for the first oxygen), occurred_at::date BETWEEN, one
// percentile_disc or percentile_cont per fraction, the Wilson bounds in SQL; the expected
// answer is built as JSON by the database.

// intervalSQL are the test's own expressions of the intervals, over rec (fact_record) and ox
// (the first oxygen per record).
var intervalSQL = map[[2]string]string{
	{"CALL", "ARRIVED_ON_SCENE"}:            `rec.response_time_s::float8`,
	{"UNIT_NOTIFIED", "EN_ROUTE"}:           `extract(epoch FROM rec.en_route_at - rec.unit_notified_at)::float8`,
	{"ARRIVED_ON_SCENE", "FIRST_OXYGEN"}:    `extract(epoch FROM ox.first - rec.occurred_at)::float8 - rec.response_time_s`,
	{"CALL", "BACK_IN_SERVICE"}:             `extract(epoch FROM rec.back_in_service_at - rec.occurred_at)::float8`,
	{"CALL", "UNIT_NOTIFIED"}:               `extract(epoch FROM rec.unit_notified_at - rec.occurred_at)::float8`,
	{"ARRIVED_ON_SCENE", "BACK_IN_SERVICE"}: `extract(epoch FROM rec.back_in_service_at - rec.occurred_at)::float8 - rec.response_time_s`,
}

// base is every record with the attributes the tests group and filter by, and its interval s.
func base(iv string) string {
	return `(SELECT rec.*, res.resource_id, res.callsign, ` + iv + ` AS s
  FROM fact_record rec
  LEFT JOIN dim_resource res ON res.sk_resource = rec.sk_resource
  LEFT JOIN (SELECT record_id, min(administered_at) AS first FROM fact_oxygen GROUP BY record_id) ox ON ox.record_id = rec.record_id) AS b`
}

// zOf is the normal quantile of the confidences the tests use, as published tables give it.
var zOf = map[float64]float64{0.95: 1.959963984540054, 0.9: 1.6448536269514722, 0.99: 2.5758293035489004}

// bucketLabel is the test's SQL of a bucket's label and its ordering key, over b.
var bucketLabel = map[string][2]string{
	"MONTH":       {`to_char(b.occurred_at, 'YYYY-MM')`, `to_char(b.occurred_at, 'YYYY-MM')`},
	"WEEK":        {`to_char(b.occurred_at::date - (extract(isodow FROM b.occurred_at)::int - 1), 'YYYY-MM-DD')`, `b.occurred_at::date - (extract(isodow FROM b.occurred_at)::int - 1)`},
	"DAY_OF_WEEK": {`extract(isodow FROM b.occurred_at)::int::text`, `extract(isodow FROM b.occurred_at)::int`},
}

type intervalCase struct {
	name       string
	from, to   string
	groupBy    []string
	bucket     string
	fractiles  []float64 // nil: the default [0.9]
	linear     bool
	targets    []float64
	confidence float64 // 0: the default 0.95
	maxSeconds *float64
	start, end string
	filters    []map[string]any
	pred       string // SQL over b; empty: true
	minRows    int    // the expected answer has at least this many objects (guards the case)
}

func (c intervalCase) vars() map[string]any {
	v := map[string]any{"start": c.start, "end": c.end, "from": c.from, "to": c.to}
	if c.groupBy != nil {
		v["groupBy"] = c.groupBy
	}
	if c.bucket != "" {
		v["bucket"] = c.bucket
	}
	if c.fractiles != nil {
		v["fractiles"] = c.fractiles
	}
	if c.linear {
		v["method"] = "LINEAR"
	}
	if c.targets != nil {
		v["targets"] = c.targets
	}
	if c.confidence != 0 {
		v["confidence"] = c.confidence
	}
	if c.maxSeconds != nil {
		v["maxSeconds"] = *c.maxSeconds
	}
	if c.filters != nil {
		v["filters"] = c.filters
	}
	return v
}

const intervalQuery = `query($start: String!, $end: String!, $from: TimePoint!, $to: TimePoint!, $groupBy: [String!],
    $bucket: TimeBucket, $fractiles: [Float!], $method: FractileMethod, $targets: [Float!], $confidence: Float,
    $maxSeconds: Float, $minCell: Int, $filters: [Filter!]) {
  interval_stats(start_date: $start, end_date: $end, from: $from, to: $to, group_by: $groupBy, bucket: $bucket,
      fractiles: $fractiles, fractile_method: $method, targets: $targets, confidence: $confidence,
      max_seconds: $maxSeconds, min_cell: $minCell, filters: $filters) {
    bucket group { column value } count measured excluded min max avg fractiles { p value }
    compliance { target within share ci_low ci_high suppressed } suppressed
  }
}`

// expectIntervals is the answer of c as the database computes it, as JSON.
func (e env) expectIntervals(t *testing.T, c intervalCase) (json.RawMessage, int) {
	t.Helper()
	iv, ok := intervalSQL[[2]string{c.from, c.to}]
	if !ok {
		t.Fatalf("no test SQL for %s -> %s", c.from, c.to)
	}
	args := []any{c.start, c.end}
	ph := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	pred := c.pred
	if pred == "" {
		pred = "true"
	}
	okCond := "b.s >= 0"
	excl := "b.s < 0"
	if c.maxSeconds != nil {
		m := ph(*c.maxSeconds) + "::float8"
		okCond = "b.s BETWEEN 0 AND " + m
		excl = "(b.s < 0 OR b.s > " + m + ")"
	}
	var keys, groupJSON []string
	bucket := "NULL::text"
	if c.bucket != "" {
		bucket = bucketLabel[c.bucket][0]
		keys = append(keys, bucketLabel[c.bucket][1])
	}
	seen := map[string]bool{}
	for _, g := range c.groupBy {
		if seen[g] {
			continue
		}
		seen[g] = true
		id := pgx.Identifier{"b", g}.Sanitize()
		keys = append(keys, id)
		groupJSON = append(groupJSON, fmt.Sprintf(`json_build_object('column', %s::text, 'value', %s::text)`, ph(g), id))
	}
	fr := c.fractiles
	if fr == nil {
		fr = []float64{0.9}
	}
	agg := "percentile_disc"
	if c.linear {
		agg = "percentile_cont"
	}
	var frs, within []string
	for _, p := range fr {
		frs = append(frs, fmt.Sprintf(`%s(%s::float8) WITHIN GROUP (ORDER BY b.s) FILTER (WHERE %s)`, agg, ph(p), okCond))
	}
	for _, tg := range c.targets {
		within = append(within, fmt.Sprintf(`count(*) FILTER (WHERE %s AND b.s <= %s::float8)`, okCond, ph(tg)))
	}
	conf := c.confidence
	if conf == 0 {
		conf = 0.95
	}
	z := ph(zOf[conf]) + "::float8"
	ps := ph(fr) + "::float8[]"
	ts := ph(append([]float64{}, c.targets...)) + "::float8[]"
	group, order := "", ""
	if len(keys) > 0 {
		group = " GROUP BY " + strings.Join(keys, ", ")
		order = " ORDER BY " + strings.Join(keys, " ASC NULLS LAST, ") + " ASC NULLS LAST"
	}
	frArr, inArr := "ARRAY[]::float8[]", "ARRAY[]::bigint[]"
	if len(frs) > 0 {
		frArr = "ARRAY[" + strings.Join(frs, ", ") + "]"
	}
	if len(within) > 0 {
		inArr = "ARRAY[" + strings.Join(within, ", ") + "]"
	}
	inner := fmt.Sprintf(`SELECT %[1]s AS bucket, json_build_array(%[2]s) AS grp, count(*) AS cnt,
  count(*) FILTER (WHERE %[3]s) AS n, count(*) FILTER (WHERE %[4]s) AS excluded,
  min(b.s) FILTER (WHERE %[3]s) AS mn, max(b.s) FILTER (WHERE %[3]s) AS mx, avg(b.s) FILTER (WHERE %[3]s) AS av,
  %[5]s AS fr, %[6]s AS within, row_number() OVER (%[7]s) AS ord
  FROM %[8]s WHERE b.occurred_at::date BETWEEN $1::date AND $2::date AND (%[9]s)%[10]s`,
		bucket, strings.Join(groupJSON, ", "), okCond, excl, frArr, inArr, order, base(iv), pred, group)
	q := fmt.Sprintf(`SELECT coalesce(json_agg(json_build_object(
  'bucket', q.bucket, 'group', q.grp, 'count', q.cnt, 'measured', q.n, 'excluded', q.excluded,
  'min', q.mn, 'max', q.mx, 'avg', q.av,
  'fractiles', coalesce((SELECT json_agg(json_build_object('p', u.p, 'value', u.v) ORDER BY u.o)
                 FROM unnest(%[1]s, q.fr) WITH ORDINALITY AS u(p, v, o)), '[]'::json),
  'compliance', coalesce((SELECT json_agg(json_build_object('target', u.t, 'within', u.w,
                 'share', CASE WHEN q.n > 0 THEN u.w::float8 / q.n END,
                 'ci_low', CASE WHEN q.n = 0 THEN NULL WHEN u.w = 0 THEN 0
                   ELSE (u.w::float8 / q.n + %[2]s * %[2]s / (2 * q.n) - %[2]s * sqrt((u.w::float8 / q.n) * (1 - u.w::float8 / q.n) / q.n + %[2]s * %[2]s / (4.0 * q.n * q.n))) / (1 + %[2]s * %[2]s / q.n) END,
                 'ci_high', CASE WHEN q.n = 0 THEN NULL WHEN u.w = q.n THEN 1
                   ELSE (u.w::float8 / q.n + %[2]s * %[2]s / (2 * q.n) + %[2]s * sqrt((u.w::float8 / q.n) * (1 - u.w::float8 / q.n) / q.n + %[2]s * %[2]s / (4.0 * q.n * q.n))) / (1 + %[2]s * %[2]s / q.n) END,
                 'suppressed', false) ORDER BY u.o)
                 FROM unnest(%[3]s, q.within) WITH ORDINALITY AS u(t, w, o)), '[]'::json),
  'suppressed', false) ORDER BY q.ord), '[]'::json), count(*)
  FROM (%[4]s) AS q`, ps, z, ts, inner)
	var (
		out json.RawMessage
		n   int
	)
	if err := e.pool.QueryRow(context.Background(), q, args...).Scan(&out, &n); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	return out, n
}

func ptr[T any](v T) *T { return &v }

func TestIntervalStatsMatchesSQL(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	filter := func(col, op, val string) map[string]any {
		return map[string]any{"column": col, "operator": op, "value": val}
	}
	cases := []intervalCase{
		{name: "response, whole range, default fractile", from: "CALL", to: "ARRIVED_ON_SCENE", start: "2023-01-01", end: "2024-12-31", minRows: 1},
		{name: "response fractiles at the ends, nearest rank, targets at 0 and around ties", from: "CALL", to: "ARRIVED_ON_SCENE",
			start: "2024-01-01", end: "2024-06-30", fractiles: []float64{0, 0.01, 0.5, 0.9, 0.999, 1}, targets: []float64{0, 480, 479.999, 720, 1e9}, minRows: 1},
		{name: "response linear by station and month", from: "CALL", to: "ARRIVED_ON_SCENE", start: "2024-01-01", end: "2024-12-31",
			groupBy: []string{"station", "station"}, bucket: "MONTH", fractiles: []float64{0.5, 0.9}, linear: true, targets: []float64{600}, minRows: 30},
		{name: "turnout with exclusions, fractions and max_seconds", from: "UNIT_NOTIFIED", to: "EN_ROUTE", start: "2023-01-01", end: "2024-12-31",
			groupBy: []string{"degree_of_urgency"}, fractiles: []float64{0.5, 0.9, 1}, targets: []float64{0, 60, 80}, maxSeconds: ptr(120.0), confidence: 0.9, minRows: 4},
		{name: "turnout nearest rank without max_seconds, linear compared", from: "UNIT_NOTIFIED", to: "EN_ROUTE", start: "2023-06-01", end: "2023-08-31",
			fractiles: []float64{0.25, 0.9}, targets: []float64{60}, confidence: 0.99, minRows: 1},
		{name: "turnout linear", from: "UNIT_NOTIFIED", to: "EN_ROUTE", start: "2023-06-01", end: "2023-08-31", linear: true,
			fractiles: []float64{0.25, 0.9, 1}, maxSeconds: ptr(100000.0), minRows: 1},
		{name: "clinical: arrival to first oxygen by callsign and weekday", from: "ARRIVED_ON_SCENE", to: "FIRST_OXYGEN", start: "2023-01-01", end: "2024-12-31",
			groupBy: []string{"callsign"}, bucket: "DAY_OF_WEEK", targets: []float64{120}, minRows: 20},
		{name: "task time crossing midnight, weekly, filtered", from: "CALL", to: "BACK_IN_SERVICE", start: "2024-02-01", end: "2024-03-31", bucket: "WEEK",
			filters: []map[string]any{filter("station", "EQUALS", "North"), filter("transported", "EQUALS", "true")}, pred: `b.station = 'North' AND b.transported`,
			targets: []float64{3600, 7200}, minRows: 8},
		{name: "nothing matches: one object", from: "CALL", to: "UNIT_NOTIFIED", start: "2020-01-01", end: "2020-01-31", targets: []float64{60}, minRows: 1},
		{name: "nothing measured in a group", from: "ARRIVED_ON_SCENE", to: "BACK_IN_SERVICE", start: "2024-03-01", end: "2024-03-31", groupBy: []string{"resource_id"}, minRows: 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, n := e.expectIntervals(t, c)
			if n < c.minRows {
				t.Fatalf("the SQL gives %d objects, the case wants at least %d: %s", n, c.minRows, want)
			}
			got := e.ask(t, intervalQuery, c.vars(), "interval_stats")
			sameAnswer(t, c.name, got, want)
		})
	}
}

// The contract's example and Wilson's bounds at 0, n and between, on 50 records of a day of
// their own: 7 of them within 100 s.
func TestWilsonInterval(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	exec(t, e.db, `INSERT INTO fact_record (record_id, occurred_at, response_time_s)
		SELECT 900000 + i, timestamp '2022-06-01 10:00' + i * interval '1 minute', CASE WHEN i <= 7 THEN 50 + i ELSE 200 + i END
		  FROM generate_series(1, 50) AS i`)
	got := e.ask(t, `{ interval_stats(start_date: "2022-06-01", end_date: "2022-06-01", from: CALL, to: ARRIVED_ON_SCENE,
		targets: [100, 10, 1000]) { measured compliance { within share ci_low ci_high } } }`, nil, "interval_stats")
	var answer []struct {
		Measured   int64
		Compliance []struct {
			Within int64
			Share  float64
			Low    float64 `json:"ci_low"`
			High   float64 `json:"ci_high"`
		}
	}
	if err := json.Unmarshal(got, &answer); err != nil {
		t.Fatal(err)
	}
	if len(answer) != 1 || answer[0].Measured != 50 || len(answer[0].Compliance) != 3 {
		t.Fatalf("answer %s", got)
	}
	c := answer[0].Compliance
	close := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 5e-8 {
			t.Errorf("%s = %.10f, want %.7f", what, got, want)
		}
	}
	// Contract 6.12.2: 7 of 50 at 0.95 gives 0.0695083 to 0.2618619.
	if c[0].Within != 7 || c[0].Share != 0.14 {
		t.Errorf("within %d share %v, want 7 and 0.14", c[0].Within, c[0].Share)
	}
	close("ci_low of 7/50", c[0].Low, 0.0695083)
	close("ci_high of 7/50", c[0].High, 0.2618619)
	// 0 of 50: the lower bound exactly 0; 50 of 50: the upper exactly 1; the other bound from
	// the formula, computed here in SQL.
	var hi0, lo50 float64
	if err := e.pool.QueryRow(context.Background(), `SELECT ($1::float8 * $1 / 50.0) / (1 + $1::float8 * $1 / 50.0),
		(1 + $1::float8 * $1 / 100.0 - $1::float8 * sqrt($1::float8 * $1 / 10000.0)) / (1 + $1::float8 * $1 / 50.0)`, 1.959963984540054).Scan(&hi0, &lo50); err != nil {
		t.Fatal(err)
	}
	if c[1].Within != 0 || c[1].Low != 0 {
		t.Errorf("0 of 50: within %d ci_low %v, want 0 and exactly 0", c[1].Within, c[1].Low)
	}
	close("ci_high of 0/50", c[1].High, hi0)
	if c[2].Within != 50 || c[2].High != 1 {
		t.Errorf("50 of 50: within %d ci_high %v, want 50 and exactly 1", c[2].Within, c[2].High)
	}
	close("ci_low of 50/50", c[2].Low, lo50)
}
