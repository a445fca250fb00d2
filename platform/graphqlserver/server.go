// Package graphqlserver is the service's GraphQL engine: gqlgen's server for one endpoint's
// schema, with explicit transports, the parsed-query and persisted-query caches (cache.go), the
// document limits (limits.go), the contract's error codes, the direct-JSON path (directjson.go),
// the endpoint's operation metrics (metrics.go) and spans (tracing.go); and CheckRequest, which
// answers a request that is not a GraphQL request before gqlgen reads it (request.go).
//
// The engine is a net/http handler; the server mounts it on Fiber through platform/httpbridge.
// Everything it needs comes in through Options: the package knows no endpoint and no module.
package graphqlserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/httpbridge"
)

// Options are what an endpoint's engine is built from.
type Options struct {
	// Route is the path the endpoint is mounted at ("/graphql"): the http.route of its
	// operation metrics.
	Route string
	// MaxQueryDepth and MaxQueryComplexity are LIMITS__MAX_QUERY_DEPTH and
	// LIMITS__MAX_QUERY_COMPLEXITY (see limits.go).
	MaxQueryDepth      int
	MaxQueryComplexity int
	// Log receives the resolver errors that clients see only as a code.
	Log *slog.Logger
	// Meter creates the operation-duration instrument, with DurationBuckets as its boundaries
	// (seconds); a nil Meter measures nothing.
	Meter           metric.Meter
	DurationBuckets []float64
	// TracerProvider makes each operation a span (tracing.go); nil traces nothing.
	TracerProvider trace.TracerProvider
	// DirectJSON, when set, has platform/gqljson write the values of the types it lists; nil
	// leaves every answer to gqlgen's own marshaling.
	DirectJSON *DirectJSON
}

// New builds the engine of one endpoint's schema (see the package comment).
func New(es graphql.ExecutableSchema, o Options) *handler.Server {
	srv := handler.New(rootFieldCost{es})
	srv.AddTransport(directJSONTransport(transport.GET{}, o.DirectJSON))
	srv.AddTransport(directJSONTransport(transport.POST{}, o.DirectJSON))
	cache := newQueryCache()
	srv.SetQueryCache(cache)
	srv.Use(extension.Introspection{})
	// Persisted queries first: the limits check the document a hash stands for.
	srv.Use(persistedQueries{extension.AutomaticPersistedQuery{Cache: newAPQCache()}})
	srv.Use(newQueryLimits(o.MaxQueryDepth, o.MaxQueryComplexity, cache))
	srv.Use(newOperationTrace(o.TracerProvider))
	srv.Use(newOperationMetrics(o))
	useDirectJSON(srv, es, o.DirectJSON)
	srv.SetErrorPresenter(presentError(o.Log))
	srv.SetRecoverFunc(func(ctx context.Context, p any) error {
		return fmt.Errorf("panic in resolver: %v", p)
	})
	return srv
}

// presentError maps resolver errors to the contract's codes. Errors of gqlgen's own (parse,
// validation) keep their codes. An unexpected error is logged in full with the request id and
// reaches the client only as INTERNAL with a generic message.
func presentError(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := graphql.DefaultErrorPresenter(ctx, err)
		var own *gqlerror.Error
		if errors.As(err, &own) && own.Err == nil && own.Extensions["code"] != nil {
			return gqlErr
		}
		code, msg := apierr.Classify(err)
		switch {
		case httpbridge.IsClientGone(err): // nobody reads this answer; not a failure of the service
			log.InfoContext(ctx, "graphql field cancelled: the client closed its connection", "path", gqlErr.Path.String())
		case code == apierr.Internal || code == apierr.ServiceUnavailable || code == apierr.Timeout:
			log.ErrorContext(ctx, "graphql field failed", "code", string(code), "error", err.Error(), "path", gqlErr.Path.String())
		}
		gqlErr.Message = msg
		gqlErr.Err = nil
		if gqlErr.Extensions == nil {
			gqlErr.Extensions = map[string]any{}
		}
		gqlErr.Extensions["code"] = string(code)
		return gqlErr
	}
}
