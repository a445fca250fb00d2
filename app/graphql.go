package app

import (
	"context"
	"log/slog"
	"maps"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/app/gqllookups"
	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/app/gqlserve"
	"github.com/emsanalytics/emsquery/modules/measures"
	"github.com/emsanalytics/emsquery/modules/patients"
	"github.com/emsanalytics/emsquery/modules/reports"
	"github.com/emsanalytics/emsquery/modules/resources"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
	"github.com/emsanalytics/emsquery/platform/gqlhttp"
	"github.com/emsanalytics/emsquery/platform/gqllive"
)

// GraphQLEndpoints are the executable schemas, one per GraphQL path.
type GraphQLEndpoints struct {
	Public  gqlpublic.Schema
	Serve   gqlserve.Schema   // /serve/graphql: the reporting client's main report
	Lookups gqllookups.Schema // /lookups/graphql: the reporting client's drop-down lists
}

// graphQLOptions are the engine options of the GraphQL endpoint at route; meter creates its
// operation metrics (nil: none), tp its operation spans, cache keeps its answers (nil: none).
func graphQLOptions(route string, limits GraphQLLimits, cache *answercache.Cache, streams *gqllive.Streams, log *slog.Logger, meter metric.Meter, tp trace.TracerProvider) gqlhttp.Options {
	timeout := limits.RequestTimeout
	return gqlhttp.Options{
		Options: gqlexec.Options{
			Route:              route,
			MaxQueryDepth:      limits.QueryDepth,
			MaxQueryComplexity: limits.QueryComplexity,
			MaxRootFields:      limits.MaxRootFields,
			RequestParallelism: limits.RequestParallelism,
			Log:                log,
			Meter:              meter,
			DurationBuckets:    durationBuckets,
			TracerProvider:     tp,
		},
		// GraphQL requests end at LIMITS__REQUEST_TIMEOUT or when their client leaves.
		RequestTimeout: timeout,
		TimedOut:       apierr.RequestTimedOut(timeout, context.DeadlineExceeded),
		Cache:          cache,
		Streams:        streams,
		FieldTables:    EndpointTables[route],
	}
}

// EndpointTables are, per GraphQL path, the tables each root field reads (its queries' and its
// subscriptions'), as the modules declare them beside their statements (contract 6.13): with
// the replication change source an answer ends only when one of them changes. A field left out
// would count as reading any table; a test holds every field of every schema to a declaration.
var EndpointTables = map[string]gqlhttp.FieldTables{
	"/graphql":         fieldTables(stats.FieldTables, resources.FieldTables, patients.FieldTables, measures.FieldTables),
	"/serve/graphql":   fieldTables(reports.ServeFieldTables),
	"/lookups/graphql": fieldTables(reports.LookupsFieldTables, measures.LookupsFieldTables),
}

// fieldTables is the modules' declarations of one endpoint as one map (the schema admits a
// root field name once, so no two modules declare the same).
func fieldTables(modules ...map[string][]string) gqlhttp.FieldTables {
	ft := gqlhttp.FieldTables{}
	for _, m := range modules {
		maps.Copy(ft, m)
	}
	return ft
}

// graphQLRefusal answers a request the key check refuses (401, 403, 429) on a GraphQL path: a
// GraphQL errors body.
func graphQLRefusal(c *fiber.Ctx, r auth.Refusal) error {
	return c.Status(r.Status).JSON(fiber.Map{
		"errors": []fiber.Map{{"message": r.Message, "extensions": fiber.Map{"code": r.Code}}},
	})
}

// restRefusal answers a request the key check refuses on a REST path: the REST error body.
func restRefusal(c *fiber.Ctx, r auth.Refusal) error {
	return c.Status(r.Status).JSON(apierr.NewBody(r.Code, r.Message))
}

// NewStreams is the registry of the GraphQL endpoints' live answers (contract 6.11): at most
// LIMITS__MAX_STREAMS, LIMITS__MAX_STREAMS_PER_KEY of a key without max_streams, a heartbeat
// every APP__STREAM_HEARTBEAT, their questions and answers within CACHE__MAX_BYTES (c, the
// settings); their metrics on mp. The cleanup completes them.
func NewStreams(c gqllive.StreamsConfig, mp metric.MeterProvider) (*gqllive.Streams, func(), error) {
	c.Meter = mp.Meter(meterName)
	return gqllive.NewStreams(c)
}
