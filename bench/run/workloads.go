package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// workload is one realistic request on the demo data (cmd/demodata: records 2024-01-01 to
// 2025-12-31).
type workload struct {
	Name string
	What string // for the report
	// GraphQL: the endpoint path and the query; or Export: the export's query string.
	Path   string
	Query  string
	Export string
	// Light marks the workloads whose target is a ratio at concurrency 16 (issue: records_count
	// of one station, station_resources).
	Light bool
}

func (w workload) isExport() bool { return w.Export != "" }

const mainReportFields = `record_id occurred_at station callsign resource_id degree_of_urgency distance response_time_s municipality transported patient_age patient_gender oxygen_routes`

var workloads = []workload{
	{
		Name: "records_count", What: "all stations",
		Path: "/graphql", Query: `{ records_count { count } }`,
	},
	{
		Name: "records_count_station", What: "one station (Ålesund Sør)", Light: true,
		Path: "/graphql", Query: `{ records_count(station: "Ålesund Sør") { count } }`,
	},
	{
		Name: "distinct_values", What: "2 columns, one month",
		Path:  "/graphql",
		Query: `{ distinct_values(columns: ["degree_of_urgency", "municipality"], start_date: "2025-03-01", end_date: "2025-03-31") { column value } }`,
	},
	{
		Name: "unique_counts", What: "3 columns, one year, 2 filters with OR",
		Path: "/graphql",
		Query: `{ unique_counts(columns: ["degree_of_urgency", "transported", "station"], start_date: "2025-01-01", end_date: "2025-12-31", use_or: true, ` +
			`filters: [{column: "distance", operator: GREATER_THAN, value: "50"}, {column: "gender", operator: EQUALS, value: "other"}]) { column value count } }`,
	},
	{
		Name: "station_resources", What: "every station with its resources", Light: true,
		Path: "/graphql", Query: `{ station_resources { station_id station_name resources { resource_id } } }`,
	},
	{
		Name: "resources", What: "every resource version",
		Path: "/graphql", Query: `{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`,
	},
	{
		Name: "patients", What: "every patient, all fields",
		Path: "/graphql", Query: `{ patients { sk_patient age date_of_birth gender weight } }`,
	},
	{
		Name: "main_report", What: "one year, page of 100 with total",
		Path:  "/serve/graphql",
		Query: `{ main_report(start_date: "2025-01-01", end_date: "2025-12-31", limit: 100) { total limit offset rows { ` + mainReportFields + ` } } }`,
	},
	{
		Name: "main_report_summary", What: "one year",
		Path: "/serve/graphql",
		Query: `{ main_report_summary(start_date: "2025-01-01", end_date: "2025-12-31") { records distinct_resources distinct_patients average_distance ` +
			`average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`,
	},
	{
		Name: "export", What: "CSV, one year (vs psql \\copy)",
		Export: "start_date=2025-01-01&end_date=2025-12-31",
	},
}

func workloadByName(name string) (workload, bool) {
	for _, w := range workloads {
		if w.Name == name {
			return w, true
		}
	}
	return workload{}, false
}

const exportPath = "/v1/reports/main-report/export"

// body is the POST body of a GraphQL workload.
func (w workload) body() []byte {
	b, _ := json.Marshal(map[string]string{"query": w.Query})
	return b
}

// check validates a response of the workload once, before it is measured: a GraphQL answer
// without errors whose data is not empty, or a CSV with a header and rows.
func (w workload) check(body []byte, header http.Header) error {
	if w.isExport() {
		if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
			return fmt.Errorf("export: content type %q", ct)
		}
		if bytes.Count(body, []byte("\r\n")) < 2 {
			return fmt.Errorf("export: fewer than two lines: %.200q", body)
		}
		return nil
	}
	var resp struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []json.RawMessage          `json:"errors"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return fmt.Errorf("%s: %v: %.200q", w.Name, err, body)
	}
	if len(resp.Errors) > 0 || len(resp.Data) != 1 {
		return fmt.Errorf("%s: unexpected answer %.300s", w.Name, body)
	}
	for _, v := range resp.Data {
		if s := string(v); s == "null" || s == "[]" || s == `{"count":0}` {
			return fmt.Errorf("%s: empty answer %.300s", w.Name, body)
		}
	}
	return nil
}
