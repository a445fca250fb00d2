// Package gqltest is the GraphQL path's test harness: an endpoint on an in-memory Fiber app
// (Endpoint), built with the server's default document limits (Options), fake resolvers of the
// endpoints' schemas with awkward values (FakePublic, FakeServe, FakeLookups), and the
// comparison of the direct-JSON answers with gqlgen's own, byte for byte (CompareAnswers).
package gqltest

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
	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/reports"
	"github.com/emsanalytics/emsquery/modules/resources"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
	"github.com/emsanalytics/emsquery/platform/gqlhttp"
)

// Options are the options of /graphql as the server builds them, with the default document
// limits (LIMITS__MAX_QUERY_DEPTH=15, LIMITS__MAX_QUERY_COMPLEXITY=1000), no cache, no live
// answers, no metrics or spans, and the resolvers' errors logged nowhere.
func Options() gqlhttp.Options {
	return gqlhttp.Options{Options: gqlexec.Options{
		Route:              "/graphql",
		MaxQueryDepth:      15,
		MaxQueryComplexity: 1000,
		Log:                slog.New(slog.NewTextHandler(io.Discard, nil)),
	}}
}

// Awkward text: escapes of gqlgen (quotes, backslash, control characters) and of json.Marshal
// (<, >, &, U+2028, U+2029), non-ASCII, and bytes that are not UTF-8.
var OddTexts = []string{
	"", "plain", `quote " and \ backslash`, "tab\tcr\rlf\nnul\x00 unit\x1f del\x7f",
	"<script>&amp;</script>", "line\u2028para\u2029end", "Ålesund Sør, Tromsø, 東京, 🚑",
	"bad \xff\xfe utf8 \xe2\x80", "\xe2\x80\xa8\xe2\x80", "St. Olav's",
}

func Ptr[T any](v T) *T { return &v }

// Float values whose spelling differs between formatting functions.
var OddFloats = []float64{0, math.Copysign(0, -1), 1, -1.5, 48.9, 0.1, 1e-5, 1e-4, 123456789, 1e20, 1e21, 1e100, 5e-324, math.MaxFloat64, 2.5e6, 1.0 / 3}

type FakePublic struct {
	PatientRows  []*patients.Patient
	OxygenRows   []*patients.Oxygen
	ResourceRows []*resources.Resource
	StationRows  []*resources.StationResources
	Err          error
}

func (f *FakePublic) Query() gqlpublic.QueryResolver { return f }

// Subscription: these tests ask queries only.
func (f *FakePublic) Subscription() gqlpublic.SubscriptionResolver { return nil }

func (f *FakePublic) DistinctValues(context.Context, []string, string, string, *bool, []*records.Filter) ([]*stats.DistinctValue, error) {
	var out []*stats.DistinctValue
	for i, s := range OddTexts {
		v := &stats.DistinctValue{Column: fmt.Sprint("c", i%3), Value: Ptr(s)}
		if i%4 == 0 {
			v.Value = nil
		}
		out = append(out, v)
	}
	return out, nil
}

func (f *FakePublic) UniqueCounts(context.Context, []string, string, string, *bool, []*records.Filter) ([]*stats.UniqueCount, error) {
	out := []*stats.UniqueCount{}
	for i, s := range OddTexts {
		out = append(out, &stats.UniqueCount{Column: s, Count: int64(i) * 1e12, Value: Ptr(s)})
	}
	return out, nil
}

func (f *FakePublic) RecordsCount(_ context.Context, station *string) (*stats.RecordsCount, error) {
	if station != nil && *station == "fail" {
		return nil, errors.New("boom")
	}
	return &stats.RecordsCount{Count: math.MaxInt64}, nil
}

