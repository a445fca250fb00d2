package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/app/gqllookups"
	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/app/gqlserve"
	"github.com/emsanalytics/emsquery/modules/measures"
	"github.com/emsanalytics/emsquery/modules/patients"
	"github.com/emsanalytics/emsquery/modules/reports"
	"github.com/emsanalytics/emsquery/modules/resources"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/graphqlserver"
)

// The answers written by platform/gqljson must be gqlgen's own, byte for byte: every query
// below is answered by the endpoint's server with direct JSON and by one without, over the same
// resolver values, and the responses compared.

// Awkward text: escapes of gqlgen (quotes, backslash, control characters) and of json.Marshal
// (<, >, &, U+2028, U+2029), non-ASCII, and bytes that are not UTF-8.
var oddTexts = []string{
	"", "plain", `quote " and \ backslash`, "tab\tcr\rlf\nnul\x00 unit\x1f del\x7f",
	"<script>&amp;</script>", "line\u2028para\u2029end", "Ålesund Sør, Tromsø, 東京, 🚑",
	"bad \xff\xfe utf8 \xe2\x80", "\xe2\x80\xa8\xe2\x80", "St. Olav's",
}

func ptr[T any](v T) *T { return &v }

// Float values whose spelling differs between formatting functions.
var oddFloats = []float64{0, math.Copysign(0, -1), 1, -1.5, 48.9, 0.1, 1e-5, 1e-4, 123456789, 1e20, 1e21, 1e100, 5e-324, math.MaxFloat64, 2.5e6, 1.0 / 3}

type fakePublic struct {
	patients  []*patients.Patient
	oxygens   []*patients.Oxygen
	resources []*resources.Resource
	stations  []*resources.StationResources
	err       error
}

func (f *fakePublic) Query() gqlpublic.QueryResolver { return f }

// Subscription: these tests ask queries only.
func (f *fakePublic) Subscription() gqlpublic.SubscriptionResolver { return nil }

func (f *fakePublic) DistinctValues(context.Context, []string, string, string, *bool, []*stats.Filter) ([]*stats.DistinctValue, error) {
	var out []*stats.DistinctValue
	for i, s := range oddTexts {
		v := &stats.DistinctValue{Column: fmt.Sprint("c", i%3), Value: ptr(s)}
		if i%4 == 0 {
			v.Value = nil
		}
		out = append(out, v)
	}
	return out, nil
}

func (f *fakePublic) UniqueCounts(context.Context, []string, string, string, *bool, []*stats.Filter) ([]*stats.UniqueCount, error) {
	out := []*stats.UniqueCount{}
	for i, s := range oddTexts {
		out = append(out, &stats.UniqueCount{Column: s, Count: int64(i) * 1e12, Value: ptr(s)})
	}
	return out, nil
}

func (f *fakePublic) RecordsCount(_ context.Context, station *string) (*stats.RecordsCount, error) {
	if station != nil && *station == "fail" {
		return nil, errors.New("boom")
	}
	return &stats.RecordsCount{Count: math.MaxInt64}, nil
}

func (f *fakePublic) RecordSeries(context.Context, string, string, stats.TimeBucket, *string, *bool, []*stats.Filter) ([]*stats.SeriesPoint, error) {
	out := []*stats.SeriesPoint{}
	for i, s := range oddTexts {
		p := &stats.SeriesPoint{Bucket: fmt.Sprintf("2024-%02d", i%12+1), Count: int64(i) * 1e11}
		if i%3 != 0 {
			p.Column, p.Value = ptr("c"), ptr(s)
		}
		out = append(out, p)
	}
	return out, f.err
}

func (f *fakePublic) RecordStats(context.Context, string, string, string, []string, *stats.TimeBucket, []float64, *float64, *bool, []*stats.Filter) ([]*stats.MeasureStats, error) {
	out := []*stats.MeasureStats{}
	for i, s := range oddTexts {
		m := &stats.MeasureStats{Count: int64(i), Measured: int64(i / 2), Group: []stats.GroupValue{{Column: "station", Value: ptr(s)}, {Column: "age"}},
			Percentiles: []stats.Percentile{{P: 0.5, Value: ptr(float64(i) / 3)}, {P: 0.9}}}
		if i%2 == 0 {
			m.Bucket, m.Min, m.Max, m.Avg = ptr("2024-Q1"), ptr(-1e-7*float64(i)), ptr(1e21+float64(i)), ptr(float64(i)/7)
			m.WithinTarget, m.WithinTargetShare = ptr(int64(i/3)), ptr(1.0/3)
		}
		out = append(out, m)
	}
	return out, f.err
}

