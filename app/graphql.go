package app

import (
	"log/slog"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/app/gqllookups"
	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/app/gqlserve"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/graphqlserver"
)

// GraphQLEndpoints are the executable schemas, one per GraphQL path.
type GraphQLEndpoints struct {
	Public  gqlpublic.Schema
	Serve   gqlserve.Schema   // /serve/graphql: the reporting client's main report
	Lookups gqllookups.Schema // /lookups/graphql: the reporting client's drop-down lists
}

// directJSONTypes are the object types whose values platform/gqljson writes to JSON itself
// instead of gqlgen's per-field marshalers: plain structs bound field by field with json tags,
// with built-in scalars, lists and each other. The large lists (patients, oxygens, the main
// report's rows) are why; even a list of twenty stations costs gqlgen three times as much. A
// lone small object (records_count's) is cheaper through gqlgen, so RecordsCount is not here.
// directjson_internal_test.go checks the answers are gqlgen's own, byte for byte.
var directJSONTypes = []string{
	"Patient", "Oxygen", "Resource", "StationResources", "StationResource",
	"DistinctValue", "UniqueCount", "SeriesPoint", "MeasureStats", "GroupValue", "Percentile",
	"MainReport", "MainReportRow", "MainReportSummary", "ValueCount", "Station",
}

// bulkFields answer whole tables (hundreds of thousands of rows): see gqljson.LimitBulk.
var bulkFields = []string{"patients", "oxygens"}

// graphQLOptions are the engine options of the GraphQL endpoint at route; meter creates its
// operation metrics (nil: none), tp its operation spans.
func graphQLOptions(route string, limits config.Limits, log *slog.Logger, meter metric.Meter, tp trace.TracerProvider) graphqlserver.Options {
	return graphqlserver.Options{
		Route:              route,
		MaxQueryDepth:      int(limits.QueryDepth),
		MaxQueryComplexity: int(limits.QueryComplexity),
		Log:                log,
		Meter:              meter,
		DurationBuckets:    durationBuckets,
		TracerProvider:     tp,
		DirectJSON:         &graphqlserver.DirectJSON{Types: directJSONTypes, BulkFields: bulkFields},
	}
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
