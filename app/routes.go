package app

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/cors"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"

	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/database"
)

func (s *Server) routes(db *database.DB, checker *auth.Checker, graphs GraphQLEndpoints) {
	f, cfg := s.fiber, s.cfg
	if rp := string(cfg.App.RootPath); rp != "" {
		f.Use(stripRootPath(rp))
	}
	f.Use(saneRequestID, requestid.New(), requestContext, accessLog(s.log))
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

	gqlAuth := checker.Require(checker.Allowed, graphQLUnauthorized(checker.Header()))
	s.mountGraphQL("/graphql", netHTTP(newGraphQLServer(graphs.Public, s.log)), gqlAuth)
}

// mountGraphQL serves one GraphQL endpoint; every request on it needs the key.
func (s *Server) mountGraphQL(path string, srv fiber.Handler, gqlAuth fiber.Handler) {
	s.fiber.All(path, gqlAuth, srv)
}
