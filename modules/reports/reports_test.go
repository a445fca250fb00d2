package reports_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Outside-in tests: the real service binary over HTTP on a fresh database holding the edge-case
// fixture. Every expected answer is computed here with SQL written the plain way (one LEFT JOIN
// per dimension, occurred_at::date BETWEEN, array_agg for the routes), never copied from the
// service's statements and never a constant.

type env struct {
	svc  *servicetest.Service
	pool *pgxpool.Pool
}

func start(t *testing.T, extraSQL string) env {
	t.Helper()
	db := servicetest.FixtureDB(t)
	if extraSQL != "" {
		if err := db.Cluster.Exec(context.Background(), db.Name, extraSQL); err != nil {
			t.Fatalf("extra rows: %v", err)
		}
	}
	return env{svc: servicetest.Start(t, db, nil), pool: db.Pool(t)}
}

// recordsFrom is every record with its resource and patient, under the aliases the conditions
// of the cases use.
const recordsFrom = `fact_record r
  LEFT JOIN dim_resource res ON res.sk_resource = r.sk_resource
  LEFT JOIN dim_patient p ON p.sk_patient = r.sk_patient`

// row is a main report row as the GraphQL response has it, and as the test's SQL computes it.
type row struct {
	RecordID        int64    `json:"record_id"`
	OccurredAt      string   `json:"occurred_at"`
	Station         *string  `json:"station"`
	Callsign        *string  `json:"callsign"`
	ResourceID      *int32   `json:"resource_id"`
	DegreeOfUrgency *string  `json:"degree_of_urgency"`
	Distance        *float64 `json:"distance"`
	ResponseTimeS   *int32   `json:"response_time_s"`
	Municipality    *string  `json:"municipality"`
	Transported     *bool    `json:"transported"`
	PatientAge      *int32   `json:"patient_age"`
	PatientGender   *string  `json:"patient_gender"`
	OxygenRoutes    []string `json:"oxygen_routes"`
}

// reportColumns are the fields of a row, in the order of the schema and of the CSV header.
var reportColumns = []string{"record_id", "occurred_at", "station", "callsign", "resource_id", "degree_of_urgency",
	"distance", "response_time_s", "municipality", "transported", "patient_age", "patient_gender", "oxygen_routes"}

const rowFields = `record_id occurred_at station callsign resource_id degree_of_urgency distance
  response_time_s municipality transported patient_age patient_gender oxygen_routes`

// expectedRowsSQL is the main report by definition; %s is the case's condition.
const expectedRowsSQL = `SELECT r.record_id, r.occurred_at::text, r.station, res.callsign, res.resource_id,
  r.degree_of_urgency, r.distance::float8, r.response_time_s, r.municipality, r.transported, p.age, p.gender,
  COALESCE((SELECT array_agg(DISTINCT o.route ORDER BY o.route) FROM fact_oxygen o
            WHERE o.record_id = r.record_id AND o.route IS NOT NULL), '{}')
FROM ` + recordsFrom + `
WHERE r.occurred_at::date BETWEEN $1::date AND $2::date AND (%s)
ORDER BY r.occurred_at, r.record_id`

func expectedRows(t *testing.T, pool *pgxpool.Pool, c reportCase) []row {
	t.Helper()
	rows, err := pool.Query(context.Background(), fmt.Sprintf(expectedRowsSQL, c.condition()), c.start, c.end)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.RecordID, &x.OccurredAt, &x.Station, &x.Callsign, &x.ResourceID, &x.DegreeOfUrgency,
			&x.Distance, &x.ResponseTimeS, &x.Municipality, &x.Transported, &x.PatientAge, &x.PatientGender, &x.OxygenRoutes)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reportCase is one set of arguments of main_report, main_report_summary and the export, with
// the SQL condition (over r, res, p) that its filters mean.
type reportCase struct {
	name       string
	start, end string
	useOr      bool
	filters    [][3]string // column, operator, value
	cond       string      // "" = true
	nonEmpty   bool        // guard against vacuous cases
}

func (c reportCase) condition() string {
	if c.cond == "" {
		return "true"
	}
	return c.cond
}

