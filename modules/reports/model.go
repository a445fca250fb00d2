package reports

import (
	"io"
	"strconv"
	"strings"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// MainReport is a page of main_report.
type MainReport struct {
	Total  int64           `json:"total"`
	Limit  int64           `json:"limit"`
	Offset int64           `json:"offset"`
	Rows   []MainReportRow `json:"rows"`
}

// PlainJSON declares MainReport written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars, lists and other such types.
func (MainReport) PlainJSON() {}

// MainReportRow is one record of the main report; the export's CSV has the same columns
// (ColumnNames) in the same order.
type MainReportRow struct {
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

// PlainJSON declares MainReportRow written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (MainReportRow) PlainJSON() {}

// MainReportSummary holds main_report_summary's figures.
type MainReportSummary struct {
	Records              int64        `json:"records"`
	DistinctResources    int64        `json:"distinct_resources"`
	DistinctPatients     int64        `json:"distinct_patients"`
	AverageDistance      *float64     `json:"average_distance"`
	AverageResponseTimeS *float64     `json:"average_response_time_s"`
	Transported          int64        `json:"transported"`
	TransportedShare     *float64     `json:"transported_share"`
	ByUrgency            []ValueCount `json:"by_urgency"`
	ByStation            []ValueCount `json:"by_station"`
}

// PlainJSON declares MainReportSummary written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars, lists and other such types.
func (MainReportSummary) PlainJSON() {}

// ValueCount is one entry of a summary's breakdown.
type ValueCount struct {
	Value *string `json:"value"`
	Count int64   `json:"count"`
}

// PlainJSON declares ValueCount written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (ValueCount) PlainJSON() {}

// Station is one dim_station row.
type Station struct {
	StationID   int32  `json:"station_id"`
	StationName string `json:"station_name"`
}

// PlainJSON declares Station written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (Station) PlainJSON() {}

// QueryableColumn is a column of the records catalog as the lookups endpoint lists it.
type QueryableColumn struct {
	Name      string                   `json:"name"`
	Type      ColumnType               `json:"type"`
	Operators []records.FilterOperator `json:"operators"`
}

// PlainJSON declares QueryableColumn written to JSON by the GraphQL path itself (gqljson.Plain):
// its fields are a json-tagged built-in scalar and enums with their own MarshalGQL.
func (QueryableColumn) PlainJSON() {}

// ColumnType is the GraphQL enum ColumnType: a records.ColumnType in upper case.
type ColumnType string

// columnType names a catalog column's type as the enum does.
func columnType(t records.ColumnType) ColumnType { return ColumnType(strings.ToUpper(string(t))) }

// IsValid reports whether t is one of the enum's values.
func (t ColumnType) IsValid() bool {
	switch records.ColumnType(strings.ToLower(string(t))) {
	case records.TypeText, records.TypeInteger, records.TypeNumeric, records.TypeBoolean, records.TypeTimestamp:
		return string(t) == strings.ToUpper(string(t))
	}
	return false
}

// MarshalGQL writes the enum value.
func (t ColumnType) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(t))) }

// UnmarshalGQL reads the enum value (the type is output only, but gqlgen wants both).
func (t *ColumnType) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok || !ColumnType(s).IsValid() {
		return apierr.BadInput("%v is not a ColumnType", v)
	}
	*t = ColumnType(s)
	return nil
}