func (f *fakePublic) Resources(context.Context, *int, *int) ([]*resources.Resource, error) {
	return f.resources, f.err
}
func (f *fakePublic) StationResources(context.Context) ([]*resources.StationResources, error) {
	return f.stations, f.err
}
func (f *fakePublic) Patients(context.Context, *int, *int) ([]*patients.Patient, error) {
	return f.patients, f.err
}
func (f *fakePublic) Oxygens(context.Context, []string, *int, *int) ([]*patients.Oxygen, error) {
	return f.oxygens, f.err
}

// fakeStreaming writes patients and oxygens as the modules' resolvers do, through graphqlserver.List,
// streamed while the response is written.
type fakeStreaming struct{ *fakePublic }

func (f fakeStreaming) Query() gqlpublic.QueryResolver { return f }

func stream[T any](ctx context.Context, rows []*T, err error) ([]*T, error) {
	if err != nil {
		return nil, err
	}
	return graphqlserver.List(ctx, graphqlserver.Source[T]{
		Values: func(_ context.Context, yield func(*T) bool) (bool, error) {
			for _, r := range rows {
				if !yield(r) {
					return false, nil
				}
			}
			return true, nil
		},
		All: func(context.Context) ([]T, error) {
			out := make([]T, len(rows))
			for i, r := range rows {
				out[i] = *r
			}
			return out, nil
		},
	}, true)
}

func (f fakeStreaming) Patients(ctx context.Context, _, _ *int) ([]*patients.Patient, error) {
	return stream(ctx, f.patients, f.err)
}

func (f fakeStreaming) Oxygens(ctx context.Context, _ []string, _, _ *int) ([]*patients.Oxygen, error) {
	return stream(ctx, f.oxygens, f.err)
}

type fakeServe struct {
	report  *reports.MainReport
	summary *reports.MainReportSummary
}

func (f *fakeServe) Query() gqlserve.QueryResolver { return f }

// Subscription: these tests ask queries only.
func (f *fakeServe) Subscription() gqlserve.SubscriptionResolver { return nil }
func (f *fakeServe) MainReport(context.Context, string, string, []*stats.Filter, *bool, *int, *int) (*reports.MainReport, error) {
	return f.report, nil
}
func (f *fakeServe) MainReportSummary(context.Context, string, string, []*stats.Filter, *bool) (*reports.MainReportSummary, error) {
	return f.summary, nil
}

type fakeLookups struct{}

func (fakeLookups) Query() gqllookups.QueryResolver { return fakeLookups{} }
func (fakeLookups) Stations(context.Context) ([]*reports.Station, error) {
	var out []*reports.Station
	for i, s := range oddTexts {
		out = append(out, &reports.Station{StationID: int32(i), StationName: s})
	}
	return out, nil
}
func (fakeLookups) Callsigns(context.Context) ([]string, error)      { return oddTexts, nil }
func (fakeLookups) Urgencies(context.Context) ([]string, error)      { return []string{"A", "B"}, nil }
func (fakeLookups) Municipalities(context.Context) ([]string, error) { return nil, nil }
func (fakeLookups) OxygenRoutes(context.Context) ([]string, error)   { return []string{}, nil }
func (fakeLookups) Genders(context.Context) ([]string, error)        { return []string{"female"}, nil }
func (fakeLookups) Columns(context.Context) ([]*reports.QueryableColumn, error) {
	return []*reports.QueryableColumn{{Name: "station", Type: "TEXT", Operators: stats.FilterOperators()}}, nil
}

