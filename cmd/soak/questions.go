// The questions the load sends: a fixed mix, and drawn ones that miss the answer cache.

package main

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"
)

// query is one request of the mix.
type query struct {
	name, path, body string
}

// mixStation is the station of the mix's records_count station, which the loads leave alone.
const mixStation = "Ålesund Sør"

// mix is the soak's queries, on the demo data's two years (2024, 2025).
func mix() []query {
	q := func(name, path, gql string) query {
		b, _ := json.Marshal(map[string]any{"query": gql})
		return query{name, path, string(b)}
	}
	return []query{
		q("records_count", "/graphql", `{ records_count { count } }`),
		q("records_count station", "/graphql", `{ records_count(station: "`+mixStation+`") { count } }`),
		q("distinct_values", "/graphql", `{ distinct_values(columns: ["degree_of_urgency", "municipality", "gender"], start_date: "2025-03-01", end_date: "2025-03-31") { column value } }`),
		q("unique_counts", "/graphql", `{ unique_counts(columns: ["degree_of_urgency", "transported"], start_date: "2025-04-01", end_date: "2025-04-30", use_or: true,
			filters: [{column: "distance", operator: GREATER_THAN, value: "50"}, {column: "gender", operator: EQUALS, value: "other"}]) { column value count } }`),
		q("station_resources", "/graphql", `{ station_resources { station_id station_name resources { resource_id } } }`),
		q("main_report", "/serve/graphql", `{ main_report(start_date: "2025-05-01", end_date: "2025-05-31", limit: 100, offset: 200,
			filters: [{column: "degree_of_urgency", operator: EQUALS, value: "A"}]) { total rows { record_id occurred_at station callsign distance transported patient_age oxygen_routes } } }`),
		q("main_report_summary", "/serve/graphql", `{ main_report_summary(start_date: "2025-06-01", end_date: "2025-08-31",
			filters: [{column: "transported", operator: EQUALS, value: "true"}]) { records distinct_resources distinct_patients
			average_distance average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`),
		q("resources", "/graphql", `{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`),
		q("patients page", "/graphql", `{ patients(limit: 500, after: 1000) { sk_patient age date_of_birth gender weight } }`),
		q("oxygens page", "/graphql", `{ oxygens(limit: 500, after: 2000) { sk_oxygen record_id route flow_rate administered_at } }`),
		q("record_series", "/graphql", `{ record_series(start_date: "2025-01-01", end_date: "2025-12-31", bucket: MONTH, group_by: "degree_of_urgency",
			filters: [{column: "degree_of_urgency", operator: IN, values: ["A", "B"]}]) { bucket column value count } }`),
		q("record_stats", "/graphql", `{ record_stats(start_date: "2025-01-01", end_date: "2025-06-30", measure: "response_time_s", group_by: ["degree_of_urgency"],
			bucket: QUARTER, percentiles: [0.5, 0.9], target: 720, filters: [{column: "transported", operator: NOT_EQUALS, value: "false"}])
			{ bucket group { column value } count measured min max avg percentiles { p value } within_target within_target_share } }`),
	}
}

// varyingEvery: one request in this many is a drawn question (newVarying), the others the fixed
// mix in turn.
const varyingEvery = 4

// newVarying returns a generator of questions with drawn values, on the demo data's two years
// and its stations: record_series of a week of two stations (IN), unique_counts of a month
// without one station (NOT_EQUALS), record_stats of two weeks of one station. Nearly every
// series and stats question is new (a miss); the month and station of unique_counts repeat
// (24 months by the stations), so some of those are hits until the next NOTIFY. The seed is
// fixed: every run sends the same questions in the same order.
func newVarying(stations []string) func() query {
	r := mrand.New(mrand.NewPCG(2026, 14))
	var mu sync.Mutex
	first := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	day := func(t time.Time) string { return t.Format(time.DateOnly) }
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return func() query {
		mu.Lock()
		defer mu.Unlock()
		var name, gql string
		switch r.IntN(3) {
		case 0:
			from := first.AddDate(0, 0, r.IntN(731-7))
			a, b := stations[r.IntN(len(stations))], stations[r.IntN(len(stations))]
			name = "record_series drawn"
			gql = fmt.Sprintf(`{ record_series(start_date: %q, end_date: %q, bucket: DAY, filters: [{column: "station", operator: IN, values: [%s, %s]}]) { bucket count } }`,
				day(from), day(from.AddDate(0, 0, 6)), quote(a), quote(b))
		case 1:
			from := first.AddDate(0, r.IntN(24), 0)
			name = "unique_counts drawn"
			gql = fmt.Sprintf(`{ unique_counts(columns: ["degree_of_urgency", "transported"], start_date: %q, end_date: %q, filters: [{column: "station", operator: NOT_EQUALS, value: %s}]) { column value count } }`,
				day(from), day(from.AddDate(0, 1, -1)), quote(stations[r.IntN(len(stations))]))
		default:
			from := first.AddDate(0, 0, r.IntN(731-14))
			name = "record_stats drawn"
			gql = fmt.Sprintf(`{ record_stats(start_date: %q, end_date: %q, measure: "response_time_s", group_by: ["degree_of_urgency"], target: 720, filters: [{column: "station", operator: EQUALS, value: %s}]) { group { value } count measured avg percentiles { p value } within_target } }`,
				day(from), day(from.AddDate(0, 0, 13)), quote(stations[r.IntN(len(stations))]))
		}
		b, _ := json.Marshal(map[string]any{"query": gql})
		return query{name, "/graphql", string(b)}
	}
}