// vars are the GraphQL variables of the case. A filter's third part is its value; for IN and
// NOT_IN, the JSON array of its values (as the export's syntax has it); for IS_NULL and
// IS_NOT_NULL, nothing.
func (c reportCase) vars() map[string]any {
	fs := make([]map[string]any, len(c.filters))
	for i, f := range c.filters {
		fs[i] = map[string]any{"column": f[0], "operator": f[1]}
		switch f[1] {
		case "IS_NULL", "IS_NOT_NULL":
		case "IN", "NOT_IN":
			var values []string
			if err := json.Unmarshal([]byte(f[2]), &values); err != nil {
				panic("test bug: " + f[2] + " is not a JSON array of strings")
			}
			fs[i]["values"] = values
		default:
			fs[i]["value"] = f[2]
		}
	}
	return map[string]any{"start": c.start, "end": c.end, "useOr": c.useOr, "filters": fs}
}

var cases = []reportCase{
	{name: "march, no filters", start: "2024-03-01", end: "2024-03-31", nonEmpty: true},
	{name: "everything", start: "2000-01-01", end: "2030-12-31", nonEmpty: true},
	{name: "one day, both ends inclusive", start: "2024-03-31", end: "2024-03-31", nonEmpty: true},
	{name: "station with quote, comma and non-ASCII", start: "2024-01-01", end: "2024-12-31",
		filters: [][3]string{{"station", "EQUALS", `Ålesund Sør, "Kai" 1's`}},
		cond:    `r.station = $q$Ålesund Sør, "Kai" 1's$q$`, nonEmpty: true},
	{name: "station with newline", start: "2024-03-01", end: "2024-03-31",
		filters: [][3]string{{"station", "EQUALS", "Fjord\nside"}}, cond: `r.station = E'Fjord\nside'`, nonEmpty: true},
	{name: "numbers and booleans (AND)", start: "2024-03-01", end: "2024-03-31",
		filters: [][3]string{{"distance", "GREATER_THAN", "9.5"}, {"transported", "EQUALS", "true"}},
		cond:    `r.distance > 9.5 AND r.transported`, nonEmpty: true},
	{name: "joined columns (OR)", start: "2024-03-01", end: "2024-03-31", useOr: true,
		filters: [][3]string{{"callsign", "EQUALS", "AMB 1-2"}, {"gender", "EQUALS", "female"}},
		cond:    `res.callsign = 'AMB 1-2' OR p.gender = 'female'`, nonEmpty: true},
	{name: "timestamp and age", start: "2024-01-01", end: "2025-12-31",
		filters: [][3]string{{"occurred_at", "GREATER_THAN_OR_EQUAL", "2024-03-15"}, {"age", "LESS_THAN", "50"}},
		cond:    `r.occurred_at >= '2024-03-15' AND p.age < 50`, nonEmpty: true},
	{name: "resource id with two versions", start: "2024-03-01", end: "2024-03-31",
		filters: [][3]string{{"resource_id", "EQUALS", "1002"}}, cond: `res.resource_id = 1002`, nonEmpty: true},
	{name: "urgency up to B, one filter with use_or", start: "2024-01-01", end: "2025-12-31", useOr: true,
		filters: [][3]string{{"degree_of_urgency", "LESS_THAN_OR_EQUAL", "B"}}, cond: `r.degree_of_urgency <= 'B'`, nonEmpty: true},
	{name: "IN with a comma, quotes and non-ASCII in its values", start: "2024-01-01", end: "2025-12-31",
		filters: [][3]string{{"station", "IN", `["Central", "Ålesund Sør, \"Kai\" 1's", "Nowhere"]`}},
		cond:    `r.station IN ('Central', $q$Ålesund Sør, "Kai" 1's$q$, 'Nowhere')`, nonEmpty: true},
	{name: "NOT_IN and IS_NULL (OR)", start: "2024-01-01", end: "2025-12-31", useOr: true,
		filters: [][3]string{{"degree_of_urgency", "NOT_IN", `["A", "B", "C"]`}, {"callsign", "IS_NULL", ""}},
		cond:    `r.degree_of_urgency NOT IN ('A', 'B', 'C') OR res.callsign IS NULL`, nonEmpty: true},
	{name: "CONTAINS with a wildcard, NOT_EQUALS on a joined integer", start: "2024-01-01", end: "2025-12-31",
		filters: [][3]string{{"municipality", "CONTAINS", "R_V"}, {"age", "NOT_EQUALS", "34"}},
		cond:    `r.municipality ILIKE '%r\_v%' AND p.age <> 34`, nonEmpty: true},
	{name: "IS_NULL on a number, IS_NOT_NULL on a boolean (OR)", start: "2024-01-01", end: "2025-12-31", useOr: true,
		filters: [][3]string{{"distance", "IS_NULL", ""}, {"transported", "IS_NOT_NULL", ""}},
		cond:    `r.distance IS NULL OR r.transported IS NOT NULL`, nonEmpty: true},
	{name: "timestamps IN", start: "2024-01-01", end: "2025-12-31",
		filters: [][3]string{{"occurred_at", "IN", `["2024-03-01 00:00:00", "2024-03-31T23:59:59", "2024-02-29"]`}},
		cond:    `r.occurred_at IN ('2024-03-01 00:00:00', '2024-03-31 23:59:59', '2024-02-29')`, nonEmpty: true},
	{name: "nothing matches", start: "2024-03-01", end: "2024-03-31",
		filters: [][3]string{{"station", "EQUALS", "Nowhere"}}, cond: `r.station = 'Nowhere'`},
}

