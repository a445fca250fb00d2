package app

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/cors"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/emsanalytics/emsquery/modules/reports"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/database"
)

func (s *Server) routes(db *database.DB, checker *auth.Checker, graphs GraphQLEndpoints, export *reports.Exporter) {
	f, cfg := s.fiber, s.cfg
	if rp := string(cfg.App.RootPath); rp != "" {
		f.Use(stripRootPath(rp))
	}
	f.Use(s.metrics.handler)
	f.Use(saneRequestID, requestid.New(requestid.Config{Generator: utils.UUIDv4}), requestContext, accessLog(s.log))
	f.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: recovered(s.log)}))
	if cfg.Security.CORS.Enabled {
		f.Use(cors.New(cors.Config{
			AllowOrigins:  strings.Join(cfg.Security.CORS.AllowOrigins, ","),
			AllowMethods:  "GET,POST,OPTIONS",
			AllowHeaders:  strings.Join([]string{checker.Header(), auth.ExportHeader, fiber.HeaderContentType, fiber.HeaderAccept, fiber.HeaderXRequestID}, ","),
			ExposeHeaders: fiber.HeaderXRequestID + "," + fiber.HeaderContentDisposition,
			MaxAge:        600,
		}))
	}

	f.Get("/v1/ping", ping)
	if cfg.App.HealthChecksEnabled {
		f.Get("/v1/healthz", healthz(db))
	}

	s.mountGraphiQLAssets()
	gqlAuth := checker.Require(checker.Allowed, graphQLUnauthorized(checker.Header()))
	// GraphQL requests end at LIMITS__REQUEST_TIMEOUT or when their client leaves (bounded).
	s.mountGraphQL("/graphql", s.bounded(netHTTP(newGraphQLServer(graphs.Public, s.log, cfg.Limits))), gqlAuth)
	s.mountGraphQL("/serve/graphql", s.bounded(netHTTP(newGraphQLServer(graphs.Serve, s.log, cfg.Limits))), gqlAuth)
	s.mountGraphQL("/lookups/graphql", s.bounded(netHTTP(newGraphQLServer(graphs.Lookups, s.log, cfg.Limits))), gqlAuth)

	f.Get("/v1/reports/main-report/export", checker.Require(checker.ExportAllowed, restUnauthorized(exportAuthMessage(checker))), watched(exportMainReport(export, s.log)))
}
