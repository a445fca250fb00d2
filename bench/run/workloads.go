package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// workload is one realistic request on the demo data (cmd/demodata: records 2024-01-01 to
// 2025-12-31), with the SQL a DBA would write by hand for the same question.
type workload struct {
	Name string
	What string // for the report
	// GraphQL: the endpoint path and the query; or Export: the export's query string.
	Path   string
	Query  string
	Export string
	// Hand is the hand-written baseline (handsql.go).
	Hand handWritten
	// Light marks the workloads whose database work is a fraction of a millisecond; their
	// target is a lower ratio at concurrency 1 (lightRatio).
	Light bool
	// Warm are the concurrencies of the workload's warm lines: the service with its answer cache
	// on, the same question repeated (the warm targets: a dashboard's heavy questions at 16, the
	// light ones at 1 and 16). None: no warm line.
	Warm []int
}

func (w workload) isExport() bool { return w.Export != "" }

const mainReportFields = `record_id occurred_at station callsign resource_id degree_of_urgency distance response_time_s municipality transported patient_age patient_gender oxygen_routes`

// The dates of the workloads, as the hand-written SQL writes them: the contract's inclusive
// end_date is occurred_at < the next day, the form that uses the occurred_at index.
const (
	year2025  = `occurred_at >= '2025-01-01' AND occurred_at < '2026-01-01'`
	march2025 = `occurred_at >= '2025-03-01' AND occurred_at < '2025-04-01'`
)

