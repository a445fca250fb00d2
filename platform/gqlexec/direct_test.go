package gqlexec_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/internal/gqltest"
	"github.com/emsanalytics/emsquery/modules/resources"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
)

// countedSchema is /graphql's schema counting how often gqlgen's generated execution runs.
type countedSchema struct {
	publicSchema
	execs *atomic.Int64
}

// publicSchema names the embedded field apart from ExecutableSchema's Schema method.
type publicSchema = gqlpublic.Schema

func (s countedSchema) Exec(ctx context.Context) graphql.ResponseHandler {
	s.execs.Add(1)
	return s.publicSchema.Exec(ctx)
}

// stations answers station_resources as the resources module does (gqlfield.List), or as
// told: an error, a panic, a null, or rows for gqlgen to write; it counts its calls.
type stations struct {
	*gqltest.FakePublic
	rows  []resources.StationResources
	how   string
	calls *atomic.Int64
}

func (s stations) Query() gqlpublic.QueryResolver { return s }

func (s stations) StationResources(ctx context.Context) ([]*resources.StationResources, error) {
	s.calls.Add(1)
	switch s.how {
	case "error":
		return nil, errors.New("database down")
	case "panic":
		panic("resolver bug")
	case "null":
		return nil, nil
	case "values": // decoded, written by gqlgen
		out := make([]*resources.StationResources, len(s.rows))
		for i := range s.rows {
			out[i] = &s.rows[i]
		}
		return out, nil
	}
	return gqlfield.List(ctx, gqlfield.Source[resources.StationResources]{
		Values: func(_ context.Context, yield func(*resources.StationResources) bool) (bool, error) {
			for i := range s.rows {
				if !yield(&s.rows[i]) {
					return false, nil
				}
			}
			return true, nil
		},
		All: func(context.Context) ([]resources.StationResources, error) { return s.rows, nil },
	}, false)
}

func stationRows() []resources.StationResources {
	var rows []resources.StationResources
	for i, name := range gqltest.OddTexts {
		st := resources.StationResources{StationID: int32(i), StationName: name, Resources: []resources.StationResource{}}
		for j := range i % 3 {
			st.Resources = append(st.Resources, resources.StationResource{ResourceID: int32(100*i + j)})
		}
		rows = append(rows, st)
	}
	return rows
}

// A request for one list field alone is answered without gqlgen's execution, byte for byte as
// gqlgen answers it; any other shape of request goes through gqlgen.
func TestDirectResolutionAnswersAsGqlgen(t *testing.T) {
	var execs, calls atomic.Int64
	root := stations{FakePublic: &gqltest.FakePublic{}, rows: stationRows(), calls: &calls}
	direct := gqltest.NewEndpoint(countedSchema{gqlpublic.Executable(gqlpublic.Config{Resolvers: root}), &execs}, gqltest.Options())
	plain := gqltest.Server(gqlpublic.Executable(gqlpublic.Config{Resolvers: root}), false)
	for _, c := range []struct {
		query string
		execs int64 // gqlgen's executions for it
	}{
		{`{ station_resources { station_id station_name resources { resource_id } } }`, 0},
		{`{ s: station_resources { __typename station_name n: station_id resources { ...R } } } fragment R on StationResource { resource_id }`, 0},
		{`query Q { station_resources { station_id } }`, 0},
		{`{ station_resources { station_id } __typename }`, 1},
		{`{ station_resources @include(if: true) { station_id } }`, 1},
		{`{ ... on Query { station_resources { station_id } } }`, 1},
		{`{ a: station_resources { station_id } b: station_resources { station_name } }`, 1},
		{`{ resources(limit: 2) { sk_resource } }`, 1},
	} {
		body := fmt.Sprintf(`{"query": %q}`, c.query)
		execs.Store(0)
		code, _, got := gqltest.Answer(t, direct, body)
		_, _, want := gqltest.Answer(t, plain, body)
		if code != 200 || string(got) != string(want) {
			t.Errorf("%s: answered %d %s, gqlgen %s", c.query, code, got, want)
		}
		if n := execs.Load(); n != c.execs {
			t.Errorf("%s: gqlgen executed it %d times, want %d", c.query, n, c.execs)
		}
	}
}

// Whatever else the resolver does, the answer is gqlgen's byte for byte, and the resolver runs
// once: an error, a panic or a refusal by a field middleware is answered by gqlgen's execution;
// a value the resolver returns (rows, or a nil list: gqlgen writes []) is written by the direct
// JSON's field middleware, as on gqlgen's way.
func TestDirectResolutionGivesOtherOutcomesToGqlgen(t *testing.T) {
	const query = `{"query": "{ station_resources { station_id station_name resources { resource_id } } }"}`
	for how, wantExecs := range map[string]int64{"error": 1, "panic": 1, "refused": 1, "null": 0, "values": 0} {
		t.Run(how, func(t *testing.T) {
			var execs, calls atomic.Int64
			root := stations{FakePublic: &gqltest.FakePublic{}, rows: stationRows(), how: how, calls: &calls}
			o := gqltest.Options()
			if how == "refused" {
				o.AroundFields = func(ctx context.Context, next graphql.Resolver) (any, error) {
					return nil, errors.New("refused by a field middleware")
				}
			}
			direct := gqltest.NewEndpoint(countedSchema{gqlpublic.Executable(gqlpublic.Config{Resolvers: root}), &execs}, o)
			o.GqlgenOnly = true
			plain := gqltest.NewEndpoint(gqlpublic.Executable(gqlpublic.Config{Resolvers: root}), o)
			code, _, got := gqltest.Answer(t, direct, query)
			if n := calls.Swap(0); how != "refused" && n != 1 || how == "refused" && n != 0 {
				t.Errorf("the resolver ran %d times", n)
			}
			wantCode, _, want := gqltest.Answer(t, plain, query)
			if code != wantCode || string(got) != string(want) {
				t.Errorf("answered %d %s\ngqlgen: %d %s", code, got, wantCode, want)
			}
			if n := execs.Load(); n != wantExecs {
				t.Errorf("gqlgen executed it %d times, want %d", n, wantExecs)
			}
			if how == "values" && !strings.Contains(string(got), `"station_id":1,`) {
				t.Errorf("answer without the rows: %s", got)
			}
		})
	}
}

// A field resolved directly must be one gqlgen's generated code calls without arguments: a
// field the schema does not have, or one with an argument gqlgen would fill, is a programming
// error found when the endpoint is built.
func TestDirectFieldsAreChecked(t *testing.T) {
	for name, f := range map[string]string{"unknown": "no_such_field", "required argument": "record_stats"} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: built, want a panic", f)
				}
			}()
			gqlexec.New(directSchema{gqlpublic.NewExecutableSchema(gqlpublic.Config{}), gqlexec.DirectFields{
				f: func(context.Context) (any, error) { return nil, nil },
			}}, gqltest.Options().Options)
		})
	}
}

type directSchema struct {
	graphql.ExecutableSchema
	fields gqlexec.DirectFields
}

func (s directSchema) DirectFields() gqlexec.DirectFields { return s.fields }