func publicData(n int) *fakePublic {
	f := &fakePublic{}
	for i := range n {
		t := oddTexts[i%len(oddTexts)]
		p := &patients.Patient{SkPatient: int64(i) - 3, Gender: ptr(t), DateOfBirth: ptr("2001-02-03")}
		if i%3 != 0 {
			p.Age = ptr(int32(i % 120))
			p.Weight = ptr(oddFloats[i%len(oddFloats)])
		}
		if i%5 == 0 {
			p.Gender, p.DateOfBirth = nil, nil
		}
		f.patients = append(f.patients, p)
		o := &patients.Oxygen{SkOxygen: ptr(int64(i)), Route: ptr(t), FlowRate: ptr(oddFloats[(i+1)%len(oddFloats)]), AdministeredAt: ptr("2025-01-01 00:00:00")}
		if i%4 == 0 {
			o.RecordID, o.Route = nil, nil
		}
		f.oxygens = append(f.oxygens, o)
		r := &resources.Resource{SkResource: int64(i), ResourceID: int32(-i), Callsign: t, ValidFrom: "2024-01-01"}
		if i%2 == 0 {
			r.StationID, r.Station, r.ValidTo = ptr(int32(i)), ptr(t), ptr("2025-12-31")
		}
		f.resources = append(f.resources, r)
		st := &resources.StationResources{StationID: int32(i), StationName: t}
		for j := range i % 4 {
			st.Resources = append(st.Resources, resources.StationResource{ResourceID: int32(j)})
		}
		f.stations = append(f.stations, st)
	}
	return f
}

func serveData() *fakeServe {
	rep := &reports.MainReport{Total: 12345, Limit: 100, Offset: 7}
	for i, t := range oddTexts {
		row := reports.MainReportRow{RecordID: int64(i), OccurredAt: "2025-01-01 00:00:00", Station: ptr(t), OxygenRoutes: []string{t, "mask"}}
		if i%2 == 0 {
			row.Callsign, row.ResourceID, row.DegreeOfUrgency = ptr(t), ptr(int32(i)), ptr("A")
			row.Distance, row.ResponseTimeS, row.Municipality = ptr(oddFloats[i%len(oddFloats)]), ptr(int32(600)), ptr(t)
			row.Transported, row.PatientAge, row.PatientGender = ptr(i%4 == 0), ptr(int32(90)), ptr("male")
		}
		if i%3 == 0 {
			row.OxygenRoutes = nil // a nil slice of a non-null list: gqlgen writes []
		}
		rep.Rows = append(rep.Rows, row)
	}
	sum := &reports.MainReportSummary{Records: 10, DistinctResources: 2, AverageDistance: ptr(12.25), TransportedShare: ptr(1.0 / 3),
		ByUrgency: []reports.ValueCount{{Value: ptr("A"), Count: 3}, {Count: 1}}}
	return &fakeServe{report: rep, summary: sum}
}