var workloads = []workload{
	{
		Name: "records_count", What: "all stations",
		Path: "/graphql", Query: `{ records_count { count } }`,
		Hand: handWritten{SQL: `SELECT count(*) FROM fact_record`, answer: countAnswer},
	},
	{
		Name: "records_count_station", What: "one station (Ålesund Sør)", Light: true, Warm: []int{1, 16},
		Path: "/graphql", Query: `{ records_count(station: "Ålesund Sør") { count } }`,
		Hand: handWritten{SQL: `SELECT count(*) FROM fact_record WHERE station = 'Ålesund Sør'`, answer: countAnswer},
	},
	{
		Name: "distinct_values", What: "2 columns, one month", Warm: []int{16},
		Path:  "/graphql",
		Query: `{ distinct_values(columns: ["degree_of_urgency", "municipality"], start_date: "2025-03-01", end_date: "2025-03-31") { column value } }`,
		Hand: handWritten{
			SQL: `SELECT GROUPING(degree_of_urgency, municipality) AS g, degree_of_urgency, municipality
FROM fact_record
WHERE ` + march2025 + `
GROUP BY GROUPING SETS ((degree_of_urgency), (municipality))
ORDER BY g, degree_of_urgency, municipality`,
			answer: groupingSetsAnswer([]string{"degree_of_urgency", "municipality"}, false),
		},
	},
	{
		Name: "unique_counts", What: "3 columns, one year, 2 filters with OR", Warm: []int{16},
		Path: "/graphql",
		Query: `{ unique_counts(columns: ["degree_of_urgency", "transported", "station"], start_date: "2025-01-01", end_date: "2025-12-31", use_or: true, ` +
			`filters: [{column: "distance", operator: GREATER_THAN, value: "50"}, {column: "gender", operator: EQUALS, value: "other"}]) { column value count } }`,
		Hand: handWritten{
			SQL: `SELECT GROUPING(r.degree_of_urgency, r.transported, r.station) AS g, r.degree_of_urgency, r.transported, r.station, count(*)
FROM fact_record r LEFT JOIN dim_patient p ON p.sk_patient = r.sk_patient
WHERE r.` + year2025 + ` AND (r.distance > 50 OR p.gender = 'other')
GROUP BY GROUPING SETS ((r.degree_of_urgency), (r.transported), (r.station))
ORDER BY g, count(*) DESC, r.degree_of_urgency, r.transported, r.station`,
			answer: groupingSetsAnswer([]string{"degree_of_urgency", "transported", "station"}, true),
		},
	},
	{
		Name: "record_stats", What: "response_time_s per station per month, one year, p50 and p90",
		Path: "/graphql",
		Query: `{ record_stats(start_date: "2025-01-01", end_date: "2025-12-31", measure: "response_time_s", group_by: ["station"], bucket: MONTH, percentiles: [0.5, 0.9]) ` +
			`{ bucket group { column value } count measured min max avg percentiles { p value } } }`,
		Hand: handWritten{
			SQL: `SELECT to_char(date_trunc('month', occurred_at), 'YYYY-MM') AS month, station,
       count(*) AS count, count(response_time_s) AS measured,
       min(response_time_s) AS min, max(response_time_s) AS max, avg(response_time_s) AS avg,
       percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY response_time_s) AS p50_p90
FROM fact_record
WHERE ` + year2025 + `
GROUP BY date_trunc('month', occurred_at), station
ORDER BY date_trunc('month', occurred_at), station NULLS LAST`,
			answer: statsAnswer("month", "station", []float64{0.5, 0.9}),
		},
	},
	{
		Name: "record_series", What: "per day, one year, by degree_of_urgency",
		Path:  "/graphql",
		Query: `{ record_series(start_date: "2025-01-01", end_date: "2025-12-31", bucket: DAY, group_by: "degree_of_urgency") { bucket column value count } }`,
		// Every day and every urgency that occurs, zeros included, as the contract's answer:
		// the counts, plus a zero for every day and urgency, summed. The first form one would
		// write, the grid of days and urgencies LEFT JOINed to the counts ON c.day = d.day AND
		// c.degree_of_urgency IS NOT DISTINCT FROM u.degree_of_urgency, gives the same answer
		// but spends some 300 ms of every request compiling JIT code at either size: the join
		// can be merged on the day only, the NULL-safe comparison is a join filter, and with the
		// 1,000 rows the planner assumes for any generate_series of timestamps its estimate
		// (cost 0.9 million at 100,000 records, 9 million at 1,000,000) passes every JIT
		// threshold.
		Hand: handWritten{
			SQL: `WITH counts AS (SELECT date_trunc('day', occurred_at) AS day, degree_of_urgency, count(*) AS n
  FROM fact_record WHERE ` + year2025 + ` GROUP BY 1, 2)
SELECT to_char(day, 'YYYY-MM-DD') AS day, degree_of_urgency, sum(n) AS n
FROM (SELECT d.day, u.degree_of_urgency, 0 AS n
      FROM generate_series(timestamp '2025-01-01', timestamp '2025-12-31', interval '1 day') AS d(day)
      CROSS JOIN (SELECT DISTINCT degree_of_urgency FROM counts) AS u
      UNION ALL
      SELECT day, degree_of_urgency, n FROM counts) AS x
GROUP BY x.day, x.degree_of_urgency
ORDER BY x.day, x.degree_of_urgency NULLS LAST`,
			answer: seriesAnswer("day", "degree_of_urgency", "n"),
		},
	},
	{
		Name: "station_resources", What: "every station with its resources", Light: true, Warm: []int{1, 16},
		Path: "/graphql", Query: `{ station_resources { station_id station_name resources { resource_id } } }`,
		Hand: handWritten{
			SQL: `SELECT s.station_id, s.station_name, r.resource_id
FROM dim_station s LEFT JOIN dim_resource r ON r.station_id = s.station_id
ORDER BY s.station_id, r.resource_id, r.sk_resource`,
			answer: stationResourcesAnswer,
		},
	},
	{
		Name: "resources", What: "every resource version", Light: true, Warm: []int{1, 16},
		Path: "/graphql", Query: `{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`,
		Hand: handWritten{
			SQL:    `SELECT * FROM dim_resource ORDER BY sk_resource`,
			answer: rowsAnswer("sk_resource", "resource_id", "callsign", "station_id", "station", "valid_from", "valid_to"),
		},
	},
	{
		Name: "patients", What: "every patient, all fields",
		Path: "/graphql", Query: `{ patients { sk_patient age date_of_birth gender weight } }`,
		Hand: handWritten{
			SQL:    `SELECT * FROM dim_patient ORDER BY sk_patient`,
			answer: rowsAnswer("sk_patient", "age", "date_of_birth", "gender", "weight"),
		},
	},
	{
		Name: "main_report", What: "one year, page of 100 with total",
		Path:  "/serve/graphql",
		Query: `{ main_report(start_date: "2025-01-01", end_date: "2025-12-31", limit: 100) { total limit offset rows { ` + mainReportFields + ` } } }`,
		Hand: handWritten{
			SQL: `SELECT count(*) FROM fact_record WHERE ` + year2025 + `;
SELECT r.record_id, r.occurred_at, r.station, res.callsign, res.resource_id, r.degree_of_urgency, r.distance,
       r.response_time_s, r.municipality, r.transported, p.age AS patient_age, p.gender AS patient_gender,
       ARRAY(SELECT DISTINCT o.route FROM fact_oxygen o WHERE o.record_id = r.record_id AND o.route IS NOT NULL ORDER BY 1) AS oxygen_routes
FROM fact_record r
LEFT JOIN dim_resource res ON res.sk_resource = r.sk_resource
LEFT JOIN dim_patient p ON p.sk_patient = r.sk_patient
WHERE r.` + year2025 + `
ORDER BY r.occurred_at, r.record_id
LIMIT 100`,
			answer: mainReportAnswer(100),
		},
	},
	{
		Name: "main_report_summary", What: "one year", Warm: []int{16},
		Path: "/serve/graphql",
		Query: `{ main_report_summary(start_date: "2025-01-01", end_date: "2025-12-31") { records distinct_resources distinct_patients average_distance ` +
			`average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`,
		Hand: handWritten{
			SQL: `SELECT count(*) AS records, count(DISTINCT res.resource_id) AS distinct_resources, count(DISTINCT r.sk_patient) AS distinct_patients,
       avg(r.distance) AS average_distance, avg(r.response_time_s) AS average_response_time_s,
       count(*) FILTER (WHERE r.transported) AS transported, avg(r.transported::int) AS transported_share
FROM fact_record r LEFT JOIN dim_resource res ON res.sk_resource = r.sk_resource
WHERE r.` + year2025 + `;
SELECT degree_of_urgency AS value, count(*) FROM fact_record WHERE ` + year2025 + ` GROUP BY 1 ORDER BY 1;
SELECT station AS value, count(*) FROM fact_record WHERE ` + year2025 + ` GROUP BY 1 ORDER BY 1`,
			answer: summaryAnswer,
		},
	},
	{
		Name: "export", What: "CSV, one year (vs COPY on a kept session)",
		Export: "start_date=2025-01-01&end_date=2025-12-31",
		// The routes joined by one aggregate over fact_oxygen rather than a subquery per row:
		// the faster of the two for a year of records (reports.oxygenRoutesJoin measured it).
		Hand: handWritten{SQL: `SELECT r.record_id, r.occurred_at, r.station, res.callsign, res.resource_id, r.degree_of_urgency, r.distance,
       r.response_time_s, r.municipality, r.transported::text AS transported, p.age AS patient_age, p.gender AS patient_gender,
       o.routes AS oxygen_routes
FROM fact_record r
LEFT JOIN dim_resource res ON res.sk_resource = r.sk_resource
LEFT JOIN dim_patient p ON p.sk_patient = r.sk_patient
LEFT JOIN (SELECT record_id, string_agg(DISTINCT route, '; ' ORDER BY route) AS routes FROM fact_oxygen GROUP BY record_id) o ON o.record_id = r.record_id
WHERE r.` + year2025 + `
ORDER BY r.occurred_at, r.record_id`},
	},
}

