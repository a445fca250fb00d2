package main

// The EMS performance measures (contract 6.12) on the demo data with the time columns and unit
// shifts of schema/measures.sql, each beside the SQL a DBA would write for the same question:
// the figures, the fractiles and the Wilson interval of the share within a target computed by
// the database, one statement per question.

// wilsonSQL is the Wilson score interval at 95 % (z = 1.959963984540054) of within out of n,
// columns ci_low and ci_high, for the FROM list of a statement that has within and n (contract
// 6.12.2: exactly 0 and 1 at the ends; NULL when n is 0).
const wilsonSQL = `CROSS JOIN LATERAL (SELECT within::float8 / nullif(n, 0) AS p, n::float8 AS nf, 1.959963984540054::float8 AS z) AS w
CROSS JOIN LATERAL (SELECT CASE WHEN within = 0 THEN 0 ELSE (p + z*z/(2*nf) - z*sqrt(p*(1-p)/nf + z*z/(4*nf*nf))) / (1 + z*z/nf) END AS ci_low,
                           CASE WHEN within = n THEN 1 ELSE (p + z*z/(2*nf) + z*sqrt(p*(1-p)/nf + z*z/(4*nf*nf))) / (1 + z*z/nf) END AS ci_high
                    WHERE n > 0) AS ci`

var measureWorkloads = []workload{
	{
		Name: "interval_stats", What: "turnout by station, one month, p90 and NFPA 1710's 60 s with its Wilson interval", Warm: []int{16},
		Path: "/graphql",
		Query: `{ interval_stats(start_date: "2025-03-01", end_date: "2025-03-31", from: UNIT_NOTIFIED, to: EN_ROUTE, group_by: ["station"], fractiles: [0.9], targets: [60]) ` +
			`{ group { column value } count measured excluded min max avg fractiles { p value } compliance { target within share ci_low ci_high suppressed } suppressed } }`,
		Hand: handWritten{
			SQL: `WITH g AS (
  SELECT station, count(*) AS count,
         count(*) FILTER (WHERE s >= 0) AS n, count(*) FILTER (WHERE s < 0) AS excluded,
         min(s) FILTER (WHERE s >= 0) AS min, max(s) FILTER (WHERE s >= 0) AS max, avg(s) FILTER (WHERE s >= 0) AS avg,
         percentile_disc(0.9) WITHIN GROUP (ORDER BY s) FILTER (WHERE s >= 0) AS p90,
         count(*) FILTER (WHERE s >= 0 AND s <= 60) AS within
  FROM (SELECT station, extract(epoch FROM en_route_at - unit_notified_at)::float8 AS s
        FROM fact_record WHERE ` + march2025 + `) AS r
  GROUP BY station)
SELECT g.*, w.p AS share, ci.ci_low, ci.ci_high
FROM g ` + wilsonSQL + `
ORDER BY station NULLS LAST`,
			answer: intervalStatsAnswer(0.9, 60),
		},
	},
	{
		Name: "demand_grid", What: "calls by hour of the week, one year, p50 and p90 of the hourly counts", Warm: []int{16},
		Path: "/graphql",
		Query: `{ demand_grid(start_date: "2025-01-01", end_date: "2025-12-31", percentiles: [0.5, 0.9]) ` +
			`{ hours total cells { day_of_week hour_of_day hours count mean_per_hour max_per_hour percentiles { p value } suppressed } } }`,
		// Every hour of the year, zeros included, with its count; then the 168 hours of the week.
		Hand: handWritten{
			SQL: `WITH per_hour AS (
  SELECT h, coalesce(c.n, 0) AS n
  FROM generate_series(timestamp '2025-01-01', timestamp '2025-12-31 23:00', interval '1 hour') AS h
  LEFT JOIN (SELECT date_trunc('hour', occurred_at) AS hour, count(*) AS n FROM fact_record WHERE ` + year2025 + ` GROUP BY 1) AS c
    ON c.hour = h)
SELECT extract(isodow FROM h)::int AS day_of_week, extract(hour FROM h)::int AS hour_of_day,
       count(*) AS hours, sum(n) AS count, avg(n)::float8 AS mean_per_hour, max(n) AS max_per_hour,
       percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY n) AS p50_p90,
       sum(count(*)) OVER () AS all_hours, sum(sum(n)) OVER () AS total
FROM per_hour
GROUP BY 1, 2
ORDER BY 1, 2`,
			answer: demandGridAnswer([]float64{0.5, 0.9}),
		},
	},
	{
		Name: "period_comparison", What: "March 2025 against March 2024 by station, response p90 and share within 480 s", Warm: []int{16},
		Path: "/graphql",
		Query: `{ period_comparison(start_date: "2025-03-01", end_date: "2025-03-31", group_by: "station", from: CALL, to: ARRIVED_ON_SCENE, target: 480) ` +
			`{ current_start current_end previous_start previous_end rows { column value change change_ratio ` +
			`current { count measured fractile share suppressed } previous { count measured fractile share suppressed } } } }`,
		// CALL to ARRIVED_ON_SCENE is response_time_s, as the DBA knows.
		Hand: handWritten{
			SQL: `SELECT station,
       count(*) FILTER (WHERE cur) AS c_count, count(*) FILTER (WHERE cur AND s >= 0) AS c_measured,
       percentile_disc(0.9) WITHIN GROUP (ORDER BY s) FILTER (WHERE cur AND s >= 0) AS c_fractile,
       count(*) FILTER (WHERE cur AND s >= 0 AND s <= 480)::float8 / nullif(count(*) FILTER (WHERE cur AND s >= 0), 0) AS c_share,
       count(*) FILTER (WHERE NOT cur) AS p_count, count(*) FILTER (WHERE NOT cur AND s >= 0) AS p_measured,
       percentile_disc(0.9) WITHIN GROUP (ORDER BY s) FILTER (WHERE NOT cur AND s >= 0) AS p_fractile,
       count(*) FILTER (WHERE NOT cur AND s >= 0 AND s <= 480)::float8 / nullif(count(*) FILTER (WHERE NOT cur AND s >= 0), 0) AS p_share
FROM (SELECT station, occurred_at >= '2025-03-01' AS cur, response_time_s::float8 AS s
      FROM fact_record
      WHERE ` + march2025 + ` OR (occurred_at >= '2024-03-01' AND occurred_at < '2024-04-01')) AS r
GROUP BY station
ORDER BY station NULLS LAST`,
			answer: periodComparisonAnswer("station", "2025-03-01", "2025-03-31", "2024-03-01", "2024-03-31"),
		},
	},
	{
		Name: "unit_hour_utilization", What: "per unit, one year: staffed hours, responses, transports", Warm: []int{16},
		Path:  "/graphql",
		Query: `{ unit_hour_utilization(start_date: "2025-01-01", end_date: "2025-12-31", per_resource: true) { resource_id unit_hours responses transports uhu } }`,
		Hand: handWritten{
			SQL: `WITH h AS (
  SELECT resource_id,
         sum(extract(epoch FROM least(shift_end, timestamp '2026-01-01') - greatest(shift_start, timestamp '2025-01-01')))::float8 / 3600 AS unit_hours
  FROM fact_unit_shift
  WHERE shift_start < '2026-01-01' AND shift_end > '2025-01-01'
  GROUP BY resource_id),
r AS (
  SELECT d.resource_id, count(*) AS responses, count(*) FILTER (WHERE f.transported) AS transports
  FROM fact_record f JOIN dim_resource d ON d.sk_resource = f.sk_resource
  WHERE f.` + year2025 + `
  GROUP BY d.resource_id)
SELECT h.resource_id, h.unit_hours, coalesce(r.responses, 0) AS responses, coalesce(r.transports, 0) AS transports,
       coalesce(r.transports, 0) / nullif(h.unit_hours, 0) AS uhu
FROM h LEFT JOIN r ON r.resource_id = h.resource_id
ORDER BY h.resource_id`,
			answer: rowsAnswer("resource_id", "unit_hours", "responses", "transports", "uhu"),
		},
	},
}

