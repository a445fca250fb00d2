package measures_test

import (
	"strings"
	"testing"
)

// Refused arguments (contract 6.12): BAD_USER_INPUT naming what is wrong, and the limits of
// contract 6.10 (LIMITS__MAX_SERIES_POINTS before any statement, LIMITS__MAX_ROWS while
// reading).
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{"LIMITS__MAX_SERIES_POINTS": "1000", "LIMITS__MAX_ROWS": "5"})
	const rng = `start_date: "2024-01-01", end_date: "2024-01-31"`
	is := func(args string) string {
		return `{ interval_stats(` + rng + `, ` + args + `) { count } }`
	}
	pc := func(args string) string {
		return `{ period_comparison(` + rng + args + `) { rows { change } } }`
	}
	for _, c := range []struct {
		query, code string
		names       []string
	}{
		{is(`from: EN_ROUTE, to: UNIT_NOTIFIED`), "BAD_USER_INPUT", []string{"EN_ROUTE", "UNIT_NOTIFIED"}},
		{is(`from: CALL, to: CALL`), "BAD_USER_INPUT", []string{"CALL"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, fractiles: [0.5, 1.5]`), "BAD_USER_INPUT", []string{"fractiles[1]"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, fractiles: [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]`), "BAD_USER_INPUT", []string{"fractiles", "10"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, targets: [60, -1]`), "BAD_USER_INPUT", []string{"targets[1]"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, targets: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]`), "BAD_USER_INPUT", []string{"targets", "10"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, confidence: 1`), "BAD_USER_INPUT", []string{"confidence"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, confidence: 0`), "BAD_USER_INPUT", []string{"confidence"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, max_seconds: 0`), "BAD_USER_INPUT", []string{"max_seconds"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, min_cell: 1001`), "BAD_USER_INPUT", []string{"min_cell"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, min_cell: -1`), "BAD_USER_INPUT", []string{"min_cell"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, group_by: ["nope"]`), "BAD_USER_INPUT", []string{"group_by[0]", "nope"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, filters: [{column: "distance", operator: CONTAINS, value: "1"}]`), "BAD_USER_INPUT", []string{"filters[0]", "CONTAINS"}},
		{`{ interval_stats(start_date: "2024-02-30", end_date: "2024-03-01", from: CALL, to: ARRIVED_ON_SCENE) { count } }`, "BAD_USER_INPUT", []string{"start_date"}},
		{is(`from: CALL, to: ARRIVED_ON_SCENE, group_by: ["station"], bucket: DAY`), "RESULT_TOO_LARGE", []string{"LIMITS__MAX_ROWS"}},
		{`{ demand_grid(` + rng + `, percentiles: [2]) { total } }`, "BAD_USER_INPUT", []string{"percentiles[0]"}},
		{`{ demand_grid(` + rng + `, min_cell: 5000) { total } }`, "BAD_USER_INPUT", []string{"min_cell"}},
		{`{ demand_grid(start_date: "2024-01-01", end_date: "2024-02-11") { total } }`, "BAD_USER_INPUT", []string{"LIMITS__MAX_SERIES_POINTS"}},
		{pc(`, from: CALL`), "BAD_USER_INPUT", []string{"from", "to"}},
		{pc(`, to: EN_ROUTE`), "BAD_USER_INPUT", []string{"from", "to"}},
		{pc(`, target: 60`), "BAD_USER_INPUT", []string{"target"}},
		{pc(`, fractile: 1.5`), "BAD_USER_INPUT", []string{"fractile"}},
		{pc(`, from: LEFT_SCENE, to: CALL`), "BAD_USER_INPUT", []string{"LEFT_SCENE", "CALL"}},
		{pc(`, group_by: "nope"`), "BAD_USER_INPUT", []string{"group_by", "nope"}},
		{pc(`, from: CALL, to: ARRIVED_ON_SCENE, max_seconds: -5`), "BAD_USER_INPUT", []string{"max_seconds"}},
		{`{ unit_hour_utilization(start_date: "2024-02-01", end_date: "2024-01-01") { uhu } }`, "BAD_USER_INPUT", []string{"start_date"}},
	} {
		code, msg := errorsOf(t, e.svc, e.svc.Key, "/graphql", c.query, nil)
		if code != c.code {
			t.Errorf("%s: code %s, want %s (%s)", c.query, code, c.code, msg)
			continue
		}
		for _, n := range c.names {
			if !strings.Contains(msg, n) {
				t.Errorf("%s: message does not name %s: %s", c.query, n, msg)
			}
		}
	}
	// 41 days are 984 hours, within LIMITS__MAX_SERIES_POINTS=1000.
	e.ask(t, `{ demand_grid(start_date: "2024-01-01", end_date: "2024-02-10") { total } }`, nil, "demand_grid")
}