// The answers the hand-written SQL's rows make, in the service's JSON shapes.

func obj(kv ...any) map[string]any {
	m := make(map[string]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// countAnswer: {count}.
func countAnswer(r *resultRows, emit func(any)) {
	if r.next() && r.row() {
		emit(obj("count", r.json("count")))
	}
}

// rowsAnswer: one object per row with the named columns.
func rowsAnswer(cols ...string) func(*resultRows, func(any)) {
	return func(r *resultRows, emit func(any)) {
		if !r.next() {
			return
		}
		for r.row() {
			m := make(map[string]any, len(cols))
			for _, c := range cols {
				m[c] = r.json(c)
			}
			emit(m)
		}
	}
}

// groupingSetsAnswer: {column value [count]} per row of GROUP BY GROUPING SETS ((c1), (c2), ...)
// with g = GROUPING(c1, c2, ...): the set of column i has every bit but bit n-1-i set.
func groupingSetsAnswer(cols []string, withCount bool) func(*resultRows, func(any)) {
	return func(r *resultRows, emit func(any)) {
		if !r.next() {
			return
		}
		n := len(cols)
		for r.row() {
			g, col := r.int("g"), -1
			for i := range cols {
				if g == (1<<n-1)&^(1<<(n-1-i)) {
					col = i
				}
			}
			if col < 0 {
				r.err = fmt.Errorf("hand-written SQL: unexpected GROUPING %d", g)
				return
			}
			m := obj("column", cols[col], "value", r.text(cols[col]))
			if withCount {
				m["count"] = r.json("count")
			}
			emit(m)
		}
	}
}

// stationResourcesAnswer: the stations' rows of the LEFT JOIN, one object per station.
func stationResourcesAnswer(r *resultRows, emit func(any)) {
	if !r.next() {
		return
	}
	var cur map[string]any
	for r.row() {
		id := r.json("station_id")
		if cur == nil || cur["station_id"] != id {
			if cur != nil {
				emit(cur)
			}
			cur = obj("station_id", id, "station_name", r.json("station_name"), "resources", []any{})
		}
		if res := r.json("resource_id"); res != nil {
			cur["resources"] = append(cur["resources"].([]any), obj("resource_id", res))
		}
	}
	if cur != nil {
		emit(cur)
	}
}

// mainReportAnswer: {total limit offset rows} from the count and the page.
func mainReportAnswer(limit int) func(*resultRows, func(any)) {
	fields := strings.Fields(mainReportFields)
	return func(r *resultRows, emit func(any)) {
		if !r.next() || !r.row() {
			return
		}
		total := r.json("count")
		rows := []any{}
		if r.next() {
			for r.row() {
				m := make(map[string]any, len(fields))
				for _, f := range fields {
					m[f] = r.json(f)
				}
				if m["oxygen_routes"] == nil {
					m["oxygen_routes"] = []any{}
				}
				rows = append(rows, m)
			}
		}
		emit(obj("total", total, "limit", float64(limit), "offset", 0.0, "rows", rows))
	}
}

// summaryAnswer: the figures and the two breakdowns.
func summaryAnswer(r *resultRows, emit func(any)) {
	if !r.next() || !r.row() {
		return
	}
	m := map[string]any{}
	for _, f := range []string{"records", "distinct_resources", "distinct_patients", "average_distance",
		"average_response_time_s", "transported", "transported_share"} {
		m[f] = r.json(f)
	}
	for _, f := range []string{"by_urgency", "by_station"} {
		list := []any{}
		if r.next() {
			for r.row() {
				list = append(list, obj("value", r.text("value"), "count", r.json("count")))
			}
		}
		m[f] = list
	}
	emit(m)
}

// statsAnswer: record_stats' objects, one per row: the bucket label, the one group column, the
// figures, and the percentiles (a float8 array, NULL when nothing was measured) paired with ps.
func statsAnswer(bucket, group string, ps []float64) func(*resultRows, func(any)) {
	return func(r *resultRows, emit func(any)) {
		if !r.next() {
			return
		}
		for r.row() {
			m := obj("bucket", r.text(bucket), "group", []any{obj("column", group, "value", r.text(group))})
			for _, f := range []string{"count", "measured", "min", "max", "avg"} {
				m[f] = r.json(f)
			}
			values, _ := r.json("p50_p90").([]any)
			pcts := make([]any, len(ps))
			for i, p := range ps {
				var v any
				if i < len(values) {
					v = values[i]
				}
				pcts[i] = obj("p", p, "value", v)
			}
			m["percentiles"] = pcts
			emit(m)
		}
	}
}

// seriesAnswer: record_series' points grouped by one column, one per row.
func seriesAnswer(bucket, group, n string) func(*resultRows, func(any)) {
	return func(r *resultRows, emit func(any)) {
		if !r.next() {
			return
		}
		for r.row() {
			emit(obj("bucket", r.text(bucket), "column", group, "value", r.text(group), "count", r.json(n)))
		}
	}
}

func workloadByName(name string) (workload, bool) {
	for _, w := range allWorkloads() {
		if w.Name == name {
			return w, true
		}
	}
	return workload{}, false
}

// allWorkloads is every workload, the EMS performance measures (measures.go) last.
func allWorkloads() []workload { return append(slices.Clip(workloads), measureWorkloads...) }

const exportPath = "/v1/reports/main-report/export"

// body is the POST body of a GraphQL workload.
func (w workload) body() []byte {
	b, _ := json.Marshal(map[string]string{"query": w.Query})
	return b
}
