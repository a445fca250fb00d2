package measures_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/schema"
)

// The optional time columns and fact_unit_shift (contract 6.12.6), found at start-up.

const timePointsQuery = `{ time_points { name available source } }`

type timePoint struct {
	Name      string  `json:"name"`
	Available bool    `json:"available"`
	Source    *string `json:"source"`
}

func timePoints(t *testing.T, svc *servicetest.Service) []timePoint {
	t.Helper()
	var out []timePoint
	if err := json.Unmarshal(svc.Field(t, "/lookups/graphql", timePointsQuery, nil, "time_points"), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

var timeline = []string{"CALL", "UNIT_NOTIFIED", "EN_ROUTE", "ARRIVED_ON_SCENE", "AT_PATIENT", "FIRST_OXYGEN",
	"LEFT_SCENE", "AT_DESTINATION", "TRANSFER_OF_CARE", "BACK_IN_SERVICE"}

func TestExtensionsFoundAtStartUp(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t, false)
	// A column of the right name and another type: ignored, with one warning naming it.
	exec(t, db, `ALTER TABLE fact_record ADD COLUMN en_route_at timestamptz;
		CREATE TABLE fact_unit_shift (resource_id integer NOT NULL, shift_start timestamp NOT NULL, shift_end text NOT NULL)`)
	svc := startOn(t, db, nil)

	core := map[string]string{"CALL": "r.occurred_at", "ARRIVED_ON_SCENE": "r.occurred_at + r.response_time_s * interval '1 second'",
		"FIRST_OXYGEN": "(SELECT min(o.administered_at) FROM fact_oxygen o WHERE o.record_id = r.record_id)"}
	points := timePoints(t, svc)
	if len(points) != len(timeline) {
		t.Fatalf("%d time points, want %d", len(points), len(timeline))
	}
	for i, p := range points {
		src, isCore := core[p.Name]
		if p.Name != timeline[i] || p.Available != isCore || isCore && (p.Source == nil || *p.Source != src) || !isCore && p.Source != nil {
			t.Errorf("time point %d: %+v", i, p)
		}
	}
	servicetest.WaitFor(t, 5*time.Second, "warning naming fact_record.en_route_at", func() bool {
		return strings.Contains(svc.Output(), "fact_record.en_route_at")
	})
	for _, column := range []string{"fact_record.en_route_at", "fact_unit_shift.shift_end"} {
		var warnings int
		for _, line := range strings.Split(svc.Output(), "\n") {
			if strings.Contains(line, column) && strings.Contains(line, "WARN") {
				warnings++
			}
		}
		if warnings != 1 {
			t.Errorf("%d warning lines name %s, want 1:\n%s", warnings, column, svc.Output())
		}
	}

	// A lacking point: BAD_USER_INPUT naming the point and the column, before any statement.
	for _, c := range []struct{ from, to, point, column string }{
		{"UNIT_NOTIFIED", "EN_ROUTE", "UNIT_NOTIFIED", "fact_record.unit_notified_at"},
		{"CALL", "EN_ROUTE", "EN_ROUTE", "fact_record.en_route_at"},
		{"ARRIVED_ON_SCENE", "BACK_IN_SERVICE", "BACK_IN_SERVICE", "fact_record.back_in_service_at"},
	} {
		q := `{ interval_stats(start_date: "2024-01-01", end_date: "2024-01-31", from: ` + c.from + `, to: ` + c.to + `) { count } }`
		code, msg := errorsOf(t, svc, svc.Key, "/graphql", q, nil)
		if code != "BAD_USER_INPUT" || !strings.Contains(msg, c.point) || !strings.Contains(msg, c.column) {
			t.Errorf("%s -> %s: %s %s", c.from, c.to, code, msg)
		}
		q = `{ period_comparison(start_date: "2024-01-01", end_date: "2024-01-31", from: ` + c.from + `, to: ` + c.to + `) { rows { change } } }`
		if code, msg := errorsOf(t, svc, svc.Key, "/graphql", q, nil); code != "BAD_USER_INPUT" || !strings.Contains(msg, c.column) {
			t.Errorf("period_comparison %s -> %s: %s %s", c.from, c.to, code, msg)
		}
	}
	q := `{ unit_hour_utilization(start_date: "2024-01-01", end_date: "2024-01-31") { uhu } }`
	if code, msg := errorsOf(t, svc, svc.Key, "/graphql", q, nil); code != "BAD_USER_INPUT" || !strings.Contains(msg, "fact_unit_shift") || !strings.Contains(msg, "shift_end") {
		t.Errorf("unit_hour_utilization without the table: %s %s", code, msg)
	}
	// The core points work.
	e := env{db: db, svc: svc, pool: db.Pool(t)}
	c := intervalCase{from: "ARRIVED_ON_SCENE", to: "FIRST_OXYGEN", start: "2024-01-01", end: "2024-12-31", targets: []float64{60}}
	want, _ := e.expectIntervals(t, c)
	sameAnswer(t, "core points", e.ask(t, intervalQuery, c.vars(), "interval_stats"), want)

	// The ETL adds the extensions: the catalog is read at start-up only, so the running service
	// still lacks them; after a restart it has them.
	exec(t, db, `ALTER TABLE fact_record DROP COLUMN en_route_at; DROP TABLE fact_unit_shift`)
	script := schema.MeasuresDDL
	for _, stmt := range strings.Split(measuresSQL, ";\n") {
		if strings.Contains(stmt, "UPDATE fact_record") || strings.Contains(stmt, "INSERT INTO fact_unit_shift") {
			script += stmt + ";\n"
		}
	}
	exec(t, db, script)
	if p := timePoints(t, svc); p[1].Available {
		t.Errorf("the running service found UNIT_NOTIFIED without a restart: %+v", p[1])
	}
	svc.Signal(syscall.SIGTERM)
	if _, err := svc.Wait(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	e.svc = startOn(t, db, nil)
	for i, p := range timePoints(t, e.svc) {
		if !p.Available || p.Source == nil {
			t.Errorf("after the restart, time point %d: %+v", i, p)
		}
	}
	c = intervalCase{from: "UNIT_NOTIFIED", to: "EN_ROUTE", start: "2023-01-01", end: "2024-12-31", groupBy: []string{"station"}, targets: []float64{60}, maxSeconds: ptr(300.0)}
	want, _ = e.expectIntervals(t, c)
	sameAnswer(t, "turnout after the restart", e.ask(t, intervalQuery, c.vars(), "interval_stats"), want)
	got := e.ask(t, `{ unit_hour_utilization(start_date: "2024-03-01", end_date: "2024-03-31") { resource_id unit_hours responses transports uhu } }`, nil, "unit_hour_utilization")
	sameAnswer(t, "unit hours after the restart", got, expectUnitHours(t, e, "2024-03-01", "2024-03-31", false))
}

// expectUnitHours is unit_hour_utilization's answer computed here: each shift's hours inside
// the range clipped with greatest(0, ...), records joined the plain way.
func expectUnitHours(t *testing.T, e env, start, end string, perResource bool) json.RawMessage {
	t.Helper()
	hours := `greatest(0, extract(epoch FROM least(s.shift_end, $2::date + interval '1 day') - greatest(s.shift_start, $1::date::timestamp)))`
	var q string
	if perResource {
		q = `WITH h AS (SELECT s.resource_id, sum(` + hours + `) / 3600.0 AS hours FROM fact_unit_shift s GROUP BY s.resource_id HAVING sum(` + hours + `) > 0),
x AS (SELECT h.resource_id, h.hours::float8 AS hours,
   (SELECT count(*) FROM fact_record r JOIN dim_resource d ON d.sk_resource = r.sk_resource WHERE d.resource_id = h.resource_id AND r.occurred_at::date BETWEEN $1::date AND $2::date) AS responses,
   (SELECT count(*) FROM fact_record r JOIN dim_resource d ON d.sk_resource = r.sk_resource WHERE d.resource_id = h.resource_id AND r.occurred_at::date BETWEEN $1::date AND $2::date AND r.transported IS TRUE) AS transports
  FROM h)
SELECT coalesce(json_agg(json_build_object('resource_id', resource_id, 'unit_hours', hours, 'responses', responses, 'transports', transports,
  'uhu', transports / hours) ORDER BY resource_id), '[]'::json) FROM x`
	} else {
		q = `WITH x AS (SELECT (SELECT coalesce(sum(` + hours + `), 0) / 3600.0 FROM fact_unit_shift s)::float8 AS hours,
   (SELECT count(*) FROM fact_record r WHERE r.occurred_at::date BETWEEN $1::date AND $2::date) AS responses,
   (SELECT count(*) FROM fact_record r WHERE r.occurred_at::date BETWEEN $1::date AND $2::date AND r.transported IS TRUE) AS transports)
SELECT json_build_array(json_build_object('resource_id', NULL, 'unit_hours', hours, 'responses', responses, 'transports', transports,
  'uhu', CASE WHEN hours > 0 THEN transports / hours END)) FROM x`
	}
	var out json.RawMessage
	if err := e.pool.QueryRow(context.Background(), q, start, end).Scan(&out); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	return out
}

func TestUnitHourUtilizationMatchesSQL(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	const q = `query($start: String!, $end: String!, $per: Boolean) { unit_hour_utilization(start_date: $start, end_date: $end, per_resource: $per) {
		resource_id unit_hours responses transports uhu } }`
	for _, r := range [][2]string{{"2024-03-01", "2024-03-31"}, {"2022-12-31", "2023-01-01"}, {"2024-02-29", "2024-02-29"}, {"2023-01-01", "2024-12-31"}, {"2025-01-01", "2025-01-31"}} {
		for _, per := range []bool{false, true} {
			want := expectUnitHours(t, e, r[0], r[1], per)
			got := e.ask(t, q, map[string]any{"start": r[0], "end": r[1], "per": per}, "unit_hour_utilization")
			sameAnswer(t, r[0]+" "+r[1], got, want)
		}
	}
	// Changes to fact_unit_shift are reflected as the five tables' are (contract 6.5).
	vars := map[string]any{"start": "2024-03-01", "end": "2024-03-31", "per": true}
	before := e.ask(t, q, vars, "unit_hour_utilization")
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO fact_unit_shift VALUES (1003, '2024-03-31 20:00', '2024-04-01 08:00')`); err != nil {
		t.Fatal(err)
	}
	want := expectUnitHours(t, e, "2024-03-01", "2024-03-31", true)
	if string(want) == string(before) {
		t.Fatal("the new shift changes nothing: the case tests nothing")
	}
	servicetest.WaitFor(t, 10*time.Second, "answer with the new shift", func() bool {
		got := e.ask(t, q, vars, "unit_hour_utilization")
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal(want, &w)
		_, ok := near(g, w, "")
		return ok
	})
}

// Each measure is a live answer too (contract 6.11): the first event is the query's answer,
// the next the answer after a load.
func TestMeasuresLive(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	for _, c := range []struct{ field, query string }{
		{"interval_stats", `interval_stats(start_date: "2024-05-01", end_date: "2024-05-31", from: UNIT_NOTIFIED, to: EN_ROUTE, targets: [60]) { count measured fractiles { value } compliance { within share } }`},
		{"demand_grid", `demand_grid(start_date: "2024-05-01", end_date: "2024-05-31", percentiles: [0.9]) { total cells { count } }`},
		{"period_comparison", `period_comparison(start_date: "2024-05-01", end_date: "2024-05-31", group_by: "station") { rows { value current { count } change } }`},
		{"unit_hour_utilization", `unit_hour_utilization(start_date: "2024-05-01", end_date: "2024-05-31") { unit_hours responses uhu }`},
	} {
		t.Run(c.field, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"query": "subscription { " + c.query + " }"})
			req, err := http.NewRequest(http.MethodPost, e.svc.URL+"/graphql", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set(e.svc.Header, e.svc.Key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			events := make(chan json.RawMessage, 4)
			go func() {
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 1<<20), 1<<20)
				for sc.Scan() {
					if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
						var ev struct {
							Data map[string]json.RawMessage `json:"data"`
						}
						if json.Unmarshal([]byte(d), &ev) == nil && ev.Data != nil {
							events <- ev.Data[c.field]
						}
					}
				}
				close(events)
			}()
			next := func() json.RawMessage {
				select {
				case ev, ok := <-events:
					if !ok {
						t.Fatal("the stream ended")
					}
					return ev
				case <-time.After(15 * time.Second):
					t.Fatal("no event within 15 s")
				}
				return nil
			}
			first := next()
			want := e.ask(t, "{ "+c.query+" }", nil, c.field)
			if string(first) != string(want) {
				t.Fatalf("first event\n%s\nquery\n%s", first, want)
			}
			id := map[string]int{"interval_stats": 1, "demand_grid": 2, "period_comparison": 3, "unit_hour_utilization": 4}[c.field]
			if _, err := e.pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station, transported, response_time_s, unit_notified_at, en_route_at)
				VALUES ($1, '2024-05-10 10:00', 'Central', true, 300, '2024-05-10 10:00:30', '2024-05-10 10:01:00')`, 600000+id); err != nil {
				t.Fatal(err)
			}
			if _, err := e.pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
				t.Fatal(err)
			}
			second := next()
			if string(second) == string(first) {
				t.Fatal("the second event repeats the first")
			}
			sameAnswer(t, "after the load", second, decodeAny(t, e.ask(t, "{ "+c.query+" }", nil, c.field)))
		})
	}
}

func decodeAny(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