const mainReportQuery = `query($start: String!, $end: String!, $useOr: Boolean, $filters: [Filter!], $limit: Int, $offset: Int) {
  main_report(start_date: $start, end_date: $end, use_or: $useOr, filters: $filters, limit: $limit, offset: $offset) {
    total limit offset rows { ` + rowFields + ` }
  }
}`

type mainReport struct {
	Total  int64 `json:"total"`
	Limit  int64 `json:"limit"`
	Offset int64 `json:"offset"`
	Rows   []row `json:"rows"`
}

func mainReportOf(t *testing.T, e env, vars map[string]any) mainReport {
	t.Helper()
	var data struct {
		MainReport mainReport `json:"main_report"`
	}
	e.svc.GraphQL(t, "/serve/graphql", mainReportQuery, vars).DataInto(t, &data)
	return data.MainReport
}

func TestMainReportRowsAndTotal(t *testing.T) {
	e := start(t, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := expectedRows(t, e.pool, c)
			if c.nonEmpty && len(want) == 0 {
				t.Fatal("case selects no record; fix the case")
			}
			vars := c.vars()
			vars["limit"] = 1000
			got := mainReportOf(t, e, vars)
			if got.Total != int64(len(want)) {
				t.Errorf("total = %d, want %d", got.Total, len(want))
			}
			if !reflect.DeepEqual(got.Rows, want) && !(len(got.Rows) == 0 && len(want) == 0) {
				t.Errorf("rows differ\n got: %s\nwant: %s", js(got.Rows), js(want))
			}
		})
	}
}

// pagingRows adds 250 records in May 2024, five at each of 50 times, with record ids that do not
// follow time: the order must fall back on record_id for equal times.
const pagingRows = `INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency, distance, transported)
SELECT 1000 + g, timestamp '2024-05-01 06:00' + (g % 50) * interval '7 hours', 'Paging', 'C', g / 10.0, g % 3 = 0
FROM generate_series(1, 250) AS g`

