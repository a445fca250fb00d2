package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gofiber/fiber/v2"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/emsanalytics/emsquery/app/gqllookups"
	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/app/gqlserve"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/config"
)

// GraphQLEndpoints are the executable schemas, one per GraphQL path.
type GraphQLEndpoints struct {
	Public  gqlpublic.Schema
	Serve   gqlserve.Schema   // /serve/graphql: the reporting client's main report
	Lookups gqllookups.Schema // /lookups/graphql: the reporting client's drop-down lists
}

// newGraphQLServer builds the gqlgen server shared by every endpoint's schema: explicit
// transports, a parsed-query cache (cache.go), persisted queries, the document limits
// (limits.go) and the contract's error codes.
func newGraphQLServer(es graphql.ExecutableSchema, log *slog.Logger, limits config.Limits) *handler.Server {
	srv := handler.New(rootFieldCost{es})
	srv.AddTransport(directJSONTransport(transport.GET{}))
	srv.AddTransport(directJSONTransport(transport.POST{}))
	cache := newQueryCache()
	srv.SetQueryCache(cache)
	srv.Use(extension.Introspection{})
	// Persisted queries first: the limits check the document a hash stands for.
	srv.Use(persistedQueries{extension.AutomaticPersistedQuery{Cache: newAPQCache()}})
	srv.Use(newQueryLimits(limits, cache))
	srv.Use(graphQLMetrics{})
	useDirectJSON(srv, es)
	srv.SetErrorPresenter(presentError(log))
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
		case isClientGone(err): // nobody reads this answer; not a failure of the service
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

// graphQLUnauthorized is the 401 of a GraphQL path: a GraphQL errors body.
func graphQLUnauthorized(header string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		msg := "wrong API key in header " + header
		if c.Get(header) == "" {
			msg = "missing API key: send it in the " + header + " header"
		}
		return c.Status(fiber.StatusUnauthorized).JSON(fiber.Map{
			"errors": []fiber.Map{{"message": msg, "extensions": fiber.Map{"code": apierr.Unauthenticated}}},
		})
	}
}

// restUnauthorized is the 401 of a REST path.
func restUnauthorized(msg string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		return c.Status(fiber.StatusUnauthorized).JSON(apierr.NewBody(apierr.Unauthenticated, msg))
	}
}