func (f *FakePublic) RecordSeries(context.Context, string, string, stats.TimeBucket, *string, *bool, []*records.Filter) ([]*stats.SeriesPoint, error) {
	out := []*stats.SeriesPoint{}
	for i, s := range OddTexts {
		p := &stats.SeriesPoint{Bucket: fmt.Sprintf("2024-%02d", i%12+1), Count: int64(i) * 1e11}
		if i%3 != 0 {
			p.Column, p.Value = Ptr("c"), Ptr(s)
		}
		out = append(out, p)
	}
	return out, f.Err
}

func (f *FakePublic) RecordStats(context.Context, string, string, string, []string, *stats.TimeBucket, []float64, *float64, *bool, []*records.Filter) ([]*stats.MeasureStats, error) {
	out := []*stats.MeasureStats{}
	for i, s := range OddTexts {
		m := &stats.MeasureStats{Count: int64(i), Measured: int64(i / 2), Group: []stats.GroupValue{{Column: "station", Value: Ptr(s)}, {Column: "age"}},
			Percentiles: []stats.Percentile{{P: 0.5, Value: Ptr(float64(i) / 3)}, {P: 0.9}}}
		if i%2 == 0 {
			m.Bucket, m.Min, m.Max, m.Avg = Ptr("2024-Q1"), Ptr(-1e-7*float64(i)), Ptr(1e21+float64(i)), Ptr(float64(i)/7)
			m.WithinTarget, m.WithinTargetShare = Ptr(int64(i/3)), Ptr(1.0/3)
		}
		out = append(out, m)
	}
	return out, f.Err
}

func (f *FakePublic) Resources(context.Context, *int, *int) ([]*resources.Resource, error) {
	return f.ResourceRows, f.Err
}
func (f *FakePublic) StationResources(context.Context) ([]*resources.StationResources, error) {
	return f.StationRows, f.Err
}
func (f *FakePublic) Patients(context.Context, *int, *int) ([]*patients.Patient, error) {
	return f.PatientRows, f.Err
}
func (f *FakePublic) Oxygens(context.Context, []string, *int, *int) ([]*patients.Oxygen, error) {
	return f.OxygenRows, f.Err
}

// FakeStreaming writes patients and oxygens as the modules' resolvers do, through gqlfield.List,
// streamed while the response is written.
type FakeStreaming struct{ *FakePublic }

func (f FakeStreaming) Query() gqlpublic.QueryResolver { return f }