func TestMainReportPaging(t *testing.T) {
	e := start(t, pagingRows)
	c := reportCase{start: "2024-05-01", end: "2024-05-31"}
	want := expectedRows(t, e.pool, c)
	if len(want) != 250 {
		t.Fatalf("paging fixture has %d rows", len(want))
	}
	for i := 1; i < len(want); i++ {
		if want[i].OccurredAt == want[i-1].OccurredAt && want[i].RecordID < want[i-1].RecordID {
			t.Fatal("expected order is not by time, then record id")
		}
	}
	page := func(limit, offset any) mainReport {
		vars := c.vars()
		if limit != nil {
			vars["limit"] = limit
		}
		if offset != nil {
			vars["offset"] = offset
		}
		return mainReportOf(t, e, vars)
	}
	check := func(name string, got mainReport, from, to int, limit, offset int64) {
		t.Helper()
		if got.Total != 250 || got.Limit != limit || got.Offset != offset {
			t.Errorf("%s: total, limit, offset = %d, %d, %d; want 250, %d, %d", name, got.Total, got.Limit, got.Offset, limit, offset)
		}
		exp := want[from:to]
		if len(got.Rows) != len(exp) || (len(exp) > 0 && !reflect.DeepEqual(got.Rows, exp)) {
			t.Errorf("%s: got %d rows %s, want rows %d..%d", name, len(got.Rows), ids(got.Rows), from, to)
		}
	}
	check("defaults", page(nil, nil), 0, 100, 100, 0)
	check("limit 1000", page(1000, nil), 0, 250, 1000, 0)
	check("limit 0 gives only the total", page(0, nil), 0, 0, 0, 0)
	check("last partial page", page(30, 240), 240, 250, 30, 240)
	check("offset at the end", page(30, 250), 250, 250, 30, 250)
	check("offset past the end", page(30, 5000), 250, 250, 30, 5000)
	var all []row
	for off := 0; off < 250; off += 37 {
		all = append(all, page(37, off).Rows...)
	}
	if !reflect.DeepEqual(all, want) {
		t.Errorf("pages of 37 put together differ from all rows: %s", ids(all))
	}

	// Only the total, only the rows: each without the other's work, same answers.
	var onlyTotal struct {
		MainReport struct {
			Total int64 `json:"total"`
		} `json:"main_report"`
	}
	e.svc.GraphQL(t, "/serve/graphql", `{ main_report(start_date: "2024-05-01", end_date: "2024-05-31") { total } }`, nil).DataInto(t, &onlyTotal)
	if onlyTotal.MainReport.Total != 250 {
		t.Errorf("total alone = %d, want 250", onlyTotal.MainReport.Total)
	}
	var onlyRows struct {
		MainReport struct {
			Rows []struct {
				RecordID int64 `json:"record_id"`
			} `json:"rows"`
		} `json:"main_report"`
	}
	e.svc.GraphQL(t, "/serve/graphql", `{ main_report(start_date: "2024-05-01", end_date: "2024-05-31", limit: 3, offset: 4) { rows { record_id } } }`, nil).DataInto(t, &onlyRows)
	if got := onlyRows.MainReport.Rows; len(got) != 3 || got[0].RecordID != want[4].RecordID || got[2].RecordID != want[6].RecordID {
		t.Errorf("rows alone = %v, want record ids of rows 4..6 %s", got, ids(want[4:7]))
	}

	for name, vars := range map[string]map[string]any{
		"limit above the maximum": {"limit": 1001},
		"negative limit":          {"limit": -1},
		"negative offset":         {"offset": -1},
	} {
		v := c.vars()
		for k, x := range vars {
			v[k] = x
		}
		r := e.svc.GraphQL(t, "/serve/graphql", mainReportQuery, v)
		if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" {
			t.Errorf("%s: want one BAD_USER_INPUT error, got %s", name, r.Raw)
		}
	}
}

func TestMainReportBadArguments(t *testing.T) {
	e := start(t, "")
	for _, tc := range []struct {
		name, start, end string
		filters          [][3]string
		mention          string
	}{
		{"impossible date", "2024-02-30", "2024-03-31", nil, "start_date"},
		{"start after end", "2024-04-01", "2024-03-31", nil, "after"},
		{"unknown column", "2024-03-01", "2024-03-31", [][3]string{{"colour", "EQUALS", "red"}}, "colour"},
		{"value of the wrong type", "2024-03-01", "2024-03-31", [][3]string{{"distance", "GREATER_THAN", "far"}}, "far"},
		{"IN without values", "2024-03-01", "2024-03-31", [][3]string{{"station", "EQUALS", "x"}, {"station", "IN", `[]`}}, "filters[1] (IN)"},
		{"CONTAINS on a number", "2024-03-01", "2024-03-31", [][3]string{{"distance", "CONTAINS", "1"}}, "filters[0] (CONTAINS)"},
		{"a list value of the wrong type", "2024-03-01", "2024-03-31", [][3]string{{"age", "NOT_IN", `["1", "old"]`}}, "old"},
	} {
		c := reportCase{start: tc.start, end: tc.end, filters: tc.filters}
		r := e.svc.GraphQL(t, "/serve/graphql", mainReportQuery, c.vars())
		if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" || !strings.Contains(r.Errors[0].Message, tc.mention) {
			t.Errorf("%s: want one BAD_USER_INPUT error mentioning %q, got %s", tc.name, tc.mention, r.Raw)
		}
		r = e.svc.GraphQL(t, "/serve/graphql", summaryQuery, c.vars())
		if len(r.Errors) != 1 || r.Errors[0].Code() != "BAD_USER_INPUT" {
			t.Errorf("summary, %s: want one BAD_USER_INPUT error, got %s", tc.name, r.Raw)
		}
	}
}

const summaryQuery = `query($start: String!, $end: String!, $useOr: Boolean, $filters: [Filter!]) {
  main_report_summary(start_date: $start, end_date: $end, use_or: $useOr, filters: $filters) {` + summaryFields + `}
}`

