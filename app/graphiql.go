package app

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/emsanalytics/emsquery/platform/graphiql"
)

// graphiQLAssets is where the GraphiQL page's scripts and styles are served, without a key.
const graphiQLAssets = "/graphiql/"

func (s *Server) mountGraphiQLAssets() {
	s.fiber.Get(graphiQLAssets+"*", adaptor.HTTPHandler(graphiql.Assets()))
}

// mountGraphQL serves one GraphQL endpoint: a browser's GET gets the GraphiQL page without a
// key; every other request goes to the endpoint's handlers (the key check, then the GraphQL
// path: platform/graphqlserver).
func (s *Server) mountGraphQL(path, keyHeader string, handlers []fiber.Handler) {
	prefix := string(s.cfg.RootPath)
	page := adaptor.HTTPHandler(graphiql.Page{
		Title:      "emsquery " + path,
		Endpoint:   prefix + path,
		AssetsPath: prefix + graphiQLAssets,
		HeaderName: keyHeader,
	})
	s.fiber.Get(path, func(c *fiber.Ctx) error {
		if wantsPage(c) {
			return page(c)
		}
		return c.Next()
	})
	s.fiber.All(path, handlers...)
}

// wantsPage mirrors graphiql.WantsPage for a Fiber request: a browser's GET (text/html in
// Accept) that carries no GraphQL query of its own.
func wantsPage(c *fiber.Ctx) bool {
	return c.Method() == fiber.MethodGet && c.Query("query") == "" &&
		strings.Contains(strings.ToLower(c.Get(fiber.HeaderAccept)), fiber.MIMETextHTML)
}
