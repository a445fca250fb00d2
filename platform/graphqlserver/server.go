// Package graphqlserver is the GraphQL path, from Fiber to gqlgen and back: an Endpoint per
// GraphQL route reads a request once, answers from the answer cache (platform/answercache) or
// runs gqlgen's executor for the endpoint's schema, and writes the answer, streamed from its
// first 64 KiB on (endpoint.go, stream.go). Around the executor: the parsed-query and
// persisted-query caches (cache.go), the document limits (limits.go), the contract's error
// codes, the operation metrics (metrics.go) and spans (tracing.go), and the direct-JSON path
// (directjson.go, list.go), which has platform/gqljson write the answers' large lists,
// whole tables as their rows are read. Modules answer list fields with List.
//
// Nothing else in the service imports Fiber or net/http for GraphQL; everything the package
// needs comes in through Options: it knows no endpoint and no module.
package graphqlserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/clientwatch"
	"github.com/emsanalytics/emsquery/platform/gqljson"
	"github.com/emsanalytics/emsquery/platform/keyslots"
)

// Options are what an endpoint's engine is built from.
type Options struct {
	// Route is the path the endpoint is mounted at ("/graphql"): the http.route of its
	// operation and cache metrics.
	Route string
	// MaxQueryDepth and MaxQueryComplexity are LIMITS__MAX_QUERY_DEPTH and
	// LIMITS__MAX_QUERY_COMPLEXITY (see limits.go).
	MaxQueryDepth      int
	MaxQueryComplexity int
	// MaxRootFields is LIMITS__MAX_ROOT_FIELDS (limits.go); 0: no bound.
	MaxRootFields int
	// RequestParallelism is LIMITS__REQUEST_PARALLELISM: the database connections one request
	// holds at once (its other root fields wait their turn); 0: no bound of its own.
	RequestParallelism int
	// RequestTimeout is LIMITS__REQUEST_TIMEOUT; what still runs then fails with TimedOut.
	RequestTimeout time.Duration
	TimedOut       error
	// Cache keeps answers (nil: caching off).
	Cache *answercache.Cache
	// StreamedAnswers bounds the whole-table lists sent while their rows are read, with the
	// export (LIMITS__MAX_STREAMED_ANSWERS and a key's share of it); nil: no bound.
	StreamedAnswers *keyslots.Slots
	// Streams carries the live answers of subscriptions (live.go); nil: none are accepted.
	Streams *Streams
	// Log receives the resolver errors that clients see only as a code.
	Log *slog.Logger
	// Meter creates the operation-duration instrument, with DurationBuckets as its boundaries
	// (seconds); a nil Meter measures nothing.
	Meter           metric.Meter
	DurationBuckets []float64
	// TracerProvider makes each operation a span (tracing.go); nil traces nothing.
	TracerProvider trace.TracerProvider
	// GqlgenOnly leaves every value to gqlgen's own marshaling, without the direct-JSON path:
	// the reference the tests compare the direct JSON with, byte for byte.
	GqlgenOnly bool
	// AroundFields, when set, is one more field middleware, outermost (tests count with it
	// the fields gqlgen resolves one by one).
	AroundFields graphql.FieldMiddleware
}

// New builds the endpoint of one schema (see Endpoint).
func New(es graphql.ExecutableSchema, o Options) *Endpoint {
	exec := executor.New(rootFieldCost{es})
	cache := newQueryCache()
	exec.SetQueryCache(cache)
	exec.Use(extension.Introspection{})
	// Persisted queries first: the limits check the document a hash stands for.
	exec.Use(persistedQueries{extension.AutomaticPersistedQuery{Cache: newAPQCache()}})
	exec.Use(newQueryLimits(o.MaxQueryDepth, o.MaxQueryComplexity, o.MaxRootFields, cache, es.Schema()))
	exec.Use(newOperationTrace(o.TracerProvider))
	exec.Use(newOperationMetrics(o))
	// Innermost of the response interceptors: spans and metrics see the errors the client sees.
	exec.Use(errorLimit{})
	// queryLimits parses each document before the executor would; this bounds any other parse.
	exec.SetParserTokenLimit(maxTokens)
	if o.AroundFields != nil {
		exec.AroundFields(o.AroundFields)
	}
	if !o.GqlgenOnly {
		d := directJSON{w: gqljson.New(es.Schema())}
		exec.AroundRootFields(d.rootFields)
		exec.AroundFields(d.fields)
	}
	exec.SetErrorPresenter(presentError(o.Log))
	exec.SetRecoverFunc(func(ctx context.Context, p any) error {
		return fmt.Errorf("panic in resolver: %v", p)
	})
	return &Endpoint{route: o.Route, exec: exec, cache: o.Cache, timeout: o.RequestTimeout, timedOut: o.TimedOut, parallelism: o.RequestParallelism, streams: o.Streams, streamed: o.StreamedAnswers, liveAttrs: routeAttrs(o.Route)}
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
		case errors.Is(err, keyslots.ErrRefused): // answered as the refusal it is (429 or 503)
		case clientwatch.IsClientGone(err): // nobody reads this answer; not a failure of the service
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
