package app

import (
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/cors"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/emsanalytics/emsquery/modules/reports"
	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/clientwatch"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqlhttp"
	"github.com/emsanalytics/emsquery/platform/gqllive"
	"github.com/emsanalytics/emsquery/platform/keyslots"
)

func (s *Server) routes(limits GraphQLLimits, db *database.DB, checker *auth.Checker, graphs GraphQLEndpoints, cache *answercache.Cache, streams *gqllive.Streams, streamed keyslots.StreamedAnswers, export reports.ExportHandler) {
	f, cfg := s.fiber, s.cfg
	s.middleware(checker.Header())

	f.Get("/v1/ping", ping)
	if cfg.HealthChecksEnabled {
		f.Get("/v1/healthz", healthz(db, checker, cache, &s.draining))
	}

	s.mountGraphiQLAssets()
	for _, ep := range []struct {
		path   string
		scope  auth.Scope
		schema graphql.ExecutableSchema
	}{
		{"/graphql", auth.ScopeGraphQL, graphs.Public},
		{"/serve/graphql", auth.ScopeServe, graphs.Serve},
		{"/lookups/graphql", auth.ScopeLookups, graphs.Lookups},
	} {
		// Answers from memory where they may be (contract 6.5).
		o := graphQLOptions(ep.path, limits, cache, streams, s.log, s.metrics.meter, s.tracer)
		o.StreamedAnswers = streamed.Slots
		if ep.scope == auth.ScopeGraphQL {
			o.AroundFields = smallCellFields
		}
		endpoint := gqlhttp.New(ep.schema, o)
		s.mountGraphQL(ep.path, checker.Header(), endpoint.Handlers(checker.Require(ep.scope, graphQLRefusal)))
	}

	// The modules' REST routes: the key check, then the client watch (an export's own limit is
	// LIMITS__EXPORT_TIMEOUT, which the module applies).
	f.Get(reports.ExportPath, checker.Require(auth.ScopeExport, restRefusal), clientwatch.Watched(fiber.Handler(export)))
}

// middleware installs what every route runs before its own handlers. keyHeader is the header
// that carries the API key, which CORS lets a browser send.
func (s *Server) middleware(keyHeader string) {
	f, cfg := s.fiber, s.cfg
	// First the client's address, then the trace, so that everything after it (the access line
	// too) has both.
	f.Use(clientAddress(s.clients))
	f.Use(s.traceRequests(s.tracer))
	if rp := cfg.RootPath; rp != "" {
		f.Use(stripRootPath(rp))
	}
	f.Use(s.metrics.handler)
	f.Use(saneRequestID, requestid.New(requestid.Config{Generator: utils.UUIDv4}), requestContext, accessLog(s.log))
	f.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: recovered(s.log)}))
	if cfg.CORSEnabled {
		f.Use(cors.New(cors.Config{
			AllowOrigins: strings.Join(cfg.CORSAllowOrigins, ","),
			AllowMethods: "GET,POST,OPTIONS",
			// A dashboard in the browser revalidates (If-None-Match, ETag), backs off when told
			// (Retry-After), continues its own traces (traceparent) and shows what the cache did.
			AllowHeaders: strings.Join([]string{keyHeader, auth.ExportHeader, fiber.HeaderContentType, fiber.HeaderAccept, fiber.HeaderXRequestID,
				fiber.HeaderIfNoneMatch, "traceparent", "tracestate"}, ","),
			ExposeHeaders: strings.Join([]string{fiber.HeaderXRequestID, fiber.HeaderContentDisposition, answercache.HeaderCacheStatus,
				fiber.HeaderETag, fiber.HeaderRetryAfter}, ","),
			MaxAge: 600,
		}))
	}
}