// server is the endpoint's server, built with or without direct JSON.
func server(es graphql.ExecutableSchema, direct bool) http.Handler {
	o := graphQLOptions("/graphql", testLimits, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	o.GqlgenOnly = !direct
	return newTestEndpoint(es, o)
}

// testEndpoint is one GraphQL endpoint on a Fiber app, mounted as the server mounts it (without
// the key check), served over an in-memory connection: an http.Handler for tests.
type testEndpoint struct{ app *fiber.App }

func newTestEndpoint(es graphql.ExecutableSchema, o graphqlserver.Options) testEndpoint {
	f := fiber.New(fiber.Config{DisableStartupMessage: true})
	f.All("/graphql", graphqlserver.New(es, o).Handlers(func(c *fiber.Ctx) error { return c.Next() })...)
	return testEndpoint{f}
}

// headerCut marks, in a testEndpoint's answer, a body that was cut (it could not be read to
// its end).
const headerCut = "X-Test-Cut"

func (e testEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp, err := e.app.Test(r, -1)
	if err != nil {
		w.Header().Set(headerCut, err.Error())
		return
	}
	defer resp.Body.Close()
	maps.Copy(w.Header(), resp.Header)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		w.Header().Set(headerCut, err.Error())
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// answer posts one request to srv.
func answer(t *testing.T, srv http.Handler, body string) (int, http.Header, []byte) {
	t.Helper()
	code, h, b, cut := answerCut(t, srv, body)
	if cut {
		t.Errorf("the answer was cut: %s", h.Get(headerCut))
	}
	return code, h, b
}

// answerCut posts one request to srv; cut says its body could not be read to its end (a
// streamed answer that failed after its first bytes).
func answerCut(t *testing.T, srv http.Handler, body string) (code int, h http.Header, b []byte, cut bool) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes(), rec.Header().Get(headerCut) != ""
}

// compareAnswers asks each query of both servers, with the variables set both ways; the server
// with direct JSON is asked twice, the second time with the encoders it compiled the first
// time, and asked every query in turn (the kept encoders of one must not serve another).
func compareAnswers(t *testing.T, es graphql.ExecutableSchema, queries []string) {
	t.Helper()
	direct, plain := server(es, true), server(es, false)
	for _, vars := range []map[string]any{{"yes": true, "no": false}, {"yes": false, "no": true}} {
		for round := range 2 {
			for _, q := range queries {
				body, _ := json.Marshal(map[string]any{"query": q, "variables": vars})
				c1, h1, b1, cut := answerCut(t, direct, string(body))
				c0, h0, b0 := answer(t, plain, string(body))
				if cut {
					// A streamed list that failed after its first bytes went out is cut: where
					// gqlgen answers with an error, that is the one answer a client may not
					// take for a whole one.
					if !bytes.Contains(b0, []byte(`"errors"`)) {
						t.Errorf("query %s (variables %v, round %d): cut, where gqlgen answers without errors:\n%.2000s", q, vars, round, b0)
					}
					continue
				}
				if failedAlike(b1, b0) {
					// Both failed (a value GraphQL cannot answer): the streamed list's error is
					// the field's, gqlgen's the element's; the code and the null data agree.
					continue
				}
				if c1 != c0 || h1.Get("Content-Type") != h0.Get("Content-Type") || h1.Get("Cache-Status") != h0.Get("Cache-Status") || !sameAnswer(b1, b0) {
					t.Errorf("query %s (variables %v, round %d)\ndirect JSON: %d %s\n%.2000s\ngqlgen:      %d %s\n%.2000s", q, vars, round, c1, h1.Get("Content-Type"), b1, c0, h0.Get("Content-Type"), b0)
				}
				if !json.Valid(b1) {
					t.Errorf("query %s: invalid JSON %.500s", q, b1)
				}
			}
		}
	}
}

// failedAlike says whether both answers have errors with the same codes, a with no data: a
// value GraphQL cannot answer is an error of the whole list written here (of the answer, as
// the list is non-null), where gqlgen nulls the element's field alone.
func failedAlike(a, b []byte) bool {
	type answer struct {
		Errors []struct {
			Extensions struct{ Code string } `json:"extensions"`
		} `json:"errors"`
		Data json.RawMessage `json:"data"`
	}
	var ra, rb answer
	if json.Unmarshal(a, &ra) != nil || json.Unmarshal(b, &rb) != nil || len(ra.Errors) == 0 || len(rb.Errors) == 0 ||
		string(ra.Data) != "null" {
		return false
	}
	codes := func(r answer) []string {
		var c []string
		for _, e := range r.Errors {
			c = append(c, e.Extensions.Code)
		}
		slices.Sort(c)
		return slices.Compact(c)
	}
	return slices.Equal(codes(ra), codes(rb))
}

// sameAnswer compares two responses byte for byte, but for the order of their errors, which
// gqlgen itself does not keep from one run to the next (it resolves fields concurrently).
func sameAnswer(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ra, rb map[string]json.RawMessage
	if json.Unmarshal(a, &ra) != nil || json.Unmarshal(b, &rb) != nil || len(ra) != len(rb) {
		return false
	}
	for k, va := range ra {
		vb, ok := rb[k]
		if !ok {
			return false
		}
		if k == "errors" {
			var ea, eb []json.RawMessage
			if json.Unmarshal(va, &ea) != nil || json.Unmarshal(vb, &eb) != nil || len(ea) != len(eb) {
				return false
			}
			sa, sb := make([]string, len(ea)), make([]string, len(eb))
			for i := range ea {
				sa[i], sb[i] = string(ea[i]), string(eb[i])
			}
			slices.Sort(sa)
			slices.Sort(sb)
			if !slices.Equal(sa, sb) {
				return false
			}
			continue
		}
		if !bytes.Equal(va, vb) {
			return false
		}
	}
	return true
}

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
	}
	for _, n := range []int{0, 1, 2, 300, 20000} {
		es := gqlpublic.NewExecutableSchema(gqlpublic.Config{Resolvers: publicData(n)})
		t.Run(fmt.Sprint(n, " rows"), func(t *testing.T) { compareAnswers(t, es, queries) })
		es = gqlpublic.NewExecutableSchema(gqlpublic.Config{Resolvers: fakeStreaming{publicData(n)}})
		t.Run(fmt.Sprint(n, " rows streamed"), func(t *testing.T) { compareAnswers(t, es, queries) })
	}

	// Values gqlgen refuses (a NaN, a null in a non-null field) or a resolver error: the answer
	// stays gqlgen's, errors included.
	bad := publicData(20)
	bad.patients[7].Weight = ptr(math.NaN())
	bad.oxygens[3].FlowRate = ptr(math.Inf(-1))
	bad.patients = append(bad.patients, nil)
	es := gqlpublic.NewExecutableSchema(gqlpublic.Config{Resolvers: bad})
	t.Run("refused values", func(t *testing.T) { compareAnswers(t, es, queries) })
	es = gqlpublic.NewExecutableSchema(gqlpublic.Config{Resolvers: fakeStreaming{bad}})
	t.Run("refused values streamed", func(t *testing.T) { compareAnswers(t, es, queries) })
	failing := &fakePublic{err: errors.New("database down")}
	es = gqlpublic.NewExecutableSchema(gqlpublic.Config{Resolvers: failing})
	t.Run("errors", func(t *testing.T) { compareAnswers(t, es, queries) })
	nilLists := &fakePublic{}
	es = gqlpublic.NewExecutableSchema(gqlpublic.Config{Resolvers: nilLists})
	t.Run("nil lists", func(t *testing.T) { compareAnswers(t, es, queries) })
}