const summaryFields = `
    records distinct_resources distinct_patients average_distance average_response_time_s
    transported transported_share
    by_urgency { value count } by_station { value count }
  `

type valueCount struct {
	Value *string `json:"value"`
	Count int64   `json:"count"`
}

type summary struct {
	Records              int64        `json:"records"`
	DistinctResources    int64        `json:"distinct_resources"`
	DistinctPatients     int64        `json:"distinct_patients"`
	AverageDistance      *float64     `json:"average_distance"`
	AverageResponseTimeS *float64     `json:"average_response_time_s"`
	Transported          int64        `json:"transported"`
	TransportedShare     *float64     `json:"transported_share"`
	ByUrgency            []valueCount `json:"by_urgency"`
	ByStation            []valueCount `json:"by_station"`
}

func expectedSummary(t *testing.T, pool *pgxpool.Pool, c reportCase) summary {
	t.Helper()
	ctx := context.Background()
	where := fmt.Sprintf(`WHERE r.occurred_at::date BETWEEN $1::date AND $2::date AND (%s)`, c.condition())
	var s summary
	err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT res.resource_id), count(DISTINCT r.sk_patient),
  avg(r.distance)::float8, avg(r.response_time_s)::float8, count(*) FILTER (WHERE r.transported),
  (count(*) FILTER (WHERE r.transported))::float8 / NULLIF(count(r.transported), 0)
FROM `+recordsFrom+` `+where, c.start, c.end).Scan(&s.Records, &s.DistinctResources, &s.DistinctPatients,
		&s.AverageDistance, &s.AverageResponseTimeS, &s.Transported, &s.TransportedShare)
	if err != nil {
		t.Fatal(err)
	}
	breakdown := func(col string) []valueCount {
		rows, err := pool.Query(ctx, `SELECT `+col+`, count(*) FROM `+recordsFrom+` `+where+` GROUP BY 1 ORDER BY 1 NULLS LAST`, c.start, c.end)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[valueCount])
		if err != nil {
			t.Fatal(err)
		}
		if out == nil {
			out = []valueCount{}
		}
		return out
	}
	s.ByUrgency = breakdown("r.degree_of_urgency")
	s.ByStation = breakdown("r.station")
	return s
}

func TestMainReportSummary(t *testing.T) {
	e := start(t, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := expectedSummary(t, e.pool, c)
			if c.nonEmpty && want.Records == 0 {
				t.Fatal("case selects no record; fix the case")
			}
			var data struct {
				S summary `json:"main_report_summary"`
			}
			e.svc.GraphQL(t, "/serve/graphql", summaryQuery, c.vars()).DataInto(t, &data)
			if !reflect.DeepEqual(data.S, want) {
				t.Errorf("summary differs\n got: %s\nwant: %s", js(data.S), js(want))
			}
			if got := mainReportOf(t, e, c.vars()).Total; got != data.S.Records {
				t.Errorf("records %d differs from main_report's total %d", data.S.Records, got)
			}
			// Each part is computed only when asked for, and alone it is the same.
			for _, part := range []struct {
				fields string
				want   any
			}{
				{"records transported_share", map[string]any{"records": want.Records, "transported_share": want.TransportedShare}},
				{"by_urgency { value count }", map[string]any{"by_urgency": want.ByUrgency}},
				{"__typename by_station { value count }", map[string]any{"__typename": "MainReportSummary", "by_station": want.ByStation}},
			} {
				q := strings.Replace(summaryQuery, summaryFields, part.fields, 1)
				var got struct {
					S map[string]any `json:"main_report_summary"`
				}
				e.svc.GraphQL(t, "/serve/graphql", q, c.vars()).DataInto(t, &got)
				var w map[string]any
				if err := json.Unmarshal([]byte(js(part.want)), &w); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.S, w) {
					t.Errorf("summary { %s }\n got: %s\nwant: %s", part.fields, js(got.S), js(w))
				}
			}
		})
	}
}

func TestLookups(t *testing.T) {
	e := start(t, "")
	ctx := context.Background()
	strs := func(q string) []string {
		rows, err := e.pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	type station struct {
		StationID   int32  `json:"station_id"`
		StationName string `json:"station_name"`
	}
	var data struct {
		Stations       []station `json:"stations"`
		Callsigns      []string  `json:"callsigns"`
		Urgencies      []string  `json:"urgencies"`
		Municipalities []string  `json:"municipalities"`
		OxygenRoutes   []string  `json:"oxygen_routes"`
		Genders        []string  `json:"genders"`
	}
	e.svc.GraphQL(t, "/lookups/graphql", `{ stations { station_id station_name } callsigns urgencies municipalities oxygen_routes genders }`, nil).DataInto(t, &data)

	rows, err := e.pool.Query(ctx, `SELECT station_id, station_name FROM dim_station ORDER BY station_name`)
	if err != nil {
		t.Fatal(err)
	}
	stations, err := pgx.CollectRows(rows, pgx.RowToStructByPos[station])
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2]any{
		"stations":       {data.Stations, stations},
		"callsigns":      {data.Callsigns, strs(`SELECT DISTINCT callsign FROM dim_resource ORDER BY 1`)},
		"urgencies":      {data.Urgencies, strs(`SELECT DISTINCT degree_of_urgency FROM fact_record WHERE degree_of_urgency IS NOT NULL ORDER BY 1`)},
		"municipalities": {data.Municipalities, strs(`SELECT DISTINCT municipality FROM fact_record WHERE municipality IS NOT NULL ORDER BY 1`)},
		"oxygen_routes":  {data.OxygenRoutes, strs(`SELECT DISTINCT route FROM fact_oxygen WHERE route IS NOT NULL ORDER BY 1`)},
		"genders":        {data.Genders, strs(`SELECT DISTINCT gender FROM dim_patient WHERE gender IS NOT NULL ORDER BY 1`)},
	} {
		if reflect.ValueOf(pair[1]).Len() < 2 {
			t.Errorf("%s: the fixture should give at least two values", name)
		}
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s = %s, want %s", name, js(pair[0]), js(pair[1]))
		}
	}

	// A station name from the list, sent back as a filter value, selects that station's records.
	for _, s := range data.Stations {
		var n int64
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM fact_record WHERE station = $1`, s.StationName).Scan(&n); err != nil {
			t.Fatal(err)
		}
		c := reportCase{start: "2000-01-01", end: "2030-12-31", filters: [][3]string{{"station", "EQUALS", s.StationName}}}
		if got := mainReportOf(t, e, c.vars()).Total; got != n {
			t.Errorf("station %q: main_report total %d, want %d", s.StationName, got, n)
		}
	}
}

