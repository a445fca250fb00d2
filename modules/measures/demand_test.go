package measures_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// demand_grid (contract 6.12.3) against SQL written the plain way: each hour instance of the
// range counted with its own range condition, the cells joined on extract().

const demandQuery = `query($start: String!, $end: String!, $percentiles: [Float!], $minCell: Int, $filters: [Filter!]) {
  demand_grid(start_date: $start, end_date: $end, percentiles: $percentiles, min_cell: $minCell, filters: $filters) {
    hours total cells { day_of_week hour_of_day hours count mean_per_hour max_per_hour percentiles { p value } suppressed }
  }
}`

// expectDemand is the grid as the database computes it, unsuppressed, as JSON; pred is SQL
// over r (fact_record).
func expectDemand(t *testing.T, e env, start, end string, percentiles []float64, pred string) json.RawMessage {
	t.Helper()
	if pred == "" {
		pred = "true"
	}
	args := []any{start, end, append([]float64{}, percentiles...)}
	var pcs []string
	for _, p := range percentiles {
		args = append(args, p)
		pcs = append(pcs, fmt.Sprintf(`percentile_cont($%d::float8) WITHIN GROUP (ORDER BY p.n)`, len(args)))
	}
	arr := "ARRAY[]::float8[]"
	if len(pcs) > 0 {
		arr = "ARRAY[" + strings.Join(pcs, ", ") + "]"
	}
	q := `WITH inst AS (SELECT h FROM generate_series($1::date::timestamp, $2::date::timestamp + interval '23 hours', interval '1 hour') AS h),
per AS (SELECT i.h, (SELECT count(*) FROM fact_record r WHERE r.occurred_at >= i.h AND r.occurred_at < i.h + interval '1 hour' AND (` + pred + `)) AS n FROM inst i),
agg AS (SELECT c.d, h2.hr, count(p.h) AS hours, coalesce(sum(p.n), 0) AS cnt, max(p.n) AS mx, ` + arr + ` AS pc
  FROM generate_series(1, 7) AS c(d) CROSS JOIN generate_series(0, 23) AS h2(hr)
  LEFT JOIN per p ON extract(isodow FROM p.h) = c.d AND extract(hour FROM p.h) = h2.hr
  GROUP BY c.d, h2.hr)
SELECT json_build_object('hours', (SELECT count(*) FROM inst), 'total', (SELECT sum(cnt) FROM agg),
  'cells', json_agg(json_build_object('day_of_week', d, 'hour_of_day', hr, 'hours', hours, 'count', cnt,
     'mean_per_hour', CASE WHEN hours > 0 THEN cnt::float8 / hours END, 'max_per_hour', mx,
     'percentiles', coalesce((SELECT json_agg(json_build_object('p', u.p, 'value', CASE WHEN hours > 0 THEN u.v END) ORDER BY u.o)
        FROM unnest($3::float8[], pc) WITH ORDINALITY AS u(p, v, o)), '[]'::json),
     'suppressed', false) ORDER BY d, hr))
  FROM agg`
	var out json.RawMessage
	if err := e.pool.QueryRow(context.Background(), q, args...).Scan(&out); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	return out
}

func TestDemandGridMatchesSQL(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	cases := []struct {
		name, start, end string
		percentiles      []float64
		filters          []map[string]any
		pred             string
	}{
		{name: "a year, percentiles with zero hours", start: "2024-01-01", end: "2024-12-31", percentiles: []float64{0, 0.5, 0.9, 1}},
		{name: "a leap February, filtered", start: "2024-02-01", end: "2024-02-29", percentiles: []float64{0.9},
			filters: []map[string]any{{"column": "station", "operator": "EQUALS", "value": "North"}}, pred: `r.station = 'North'`},
		{name: "three days: most cells have no hours", start: "2023-05-10", end: "2023-05-12", percentiles: []float64{0.5}},
		{name: "one day, no percentiles", start: "2023-05-10", end: "2023-05-10"},
		{name: "no records", start: "2021-01-04", end: "2021-01-17", percentiles: []float64{0.9}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := expectDemand(t, e, c.start, c.end, c.percentiles, c.pred)
			vars := map[string]any{"start": c.start, "end": c.end}
			if c.percentiles != nil {
				vars["percentiles"] = c.percentiles
			}
			if c.filters != nil {
				vars["filters"] = c.filters
			}
			got := e.ask(t, demandQuery, vars, "demand_grid")
			sameAnswer(t, c.name, got, want)
			var g struct {
				Cells []struct{ Count int64 }
			}
			if err := json.Unmarshal(got, &g); err != nil || len(g.Cells) != 168 {
				t.Fatalf("%d cells, want 168 (%v)", len(g.Cells), err)
			}
		})
	}
}

// On the nights the clocks change in Europe/Oslo, with the database's TimeZone set to it: the
// skipped hour is an instance without records... or with the records an ETL wrote for it as
// wall-clock time, and the repeated hour one instance holding both hours' records.
func TestDemandGridDaylightSaving(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t, true)
	exec(t, db, fmt.Sprintf(`ALTER DATABASE %q SET TimeZone = 'Europe/Oslo'`, db.Name))
	exec(t, db, `INSERT INTO fact_record (record_id, occurred_at, station) VALUES
		(800001, '2024-03-31 01:59:59', 'Central'), (800002, '2024-03-31 02:30', 'Central'), (800003, '2024-03-31 03:00', 'Central'),
		(800004, '2024-10-27 02:15', 'Central'), (800005, '2024-10-27 02:45', 'Central'), (800006, '2024-10-27 02:59:59', 'Central')`)
	e := env{db: db, svc: nil, pool: db.Pool(t)}
	e.svc = startOn(t, db, nil)
	var zone string
	if err := e.pool.QueryRow(context.Background(), `SHOW TimeZone`).Scan(&zone); err != nil || zone != "Europe/Oslo" {
		t.Fatalf("TimeZone %q (%v), want Europe/Oslo", zone, err)
	}
	for _, week := range [][2]string{{"2024-03-25", "2024-03-31"}, {"2024-10-21", "2024-10-27"}} {
		want := expectDemand(t, e, week[0], week[1], []float64{1}, "")
		got := e.ask(t, demandQuery, map[string]any{"start": week[0], "end": week[1], "percentiles": []float64{1}}, "demand_grid")
		sameAnswer(t, week[0], got, want)
		var g struct {
			Hours int64
			Cells []struct {
				DayOfWeek  int   `json:"day_of_week"`
				HourOfDay  int   `json:"hour_of_day"`
				Hours      int64 `json:"hours"`
				MaxPerHour int64 `json:"max_per_hour"`
			}
		}
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatal(err)
		}
		if g.Hours != 168 {
			t.Errorf("%s: %d hours, want 168 (a wall-clock week)", week[0], g.Hours)
		}
		// Sunday 02:00: the instance holds the records written for it (1 in spring, 3 in autumn).
		sunday2 := g.Cells[6*24+2]
		if sunday2.DayOfWeek != 7 || sunday2.HourOfDay != 2 || sunday2.Hours != 1 {
			t.Fatalf("cell %+v is not Sunday 02:00 with one instance", sunday2)
		}
		wantMax := int64(1)
		if week[0] == "2024-10-21" {
			wantMax = 3
		}
		if sunday2.MaxPerHour < wantMax {
			t.Errorf("%s: Sunday 02:00 max_per_hour %d, want at least %d", week[0], sunday2.MaxPerHour, wantMax)
		}
	}
}