func stream[T any](ctx context.Context, rows []*T, err error) ([]*T, error) {
	if err != nil {
		return nil, err
	}
	return gqlfield.List(ctx, gqlfield.Source[T]{
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

func (f FakeStreaming) Patients(ctx context.Context, _, _ *int) ([]*patients.Patient, error) {
	return stream(ctx, f.PatientRows, f.Err)
}

func (f FakeStreaming) Oxygens(ctx context.Context, _ []string, _, _ *int) ([]*patients.Oxygen, error) {
	return stream(ctx, f.OxygenRows, f.Err)
}

type FakeServe struct {
	report  *reports.MainReport
	summary *reports.MainReportSummary
}

func (f *FakeServe) Query() gqlserve.QueryResolver { return f }

// Subscription: these tests ask queries only.
func (f *FakeServe) Subscription() gqlserve.SubscriptionResolver { return nil }
func (f *FakeServe) MainReport(context.Context, string, string, []*records.Filter, *bool, *int, *int) (*reports.MainReport, error) {
	return f.report, nil
}
func (f *FakeServe) MainReportSummary(context.Context, string, string, []*records.Filter, *bool) (*reports.MainReportSummary, error) {
	return f.summary, nil
}

type FakeLookups struct{}

func (FakeLookups) Query() gqllookups.QueryResolver { return FakeLookups{} }
func (FakeLookups) Stations(context.Context) ([]*reports.Station, error) {
	var out []*reports.Station
	for i, s := range OddTexts {
		out = append(out, &reports.Station{StationID: int32(i), StationName: s})
	}
	return out, nil
}
func (FakeLookups) Callsigns(context.Context) ([]string, error)      { return OddTexts, nil }
func (FakeLookups) Urgencies(context.Context) ([]string, error)      { return []string{"A", "B"}, nil }
func (FakeLookups) Municipalities(context.Context) ([]string, error) { return nil, nil }
func (FakeLookups) OxygenRoutes(context.Context) ([]string, error)   { return []string{}, nil }
func (FakeLookups) Genders(context.Context) ([]string, error)        { return []string{"female"}, nil }
func (FakeLookups) Columns(context.Context) ([]*reports.QueryableColumn, error) {
	return []*reports.QueryableColumn{{Name: "station", Type: "TEXT", Operators: records.FilterOperators()},
		{Name: "distance", Type: "NUMERIC", Operators: records.FilterOperators()[:2]}, {Name: "odd \u2028\"\\", Type: "BOOLEAN", Operators: []records.FilterOperator{}}}, nil
}

func PublicData(n int) *FakePublic {
	f := &FakePublic{}
	for i := range n {
		t := OddTexts[i%len(OddTexts)]
		p := &patients.Patient{SkPatient: int64(i) - 3, Gender: Ptr(t), DateOfBirth: Ptr("2001-02-03")}
		if i%3 != 0 {
			p.Age = Ptr(int32(i % 120))
			p.Weight = Ptr(OddFloats[i%len(OddFloats)])
		}
		if i%5 == 0 {
			p.Gender, p.DateOfBirth = nil, nil
		}
		f.PatientRows = append(f.PatientRows, p)
		o := &patients.Oxygen{SkOxygen: Ptr(int64(i)), Route: Ptr(t), FlowRate: Ptr(OddFloats[(i+1)%len(OddFloats)]), AdministeredAt: Ptr("2025-01-01 00:00:00")}
		if i%4 == 0 {
			o.RecordID, o.Route = nil, nil
		}
		f.OxygenRows = append(f.OxygenRows, o)
		r := &resources.Resource{SkResource: int64(i), ResourceID: int32(-i), Callsign: t, ValidFrom: "2024-01-01"}
		if i%2 == 0 {
			r.StationID, r.Station, r.ValidTo = Ptr(int32(i)), Ptr(t), Ptr("2025-12-31")
		}
		f.ResourceRows = append(f.ResourceRows, r)
		st := &resources.StationResources{StationID: int32(i), StationName: t}
		for j := range i % 4 {
			st.Resources = append(st.Resources, resources.StationResource{ResourceID: int32(j)})
		}
		f.StationRows = append(f.StationRows, st)
	}
	return f
}

func ServeData() *FakeServe {
	rep := &reports.MainReport{Total: 12345, Limit: 100, Offset: 7}
	for i, t := range OddTexts {
		row := reports.MainReportRow{RecordID: int64(i), OccurredAt: "2025-01-01 00:00:00", Station: Ptr(t), OxygenRoutes: []string{t, "mask"}}
		if i%2 == 0 {
			row.Callsign, row.ResourceID, row.DegreeOfUrgency = Ptr(t), Ptr(int32(i)), Ptr("A")
			row.Distance, row.ResponseTimeS, row.Municipality = Ptr(OddFloats[i%len(OddFloats)]), Ptr(int32(600)), Ptr(t)
			row.Transported, row.PatientAge, row.PatientGender = Ptr(i%4 == 0), Ptr(int32(90)), Ptr("male")
		}
		if i%3 == 0 {
			row.OxygenRoutes = nil // a nil slice of a non-null list: gqlgen writes []
		}
		rep.Rows = append(rep.Rows, row)
	}
	sum := &reports.MainReportSummary{Records: 10, DistinctResources: 2, AverageDistance: Ptr(12.25), TransportedShare: Ptr(1.0 / 3),
		ByUrgency: []reports.ValueCount{{Value: Ptr("A"), Count: 3}, {Count: 1}}}
	return &FakeServe{report: rep, summary: sum}
}

// Server is the endpoint's server, built with or without direct JSON.
func Server(es graphql.ExecutableSchema, direct bool) http.Handler {
	o := Options()
	o.GqlgenOnly = !direct
	return NewEndpoint(es, o)
}

// Endpoint is one GraphQL endpoint on a Fiber app, mounted as the server mounts it (without
// the key check), served over an in-memory connection: an http.Handler for tests.
type Endpoint struct{ app *fiber.App }

func NewEndpoint(es graphql.ExecutableSchema, o gqlhttp.Options) Endpoint {
	f := fiber.New(fiber.Config{DisableStartupMessage: true})
	f.All("/graphql", gqlhttp.New(es, o).Handlers(func(c *fiber.Ctx) error { return c.Next() })...)
	return Endpoint{f}
}

// HeaderCut marks, in an Endpoint's answer, a body that was cut (it could not be read to
// its end).
const HeaderCut = "X-Test-Cut"

func (e Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp, err := e.app.Test(r, -1)
	if err != nil {
		w.Header().Set(HeaderCut, err.Error())
		return
	}
	defer resp.Body.Close()
	maps.Copy(w.Header(), resp.Header)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		w.Header().Set(HeaderCut, err.Error())
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// Answer posts one request to srv.
func Answer(t *testing.T, srv http.Handler, body string) (int, http.Header, []byte) {
	t.Helper()
	code, h, b, cut := AnswerCut(t, srv, body)
	if cut {
		t.Errorf("the answer was cut: %s", h.Get(HeaderCut))
	}
	return code, h, b
}

// AnswerCut posts one request to srv; cut says its body could not be read to its end (a
// streamed answer that failed after its first bytes).
func AnswerCut(t *testing.T, srv http.Handler, body string) (code int, h http.Header, b []byte, cut bool) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes(), rec.Header().Get(HeaderCut) != ""
}

// CompareAnswers asks each query of both servers, with the variables set both ways; the server
// with direct JSON is asked twice, the second time with the encoders it compiled the first
// time, and asked every query in turn (the kept encoders of one must not serve another).
func CompareAnswers(t *testing.T, es graphql.ExecutableSchema, queries []string) {
	t.Helper()
	direct, plain := Server(es, true), Server(es, false)
	for _, vars := range []map[string]any{{"yes": true, "no": false}, {"yes": false, "no": true}} {
		for round := range 2 {
			for _, q := range queries {
				body, _ := json.Marshal(map[string]any{"query": q, "variables": vars})
				c1, h1, b1, cut := AnswerCut(t, direct, string(body))
				c0, h0, b0 := Answer(t, plain, string(body))
				if cut {
					// A streamed list that failed after its first bytes went out is cut: where
					// gqlgen answers with an error, that is the one answer a client may not
					// take for a whole one.
					if !bytes.Contains(b0, []byte(`"errors"`)) {
						t.Errorf("query %s (variables %v, round %d): cut, where gqlgen answers without errors:\n%.2000s", q, vars, round, b0)
					}
					continue
				}
				if FailedAlike(b1, b0) {
					// Both failed (a value GraphQL cannot answer): the streamed list's error is
					// the field's, gqlgen's the element's; the code and the null data agree.
					continue
				}
				if c1 != c0 || h1.Get("Content-Type") != h0.Get("Content-Type") || h1.Get("Cache-Status") != h0.Get("Cache-Status") || !SameAnswer(b1, b0) {
					t.Errorf("query %s (variables %v, round %d)\ndirect JSON: %d %s\n%.2000s\ngqlgen:      %d %s\n%.2000s", q, vars, round, c1, h1.Get("Content-Type"), b1, c0, h0.Get("Content-Type"), b0)
				}
				if !json.Valid(b1) {
					t.Errorf("query %s: invalid JSON %.500s", q, b1)
				}
			}
		}
	}
}

// FailedAlike says whether both answers have errors with the same codes, a with no data: a
// value GraphQL cannot answer is an error of the whole list written here (of the answer, as
// the list is non-null), where gqlgen nulls the element's field alone.
func FailedAlike(a, b []byte) bool {
	type response struct {
		Errors []struct {
			Extensions struct{ Code string } `json:"extensions"`
		} `json:"errors"`
		Data json.RawMessage `json:"data"`
	}
	var ra, rb response
	if json.Unmarshal(a, &ra) != nil || json.Unmarshal(b, &rb) != nil || len(ra.Errors) == 0 || len(rb.Errors) == 0 ||
		string(ra.Data) != "null" {
		return false
	}
	codes := func(r response) []string {
		var c []string
		for _, e := range r.Errors {
			c = append(c, e.Extensions.Code)
		}
		slices.Sort(c)
		return slices.Compact(c)
	}
	return slices.Equal(codes(ra), codes(rb))
}

// SameAnswer compares two responses byte for byte, but for the order of their errors, which
// gqlgen itself does not keep from one run to the next (it resolves fields concurrently).
func SameAnswer(a, b []byte) bool {
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

// RealResources answers resources and station_resources with the module's resolver (on a real
// database), the rest with FakePublic.
type RealResources struct {
	*FakePublic
	R *resources.Resolver
}

func (f RealResources) Query() gqlpublic.QueryResolver { return f }

func (f RealResources) Resources(ctx context.Context, limit, after *int) ([]*resources.Resource, error) {
	return f.R.Resources(ctx, limit, after)
}

func (f RealResources) StationResources(ctx context.Context) ([]*resources.StationResources, error) {
	return f.R.StationResources(ctx)
}

// RealPatients answers patients and oxygens with the module's resolver (on a real database),
// the rest with FakePublic.
type RealPatients struct {
	*FakePublic
	R *patients.Resolver
}

func (f RealPatients) Query() gqlpublic.QueryResolver { return f }

func (f RealPatients) Patients(ctx context.Context, limit, after *int) ([]*patients.Patient, error) {
	return f.R.Patients(ctx, limit, after)
}

func (f RealPatients) Oxygens(ctx context.Context, distinctFields []string, limit, after *int) ([]*patients.Oxygen, error) {
	return f.R.Oxygens(ctx, distinctFields, limit, after)
}

// RealSeries answers record_series with the module's resolver (on a real database), the rest
// with FakePublic.
type RealSeries struct {
	*FakePublic
	R *stats.Resolver
}

func (f RealSeries) Query() gqlpublic.QueryResolver { return f }

func (f RealSeries) RecordSeries(ctx context.Context, startDate, endDate string, bucket stats.TimeBucket, groupBy *string, useOr *bool, filters []*records.Filter) ([]*stats.SeriesPoint, error) {
	return f.R.RecordSeries(ctx, startDate, endDate, bucket, groupBy, useOr, filters)
}

// The EMS performance measures' fields: the tests that use these fakes do not ask them.

func (f *FakePublic) IntervalStats(context.Context, string, string, measures.TimePoint, measures.TimePoint, []string, *stats.TimeBucket, []float64, *measures.FractileMethod, []float64, *float64, *float64, *int, *bool, []*records.Filter) ([]*measures.IntervalStats, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	var out []*measures.IntervalStats
	for i, t := range OddTexts {
		x := &measures.IntervalStats{Bucket: Ptr(t), Group: []stats.GroupValue{{Column: "station", Value: Ptr(t)}, {Column: "urgency"}},
			Fractiles: oddPercentiles(i), Suppressed: i%4 == 3}
		if i%4 != 3 {
			x.Count, x.Measured, x.Excluded = Ptr(int64(i*7)), Ptr(int64(i*5)), Ptr(int64(i*2))
			x.Min, x.Max, x.Avg = Ptr(OddFloats[i%len(OddFloats)]), Ptr(OddFloats[(i+3)%len(OddFloats)]), Ptr(OddFloats[(i+5)%len(OddFloats)])
			x.Compliance = []measures.Compliance{{Target: OddFloats[(i+1)%len(OddFloats)], Within: Ptr(int64(i)), Share: Ptr(OddFloats[(i+2)%len(OddFloats)]),
				CiLow: Ptr(0.25), CiHigh: Ptr(1.0 / 3)}, {Target: 480, Suppressed: true}}
		}
		if i%3 == 0 {
			x.Bucket, x.Group = nil, nil
		}
		out = append(out, x)
	}
	return out, nil
}

// oddPercentiles are percentiles with odd values, and none for every fifth i.
func oddPercentiles(i int) []stats.Percentile {
	if i%5 == 4 {
		return nil
	}
	return []stats.Percentile{{P: 0.5, Value: Ptr(OddFloats[i%len(OddFloats)])}, {P: 0.9}, {P: 1.0 / 3, Value: Ptr(OddFloats[(i+7)%len(OddFloats)])}}
}

func (f *FakePublic) DemandGrid(context.Context, string, string, []float64, *int, *bool, []*records.Filter) (*measures.DemandGrid, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	g := &measures.DemandGrid{Hours: 8760, Total: Ptr(int64(123456))}
	for i := range 168 {
		c := &measures.DemandCell{DayOfWeek: int32(i/24 + 1), HourOfDay: int32(i % 24), Hours: 52, Percentiles: oddPercentiles(i), Suppressed: i%9 == 8}
		if i%9 != 8 {
			c.Count, c.MeanPerHour, c.MaxPerHour = Ptr(int64(i)), Ptr(OddFloats[i%len(OddFloats)]), Ptr(int64(i%13))
		}
		g.Cells = append(g.Cells, c)
	}
	return g, nil
}

func (f *FakePublic) PeriodComparison(context.Context, string, string, *measures.ComparePeriod, *string, *measures.TimePoint, *measures.TimePoint, *float64, *float64, *float64, *int, *bool, []*records.Filter) (*measures.PeriodComparison, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	pc := &measures.PeriodComparison{CurrentStart: "2025-01-01", CurrentEnd: "2025-12-31", PreviousStart: "2024-01-01", PreviousEnd: "2024-12-31"}
	for i, t := range OddTexts {
		r := &measures.PeriodRow{Column: Ptr("station"), Value: Ptr(t),
			Current:  &measures.PeriodFigures{Count: Ptr(int64(i)), Measured: Ptr(int64(i)), Fractile: Ptr(OddFloats[i%len(OddFloats)]), Share: Ptr(0.1)},
			Previous: &measures.PeriodFigures{Suppressed: true}}
		if i%2 == 0 {
			r.Change, r.ChangeRatio = Ptr(int64(-i)), Ptr(OddFloats[(i+4)%len(OddFloats)])
		}
		if i%3 == 0 {
			r.Column, r.Value, r.Previous = nil, nil, nil
		}
		pc.Rows = append(pc.Rows, r)
	}
	return pc, nil
}

func (f *FakePublic) UnitHourUtilization(context.Context, string, string, *bool) ([]*measures.UnitHours, error) {
	if f.Err != nil {
		return nil, f.Err
	}
	var out []*measures.UnitHours
	for i := range len(OddFloats) {
		u := &measures.UnitHours{UnitHours: OddFloats[i], Responses: int64(i * 3), Transports: int64(i)}
		if i%2 == 1 {
			u.ResourceID, u.Uhu = Ptr(int32(i)), Ptr(OddFloats[(i+6)%len(OddFloats)])
		}
		out = append(out, u)
	}
	return out, nil
}

func (FakeLookups) TimePoints(context.Context) ([]*measures.TimePointSource, error) {
	out := []*measures.TimePointSource{{Name: "CALL", Available: true, Source: Ptr("fact_record.call_at")}, {Name: "FIRST_OXYGEN"}}
	for _, s := range OddTexts {
		out = append(out, &measures.TimePointSource{Name: "AT_PATIENT", Available: true, Source: Ptr(s)})
	}
	return out, nil
}