// TestLookupsColumns checks the queryable columns against the database: each type against the
// column's declared type, the operators against the FilterOperator enum, and each column as a
// filter of main_report (EQUALS a value the database has) against an SQL count.
func TestLookupsColumns(t *testing.T) {
	e := start(t, "")
	ctx := context.Background()
	type column struct {
		Name      string   `json:"name"`
		Type      string   `json:"type"`
		Operators []string `json:"operators"`
	}
	var data struct {
		Columns []column `json:"columns"`
		Enum    struct {
			EnumValues []struct {
				Name string `json:"name"`
			} `json:"enumValues"`
		} `json:"__type"`
	}
	e.svc.GraphQL(t, "/lookups/graphql", `{ columns { name type operators } __type(name: "FilterOperator") { enumValues { name } } }`, nil).DataInto(t, &data)
	var operators []string
	for _, v := range data.Enum.EnumValues {
		operators = append(operators, v.Name)
	}
	if len(data.Columns) != 12 || len(operators) != 11 {
		t.Fatalf("got %d columns and %d operators: %s", len(data.Columns), len(operators), js(data))
	}
	// The record's own columns come first where a name exists in several tables (station_id).
	exprs := map[string]string{}
	for _, tbl := range []struct{ name, alias string }{{"dim_patient", "p"}, {"dim_resource", "res"}, {"fact_record", "r"}} {
		rows, err := e.pool.Query(ctx, `SELECT column_name::text, data_type::text FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = $1`, tbl.name)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Type string }])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cols {
			exprs[c.Name] = tbl.alias + "." + c.Name
			exprs[c.Name+" type"] = c.Type
		}
	}
	sqlType := map[string]string{"TEXT": "text", "INTEGER": "integer", "NUMERIC": "numeric", "BOOLEAN": "boolean",
		"TIMESTAMP": "timestamp without time zone"}
	for _, c := range data.Columns {
		expr, ok := exprs[c.Name]
		if !ok {
			t.Errorf("column %s is in no table", c.Name)
			continue
		}
		if sqlType[c.Type] != exprs[c.Name+" type"] {
			t.Errorf("column %s: type %s, the database says %s", c.Name, c.Type, exprs[c.Name+" type"])
		}
		want := operators
		if c.Type != "TEXT" {
			want = slices.DeleteFunc(slices.Clone(operators), func(o string) bool { return o == "CONTAINS" })
		}
		if !slices.Equal(c.Operators, want) {
			t.Errorf("column %s: operators %v, want %v", c.Name, c.Operators, want)
		}
		var value string
		q := `SELECT ` + expr + `::text FROM ` + recordsFrom + ` WHERE ` + expr + ` IS NOT NULL ORDER BY r.record_id LIMIT 1`
		if err := e.pool.QueryRow(ctx, q).Scan(&value); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var n int64
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+recordsFrom+` WHERE `+expr+` = (SELECT `+expr+` FROM `+recordsFrom+` WHERE `+expr+` IS NOT NULL ORDER BY r.record_id LIMIT 1)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		rc := reportCase{start: "2000-01-01", end: "2030-12-31", filters: [][3]string{{c.Name, "EQUALS", value}}}
		r := e.svc.GraphQL(t, "/serve/graphql", mainReportQuery, rc.vars())
		var got struct {
			MainReport mainReport `json:"main_report"`
		}
		r.DataInto(t, &got)
		if got.MainReport.Total != n || n == 0 {
			t.Errorf("filter %s EQUALS %q: total %d, want %d", c.Name, value, got.MainReport.Total, n)
		}
		// Exactly the listed operators are accepted: each with what it takes.
		for _, op := range operators {
			f := map[string]any{"column": c.Name, "operator": op}
			switch op {
			case "IN", "NOT_IN":
				f["values"] = []string{value}
			case "IS_NULL", "IS_NOT_NULL":
			default:
				f["value"] = value
			}
			r := e.svc.GraphQL(t, "/serve/graphql", `query($f: [Filter!]) { main_report(start_date: "2000-01-01", end_date: "2030-12-31", filters: $f) { total } }`,
				map[string]any{"f": []any{f}})
			if listed := slices.Contains(c.Operators, op); listed != (len(r.Errors) == 0) {
				t.Errorf("column %s, operator %s: listed %v, answer %s", c.Name, op, listed, r.Raw)
			} else if !listed && (r.Errors[0].Code() != "BAD_USER_INPUT" || !strings.Contains(r.Errors[0].Message, "filters[0] ("+op+")")) {
				t.Errorf("column %s, operator %s: %s", c.Name, op, r.Raw)
			}
		}
	}
}

// TestEndpointsHaveTheirOwnSchemas: the vendor fields are on their endpoints only.
func TestEndpointsHaveTheirOwnSchemas(t *testing.T) {
	e := start(t, "")
	for _, tc := range []struct{ path, query string }{
		{"/graphql", `{ main_report(start_date: "2024-03-01", end_date: "2024-03-31") { total } }`},
		{"/graphql", `{ stations { station_id } }`},
		{"/serve/graphql", `{ stations { station_id } }`},
		{"/serve/graphql", `{ records_count { count } }`},
		{"/lookups/graphql", `{ main_report_summary(start_date: "2024-03-01", end_date: "2024-03-31") { records } }`},
		{"/lookups/graphql", `{ distinct_values(columns: ["station"], start_date: "2024-03-01", end_date: "2024-03-31") { value } }`},
	} {
		r := e.svc.GraphQL(t, tc.path, tc.query, nil)
		if len(r.Errors) == 0 || r.Errors[0].Code() != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%s %s: want a validation error, got %s", tc.path, tc.query, r.Raw)
		}
	}
	for _, path := range []string{"/serve/graphql", "/lookups/graphql"} {
		r := e.svc.GraphQLWithHeaders(t, path, `{ __typename }`, nil, nil)
		if r.Status != 401 || len(r.Errors) != 1 || r.Errors[0].Code() != "UNAUTHENTICATED" {
			t.Errorf("%s without a key: want 401 UNAUTHENTICATED, got %d %s", path, r.Status, r.Raw)
		}
		resp, body := e.svc.Get(t, path, map[string]string{"Accept": "text/html"})
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), path) {
			t.Errorf("GraphiQL page of %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

func ids(rows []row) string {
	s := make([]string, len(rows))
	for i, r := range rows {
		s[i] = fmt.Sprint(r.RecordID)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
