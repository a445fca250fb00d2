package gqlexec

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName is the instrumentation scope of the operation spans.
const tracerName = "github.com/emsanalytics/emsquery/platform/gqlexec"

// operationTrace is the gqlgen extension that makes each GraphQL operation a span, the parent
// of its resolvers' database statements: named and attributed as OpenTelemetry's GraphQL
// conventions say (graphql.operation.type, graphql.operation.name), plus the root fields, and on
// failure the first error's code as error.type.
//
// It is the service's own because the instrumentation that exists for gqlgen
// (github.com/ravilushqa/otelgqlgen) records the document, the variables and every field's
// arguments as attributes, and error messages as events: filter values, which must never be in
// a span, are in all of them. This one records none of them: no document (values may be
// written into it as literals), no variables, no arguments, no messages.
type operationTrace struct {
	tracer trace.Tracer
}

var (
	_ graphql.HandlerExtension    = operationTrace{}
	_ graphql.ResponseInterceptor = operationTrace{}
)

func newOperationTrace(tp trace.TracerProvider) operationTrace {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return operationTrace{tracer: tp.Tracer(tracerName)}
}

func (operationTrace) ExtensionName() string                   { return "OperationTrace" }
func (operationTrace) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptResponse runs for every response, parse and validation failures included; the
// resolvers run within next, so their statements' spans are children of this one. The span
// starts when gqlgen's handler took the request (graphql.GetStartTime), parsing included.
func (o operationTrace) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	name := "GraphQL Operation" // the conventions' name when the operation is not known
	var op *ast.OperationDefinition
	if graphql.HasOperationContext(ctx) {
		op = graphql.GetOperationContext(ctx).Operation
	}
	opName := ""
	if op != nil {
		opName = op.Name
		if len(opName) > maxOperationNameLength {
			opName = opName[:maxOperationNameLength]
		}
		name = string(op.Operation)
		if opName != "" {
			name += " " + opName
		}
	}
	ctx, span := o.tracer.Start(ctx, name, trace.WithTimestamp(graphql.GetStartTime(ctx)))
	// The attributes only for a span that records them (traces off: none does); no sampler the
	// service offers (OTEL_TRACES_SAMPLER) looks at attributes, so they need not be there at
	// the start.
	if op != nil && span.IsRecording() {
		span.SetAttributes(
			semconv.GraphQLOperationTypeKey.String(string(op.Operation)),
			semconv.GraphQLOperationName(opName),
			attribute.String("graphql.root_field", rootFields(op.SelectionSet)))
	}
	defer span.End()
	resp := next(ctx)
	if resp != nil && len(resp.Errors) > 0 {
		code := otherValue
		for _, e := range resp.Errors {
			if c, _ := e.Extensions["code"].(string); c != "" {
				code = c
				break
			}
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(code))
		span.SetStatus(codes.Error, code)
	}
	return resp
}
