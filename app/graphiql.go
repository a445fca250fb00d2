package app

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/emsanalytics/emsquery/platform/graphiql"
	"github.com/emsanalytics/emsquery/platform/requestbody"
)

// graphiQLAssets is where the GraphiQL page's scripts and styles are served, without a key.
const graphiQLAssets = "/graphiql/"

// mountGraphiQLAssets serves the page's files from the embedded copies themselves: through
// the net/http adaptor every request copied its file (1 MB for the script) into the response,
// and clients that ask and never read could make the service hold gigabytes.
func (s *Server) mountGraphiQLAssets() {
	s.fiber.All(graphiQLAssets+"*", func(c *fiber.Ctx) error {
		rep := graphiql.AssetReply(c.Method(), c.Path(), c.Query("v"),
			graphiql.AcceptsGzip(c.Get(fiber.HeaderAcceptEncoding)), c.Get(fiber.HeaderIfNoneMatch))
		for k, vs := range rep.Header {
			for _, v := range vs {
				c.Response().Header.Add(k, v)
			}
		}
		c.Status(rep.Status)
		// Sent from the shared copy, never written to (fasthttp only reads a raw body).
		c.Response().SetBodyRaw(rep.Body)
		return nil
	})
}

// mountGraphQL serves one GraphQL endpoint: a browser's GET gets the GraphiQL page without a
// key; every other request goes to the endpoint's handlers (the key check, then the GraphQL
// path: platform/gqlhttp).
func (s *Server) mountGraphQL(path, keyHeader string, handlers []fiber.Handler) {
	prefix := s.cfg.RootPath
	page := adaptor.HTTPHandler(graphiql.Page{
		Title:      "emsquery " + path,
		Endpoint:   prefix + path,
		AssetsPath: prefix + graphiQLAssets,
		HeaderName: keyHeader,
	})
	s.fiber.Get(path, func(c *fiber.Ctx) error {
		if wantsPage(c) {
			// The net/http adaptor would read a body the page does not use, whole.
			requestbody.DropBody(c)
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