// intervalStatsAnswer: interval_stats' objects grouped by station, one fractile p and one
// target, nothing suppressed.
func intervalStatsAnswer(p, target float64) func(*resultRows, func(any)) {
	return func(r *resultRows, emit func(any)) {
		if !r.next() {
			return
		}
		for r.row() {
			m := obj("group", []any{obj("column", "station", "value", r.text("station"))},
				"count", r.json("count"), "measured", r.json("n"), "excluded", r.json("excluded"),
				"min", r.json("min"), "max", r.json("max"), "avg", r.json("avg"),
				"fractiles", []any{obj("p", p, "value", r.json("p90"))},
				"compliance", []any{obj("target", target, "within", r.json("within"), "share", r.json("share"),
					"ci_low", r.json("ci_low"), "ci_high", r.json("ci_high"), "suppressed", false)},
				"suppressed", false)
			emit(m)
		}
	}
}

// demandGridAnswer: the grid, its 168 cells from the rows, nothing suppressed.
func demandGridAnswer(ps []float64) func(*resultRows, func(any)) {
	return func(r *resultRows, emit func(any)) {
		if !r.next() {
			return
		}
		grid := obj("cells", []any{})
		cells := []any{}
		for r.row() {
			grid["hours"], grid["total"] = r.json("all_hours"), r.json("total")
			values, _ := r.json("p50_p90").([]any)
			pcts := make([]any, len(ps))
			for i, p := range ps {
				var v any
				if i < len(values) {
					v = values[i]
				}
				pcts[i] = obj("p", p, "value", v)
			}
			cells = append(cells, obj("day_of_week", r.json("day_of_week"), "hour_of_day", r.json("hour_of_day"),
				"hours", r.json("hours"), "count", r.json("count"), "mean_per_hour", r.json("mean_per_hour"),
				"max_per_hour", r.json("max_per_hour"), "percentiles", pcts, "suppressed", false))
		}
		grid["cells"] = cells
		emit(grid)
	}
}

// periodComparisonAnswer: the four dates and a row per value of column, from the rows' c_ and
// p_ figures.
func periodComparisonAnswer(column, curStart, curEnd, prevStart, prevEnd string) func(*resultRows, func(any)) {
	return func(r *resultRows, emit func(any)) {
		if !r.next() {
			return
		}
		rows := []any{}
		figures := func(prefix string) map[string]any {
			return obj("count", r.json(prefix+"count"), "measured", r.json(prefix+"measured"),
				"fractile", r.json(prefix+"fractile"), "share", r.json(prefix+"share"), "suppressed", false)
		}
		for r.row() {
			cur, prev := figures("c_"), figures("p_")
			c, _ := cur["count"].(float64)
			p, _ := prev["count"].(float64)
			var ratio any
			if p != 0 {
				ratio = (c - p) / p
			}
			rows = append(rows, obj("column", column, "value", r.text(column), "current", cur, "previous", prev,
				"change", c-p, "change_ratio", ratio))
		}
		emit(obj("current_start", curStart, "current_end", curEnd, "previous_start", prevStart, "previous_end", prevEnd, "rows", rows))
	}
}
