package gqljson_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/app/gqllookups"
	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/app/gqlserve"
	"github.com/emsanalytics/emsquery/internal/gqltest"
)

// The answers written by this package must be gqlgen's own, byte for byte: every query below is
// answered by the endpoint's server with direct JSON and by one without, over the same resolver
// values, and the responses compared (gqltest.CompareAnswers). The endpoints' generated schemas
// are the fixtures: they are what the package writes for.

func TestDirectJSONPublicMatchesGqlgen(t *testing.T) {
	vars := `query Q($yes: Boolean!, $no: Boolean!)`
	queries := []string{
		`{ patients { sk_patient age date_of_birth gender weight } }`,
		`{ patients { weight gender } }`,
		`{ p: patients { id: sk_patient __typename a: age a2: age sk_patient } }`,
		`{ patients { ...P } } fragment P on Patient { gender weight ... on Patient { age } }`,
		vars + ` { patients { sk_patient age @skip(if: $yes) gender @include(if: $no) weight @include(if: $yes) } }`,
		vars + ` { patients @skip(if: $yes) { sk_patient } records_count { count } }`,
		`{ oxygens { sk_oxygen record_id route flow_rate administered_at } }`,
		`{ oxygens(distinct_fields: ["route"]) { route __typename } }`,
		`{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`,
		`{ station_resources { station_id station_name resources { resource_id __typename } } }`,
		`{ station_resources { resources { r: resource_id } n: station_name } }`,
		`{ resources { callsign } resources { valid_to sk_resource } }`,
		`{ resources { ...R } } fragment R on Resource { callsign station }`,
		vars + ` { resources { ...R } } fragment R on Resource { callsign station @include(if: $yes) valid_from @skip(if: $yes) }`,
		vars + ` { station_resources { station_id resources @include(if: $no) { resource_id } } }`,
		`{ distinct_values(columns: ["a"], start_date: "x", end_date: "y") { column value } }`,
		`{ unique_counts(columns: ["a"], start_date: "x", end_date: "y") { column value count } }`,
		`{ records_count { count __typename } }`,
		`{ record_series(start_date: "x", end_date: "y", bucket: DAY) { bucket column value count __typename } }`,
		`{ record_stats(start_date: "x", end_date: "y", measure: "m") { bucket group { column value } count measured min max avg percentiles { p value } within_target within_target_share } }`,
		`{ record_stats(start_date: "x", end_date: "y", measure: "m") { g: group { value } percentiles { value } } }`,
		`{ a: records_count { count } b: records_count(station: "fail") { count } patients { gender } }`,
		`{ __typename patients { __typename } resources { __typename } }`,
		`{ __schema { queryType { name } } patients { sk_patient } }`,
		`{ interval_stats(start_date: "x", end_date: "y", from: CALL, to: ARRIVED_ON_SCENE) { bucket group { column value } count measured excluded min max avg fractiles { p value } compliance { target within share ci_low ci_high suppressed } suppressed } }`,
		`{ interval_stats(start_date: "x", end_date: "y", from: CALL, to: ARRIVED_ON_SCENE) { avg compliance { share } __typename } }`,
		`{ demand_grid(start_date: "x", end_date: "y") { hours total cells { day_of_week hour_of_day hours count mean_per_hour max_per_hour percentiles { p value } suppressed } } }`,
		`{ demand_grid(start_date: "x", end_date: "y") { cells { c: count __typename } } }`,
		`{ period_comparison(start_date: "x", end_date: "y") { current_start current_end previous_start previous_end rows { column value current { count measured fractile share suppressed } previous { count share suppressed } change change_ratio } } }`,
		`{ unit_hour_utilization(start_date: "x", end_date: "y") { resource_id unit_hours responses transports uhu } }`,
	}
	for _, n := range []int{0, 1, 2, 300, 20000} {
		es := gqlpublic.Executable(gqlpublic.Config{Resolvers: gqltest.PublicData(n)})
		t.Run(fmt.Sprint(n, " rows"), func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
		es = gqlpublic.Executable(gqlpublic.Config{Resolvers: gqltest.FakeStreaming{FakePublic: gqltest.PublicData(n)}})
		t.Run(fmt.Sprint(n, " rows streamed"), func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
	}

	// Values gqlgen refuses (a NaN, a null in a non-null field) or a resolver error: the answer
	// stays gqlgen's, errors included.
	bad := gqltest.PublicData(20)
	bad.PatientRows[7].Weight = gqltest.Ptr(math.NaN())
	bad.OxygenRows[3].FlowRate = gqltest.Ptr(math.Inf(-1))
	bad.PatientRows = append(bad.PatientRows, nil)
	es := gqlpublic.Executable(gqlpublic.Config{Resolvers: bad})
	t.Run("refused values", func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
	es = gqlpublic.Executable(gqlpublic.Config{Resolvers: gqltest.FakeStreaming{FakePublic: bad}})
	t.Run("refused values streamed", func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
	failing := &gqltest.FakePublic{Err: errors.New("database down")}
	es = gqlpublic.Executable(gqlpublic.Config{Resolvers: failing})
	t.Run("errors", func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
	nilLists := &gqltest.FakePublic{}
	es = gqlpublic.Executable(gqlpublic.Config{Resolvers: nilLists})
	t.Run("nil lists", func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
}

func TestDirectJSONReportsMatchGqlgen(t *testing.T) {
	serve := gqlserve.NewExecutableSchema(gqlserve.Config{Resolvers: gqltest.ServeData()})
	gqltest.CompareAnswers(t, serve, []string{
		`{ main_report(start_date: "a", end_date: "b") { total limit offset rows { record_id occurred_at station callsign resource_id degree_of_urgency distance response_time_s municipality transported patient_age patient_gender oxygen_routes } } }`,
		`{ main_report(start_date: "a", end_date: "b") { rows { oxygen_routes distance } total } }`,
		`{ main_report(start_date: "a", end_date: "b") { total } }`,
		`{ main_report_summary(start_date: "a", end_date: "b") { records distinct_resources distinct_patients average_distance average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`,
	})
	lookups := gqllookups.NewExecutableSchema(gqllookups.Config{Resolvers: gqltest.FakeLookups{}})
	gqltest.CompareAnswers(t, lookups, []string{
		`{ stations { station_id station_name } callsigns urgencies municipalities oxygen_routes genders columns { name type operators } }`,
		`{ time_points { name available source __typename } columns { o: operators t: type } }`,
		`{ time_points { source } c: columns { type name } }`,
	})
}

// The fast path is taken: with direct JSON, gqlgen marshals no element of a list, nor the
// fields of the objects in it.
func TestDirectJSONIsUsed(t *testing.T) {
	for _, c := range []struct {
		query, object, want string
		lookups             bool // asked of /lookups/graphql's schema
	}{
		{`{ patients { sk_patient gender } }`, "Patient", `"sk_patient":-3`, false},
		{`{ demand_grid(start_date: \"x\", end_date: \"y\") { total cells { count percentiles { value } } } }`, "DemandCell", `"total":123456`, false},
		{`{ interval_stats(start_date: \"x\", end_date: \"y\", from: CALL, to: ARRIVED_ON_SCENE) { count compliance { share } } }`, "IntervalStats", `"count":7`, false},
		{`{ period_comparison(start_date: \"x\", end_date: \"y\") { rows { current { count } } } }`, "PeriodRow", `"count":1`, false},
		{`{ unit_hour_utilization(start_date: \"x\", end_date: \"y\") { uhu } }`, "UnitHours", `"uhu":`, false},
		{`{ time_points { name source } }`, "TimePointSource", `"name":"CALL"`, true},
		{`{ columns { name type operators } }`, "QueryableColumn", `"type":"NUMERIC"`, true},
	} {
		var es graphql.ExecutableSchema = gqlpublic.Executable(gqlpublic.Config{Resolvers: gqltest.PublicData(5)})
		if c.lookups {
			es = gqllookups.NewExecutableSchema(gqllookups.Config{Resolvers: gqltest.FakeLookups{}})
		}
		var marshaled int
		o := gqltest.Options()
		o.AroundFields = func(ctx context.Context, next graphql.Resolver) (any, error) {
			if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Object == c.object {
				marshaled++
			}
			return next(ctx)
		}
		w := gqltest.NewEndpoint(es, o)
		req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(`{"query":"`+c.query+`"}`))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), c.want) {
			t.Fatalf("%s: answer %d %s", c.query, rec.Code, rec.Body)
		}
		if marshaled != 0 {
			t.Errorf("%s: gqlgen resolved %d %s fields; want 0", c.query, marshaled, c.object)
		}
	}
}
