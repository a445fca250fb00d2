package app

import (
	"net"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/emsanalytics/emsquery/platform/clientaddr"
	"github.com/emsanalytics/emsquery/platform/logging"
)

// What the middleware every route runs costs a request, without the network: a route that
// answers a few bytes, behind the middleware as the server installs it (the access line logged
// to a file, metrics and traces off as make bench runs the service), and alone.
//
//	go test ./app -run '^$' -bench Middleware -benchmem
func BenchmarkMiddleware(b *testing.B) {
	for _, tc := range []struct {
		name string
		with bool
	}{{"none", false}, {"all", true}} {
		b.Run(tc.name, func(b *testing.B) {
			log, cleanup, err := logging.New(logging.Options{File: true, Path: b.TempDir(), Filename: "service.log", MaxSize: 10 << 20, MaxFiles: 2})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(cleanup)
			clients, err := clientaddr.New(nil)
			if err != nil {
				b.Fatal(err)
			}
			f := fiber.New(fiber.Config{DisableStartupMessage: true, WriteBufferSize: writeBufferSize, StreamRequestBody: true, DisablePreParseMultipartForm: true})
			s := &Server{fiber: f, cfg: Options{CORSEnabled: true, CORSAllowOrigins: []string{"http://localhost:3000"}}, log: log,
				metrics: newServiceMetrics(metricnoop.NewMeterProvider(), log), tracer: tracenoop.NewTracerProvider(), clients: clients}
			if tc.with {
				s.middleware("x-api-key")
			}
			f.Post("/graphql", func(c *fiber.Ctx) error { return c.SendString(`{"data":{}}`) })
			h := f.Handler()
			var req fasthttp.Request
			req.Header.SetMethod(fasthttp.MethodPost)
			req.SetRequestURI("/graphql")
			req.Header.SetContentType("application/json")
			req.SetBodyString(`{"query":"{ x }"}`)
			var ctx fasthttp.RequestCtx
			addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
			b.ReportAllocs()
			for b.Loop() {
				ctx.Init(&req, addr, nil)
				h(&ctx)
				if ctx.Response.StatusCode() != fiber.StatusOK {
					b.Fatalf("status %d", ctx.Response.StatusCode())
				}
			}
		})
	}
}
