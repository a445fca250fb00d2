package gqlexec

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/emsanalytics/emsquery/platform/otel"
)

// operationMetrics is the gqlgen extension that records graphql.server.operation.duration for
// each operation of its endpoint: from the moment gqlgen's handler took the request (the start
// of the operation trace, graphql.GetStartTime) to the response, with the endpoint's route, the
// operation's type, name and root fields, and its first error code. Attribute sets are built
// once per combination and cached, so an operation allocates nothing for its metrics beyond
// what the OpenTelemetry SDK needs.
type operationMetrics struct {
	duration metric.Float64Histogram
	sets     *otel.AttrSets[operationKey]
}

type operationKey struct {
	opType, opName, rootFields, errCode string
}

var (
	_ graphql.HandlerExtension    = (*operationMetrics)(nil)
	_ graphql.ResponseInterceptor = (*operationMetrics)(nil)
)

// newOperationMetrics creates the instrument on o.Meter. Failing to create it (it cannot with
// this constant name) is logged, and the SDK then hands out an instrument that measures nothing.
func newOperationMetrics(o Options) *operationMetrics {
	meter := o.Meter
	if meter == nil {
		meter = noop.Meter{}
	}
	duration, err := meter.Float64Histogram("graphql.server.operation.duration",
		metric.WithDescription("Duration of GraphQL operations, from reading the request to the response, by endpoint, operation and root field."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(o.DurationBuckets...))
	if err != nil && o.Log != nil {
		o.Log.Error("metrics: cannot create the GraphQL instrument", "route", o.Route, "error", err.Error())
	}
	route := attribute.String("http.route", o.Route)
	build := func(k operationKey) attribute.Set {
		kv := make([]attribute.KeyValue, 0, 5)
		kv = append(kv,
			route,
			attribute.String("graphql.operation.type", k.opType),
			attribute.String("graphql.operation.name", k.opName),
			attribute.String("graphql.root_field", k.rootFields))
		if k.errCode != "" {
			kv = append(kv, attribute.String("error.type", k.errCode))
		}
		return attribute.NewSet(kv...)
	}
	own := func(k operationKey) operationKey {
		k.opName, k.rootFields = strings.Clone(k.opName), strings.Clone(k.rootFields)
		return k
	}
	return &operationMetrics{duration: duration, sets: otel.NewAttrSets(build, own)}
}

func (*operationMetrics) ExtensionName() string                   { return "OperationMetrics" }
func (*operationMetrics) Validate(graphql.ExecutableSchema) error { return nil }

// maxOperationNameLength bounds the operation name kept as an attribute.
const maxOperationNameLength = 100

// otherValue stands for an error without a code.
const otherValue = "_OTHER"

// InterceptResponse runs for every response, parse and validation failures included.
func (m *operationMetrics) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	end := time.Now()
	// gqlgen's handler starts the operation trace before any transport runs, so every
	// response's context has it (the operation context's OperationStart is the same time).
	start := graphql.GetStartTime(ctx)
	var k operationKey
	if graphql.HasOperationContext(ctx) {
		if op := graphql.GetOperationContext(ctx).Operation; op != nil {
			k.opType = string(op.Operation)
			k.opName = op.Name
			if len(k.opName) > maxOperationNameLength {
				k.opName = k.opName[:maxOperationNameLength]
			}
			k.rootFields = rootFields(op.SelectionSet)
		}
	}
	if resp != nil {
		for _, e := range resp.Errors {
			if code, _ := e.Extensions["code"].(string); code != "" {
				k.errCode = code
				break
			}
		}
		if k.errCode == "" && len(resp.Errors) > 0 {
			k.errCode = otherValue
		}
	}
	m.duration.Record(ctx, end.Sub(start).Seconds(), m.sets.Get(k)...)
	return resp
}

// rootFields names the operation's top-level fields (through fragments, each looked into once
// however often it is spread), sorted and joined with commas when there are several.
func rootFields(set ast.SelectionSet) string {
	var names []string
	var seen map[string]bool
	var walk func(ast.SelectionSet, int)
	walk = func(set ast.SelectionSet, depth int) {
		if depth > 8 {
			return
		}
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				if !slices.Contains(names, s.Name) {
					names = append(names, s.Name)
				}
			case *ast.InlineFragment:
				walk(s.SelectionSet, depth+1)
			case *ast.FragmentSpread:
				if s.Definition != nil && !seen[s.Name] {
					if seen == nil {
						seen = map[string]bool{}
					}
					seen[s.Name] = true
					walk(s.Definition.SelectionSet, depth+1)
				}
			}
		}
	}
	walk(set, 0)
	if len(names) == 1 {
		return names[0]
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