func TestDirectJSONReportsMatchGqlgen(t *testing.T) {
	serve := gqlserve.NewExecutableSchema(gqlserve.Config{Resolvers: serveData()})
	compareAnswers(t, serve, []string{
		`{ main_report(start_date: "a", end_date: "b") { total limit offset rows { record_id occurred_at station callsign resource_id degree_of_urgency distance response_time_s municipality transported patient_age patient_gender oxygen_routes } } }`,
		`{ main_report(start_date: "a", end_date: "b") { rows { oxygen_routes distance } total } }`,
		`{ main_report(start_date: "a", end_date: "b") { total } }`,
		`{ main_report_summary(start_date: "a", end_date: "b") { records distinct_resources distinct_patients average_distance average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`,
	})
	lookups := gqllookups.NewExecutableSchema(gqllookups.Config{Resolvers: fakeLookups{}})
	compareAnswers(t, lookups, []string{
		`{ stations { station_id station_name } callsigns urgencies municipalities oxygen_routes genders columns { name type operators } }`,
	})
}

// The fast path is taken: with direct JSON, gqlgen marshals no element of a large list.
func TestDirectJSONIsUsed(t *testing.T) {
	es := gqlpublic.NewExecutableSchema(gqlpublic.Config{Resolvers: publicData(5)})
	var marshaled int
	o := graphQLOptions("/graphql", testLimits, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	o.AroundFields = func(ctx context.Context, next graphql.Resolver) (any, error) {
		if fc := graphql.GetFieldContext(ctx); fc != nil && fc.Object == "Patient" {
			marshaled++
		}
		return next(ctx)
	}
	w := newTestEndpoint(es, o)
	req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(`{"query":"{ patients { sk_patient gender } }"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"sk_patient":-3`) {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
	if marshaled != 0 {
		t.Fatalf("gqlgen resolved %d Patient fields; want 0", marshaled)
	}
}

// The EMS performance measures' fields: these tests do not ask them.

func (f *fakePublic) IntervalStats(context.Context, string, string, measures.TimePoint, measures.TimePoint, []string, *stats.TimeBucket, []float64, *measures.FractileMethod, []float64, *float64, *float64, *int, *bool, []*stats.Filter) ([]*measures.IntervalStats, error) {
	return nil, errors.New("not asked")
}

func (f *fakePublic) DemandGrid(context.Context, string, string, []float64, *int, *bool, []*stats.Filter) (*measures.DemandGrid, error) {
	return nil, errors.New("not asked")
}

func (f *fakePublic) PeriodComparison(context.Context, string, string, *measures.ComparePeriod, *string, *measures.TimePoint, *measures.TimePoint, *float64, *float64, *float64, *int, *bool, []*stats.Filter) (*measures.PeriodComparison, error) {
	return nil, errors.New("not asked")
}

func (f *fakePublic) UnitHourUtilization(context.Context, string, string, *bool) ([]*measures.UnitHours, error) {
	return nil, errors.New("not asked")
}

func (fakeLookups) TimePoints(context.Context) ([]*measures.TimePointSource, error) {
	return nil, errors.New("not asked")
}
