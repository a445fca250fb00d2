// Package app is the service's HTTP server: it mounts the GraphQL endpoints (engines from
// platform/gqlhttp over the gqlgen packages app/gql*), the modules' REST routes, the health
// routes and the GraphiQL page on Fiber, with the request id, access log, root path, auth and
// HTTP metrics middleware, and runs it until it is told to stop.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/modules/reports"
	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/clientaddr"
	"github.com/emsanalytics/emsquery/platform/connlimit"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqllive"
	"github.com/emsanalytics/emsquery/platform/keyslots"
	"github.com/emsanalytics/emsquery/platform/requestbody"
	"github.com/emsanalytics/emsquery/platform/serverconn"
)

// Server is the HTTP server of the service.
type Server struct {
	fiber   *fiber.App
	cfg     Options
	log     *slog.Logger
	metrics *serviceMetrics
	tracer  trace.TracerProvider
	streams *gqllive.Streams
	// clients tells a request's client address (APP__TRUSTED_PROXIES).
	clients *clientaddr.Resolver
	// draining is set on SIGTERM for APP__SHUTDOWN_DELAY: healthz answers 503 while every
	// route still serves.
	draining atomic.Bool
}

// writeBufferSize is fasthttp's buffer for writing a response: a response's head and a body of
// up to about this size go out in one write. With fasthttp's 4 KiB, an answer of 4 to 64 KiB
// (the resource and station lists) took two system calls, which was a third of a cached
// answer's processor time. The buffer is taken from a pool for the time of one response, not
// held per connection; bodies from 64 KiB are sent from where they are (platform/responsebody).
const writeBufferSize = 64 << 10

// Options are the server's settings (APP__*, SECURITY__CORS__*).
type Options struct {
	Host                    string
	Port                    int
	RootPath                string // "" or a path without a trailing slash
	HealthChecksEnabled     bool
	MaxBodyBytes            int64
	ShutdownTimeout         time.Duration
	ShutdownDelay           time.Duration
	TrustedProxies          []string
	ReadTimeout             time.Duration
	IdleTimeout             time.Duration
	WriteTimeout            time.Duration
	MaxConnections          int
	MaxConnectionsPerClient int
	CORSEnabled             bool
	CORSAllowOrigins        []string
}

// GraphQLLimits are the LIMITS__* settings of the GraphQL endpoints.
type GraphQLLimits struct {
	QueryDepth         int
	QueryComplexity    int
	MaxRootFields      int
	RequestParallelism int
	RequestTimeout     time.Duration
}

// NewServer builds the Fiber app with every route of the service. cache keeps the GraphQL
// endpoints' answers (nil: caching off).
func NewServer(cfg Options, limits GraphQLLimits, log *slog.Logger, db *database.DB, checker *auth.Checker, graphs GraphQLEndpoints, cache *answercache.Cache, streams *gqllive.Streams, streamed keyslots.StreamedAnswers, mp metric.MeterProvider, tp trace.TracerProvider, export reports.ExportHandler) (*Server, error) {
	f := fiber.New(fiber.Config{
		AppName:               "emsquery",
		DisableStartupMessage: true,
		BodyLimit:             int(cfg.MaxBodyBytes),
		ErrorHandler:          restError(log),
		// A request, headers and body, must arrive within APP__READ_TIMEOUT of its first byte
		// (of the connection's opening, for its first request): a client that trickles a header
		// line now and then is cut off then, whatever it sends. fasthttp sets the connection's
		// read deadline; the client watch (platform/clientwatch) looks past it.
		ReadTimeout: cfg.ReadTimeout,
		// Proxies in front may keep connections open; idle ones are closed after this.
		IdleTimeout:     cfg.IdleTimeout,
		WriteBufferSize: writeBufferSize,
		// Bodies are read as they arrive, by the handlers that take one (requestbody.ReadBody),
		// after the key check: fasthttp would otherwise allocate each announced Content-Length
		// before any handler runs, for anyone (see platform/requestbody).
		StreamRequestBody: true,
		// No route takes a form: fasthttp would read a multipart body whole before the handler.
		DisablePreParseMultipartForm: true,
	})
	// A body over the limit (APP__MAX_BODY_BYTES), or without a valid key, is not read at all
	// (StreamBodies' middleware answers the first, as fasthttp did before any middleware ran;
	// the routes' key check the second), and a connection whose request's body was not read to
	// its end closes after the answer. Before any other middleware: its own comes first.
	requestbody.StreamBodies(f, checker.CarriesKey)
	// Responses sent while shutting down say Connection: close, so a client does not send its
	// next request on a connection that is about to close.
	f.Server().CloseOnShutdown = true
	// The settings refused a value clientaddr would.
	clients, err := clientaddr.New(cfg.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("APP__TRUSTED_PROXIES: %w", err)
	}
	s := &Server{fiber: f, cfg: cfg, log: log, metrics: newServiceMetrics(mp, log), tracer: tp, streams: streams, clients: clients}
	s.routes(limits, db, checker, graphs, cache, streams, streamed, export)
	return s, nil
}

// Run serves until ctx is cancelled, then, for APP__SHUTDOWN_DELAY, serves on with healthz
// answering 503, then stops accepting, lets requests in flight finish (up to
// APP__SHUTDOWN_TIMEOUT) and returns.
func (s *Server) Run(ctx context.Context) error {
	addr := net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (APP__HOST, APP__PORT): %w", addr, err)
	}
	s.log.Info("listening", "address", "http://"+ln.Addr().String()+s.cfg.RootPath,
		"read_timeout", s.cfg.ReadTimeout.String(), "idle_timeout", s.cfg.IdleTimeout.String(),
		"max_connections", s.cfg.MaxConnections, "max_connections_per_client", s.cfg.MaxConnectionsPerClient,
		"write_timeout", s.cfg.WriteTimeout.String())
	served := make(chan error, 1)
	// At most APP__MAX_CONNECTIONS connections are open, APP__MAX_CONNECTIONS_PER_CLIENT of them
	// from one address; they close gracefully for a client still sending (a body over the
	// limit), and count until their socket is closed. A response its client takes no byte of
	// for APP__WRITE_TIMEOUT is abandoned and its connection reset.
	limited := connlimit.New(ln, s.cfg.MaxConnections, s.cfg.MaxConnectionsPerClient, s.log)
	go func() { served <- s.fiber.Listener(serverconn.Lingering(limited, s.cfg.WriteTimeout)) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if d := s.cfg.ShutdownDelay; d > 0 {
		// A load balancer (Kubernetes' endpoints controller) still sends requests for a while
		// after the stop began: they are served, while healthz tells it to stop sending.
		s.draining.Store(true)
		s.log.Info("draining: /v1/healthz answers 503 while every route still serves", "shutdown_delay", d.String())
		select {
		case err := <-served:
			return fmt.Errorf("serve: %w", err)
		case <-time.After(d):
		}
	}
	s.log.Info("shutting down: finishing requests in flight", "timeout", s.cfg.ShutdownTimeout.String())
	// Live answers last until their clients leave: they end now, each with its complete event.
	s.streams.End()
	if err := s.fiber.ShutdownWithTimeout(s.cfg.ShutdownTimeout); err != nil {
		// A stop that had to cut off requests (a long export, say) is still an orderly stop:
		// say so, and go on closing the pool and flushing.
		s.log.Warn("requests still running at APP__SHUTDOWN_TIMEOUT were cut off", "error", err.Error())
	}
	<-served
	s.log.Info("stopped")
	return nil
}

// restError answers every error that reaches Fiber with the contract's REST error body.
func restError(log *slog.Logger) fiber.ErrorHandler {
	return func(c *fiber.Ctx, err error) error {
		var fe *fiber.Error
		var code apierr.Code
		var msg string
		switch {
		case errors.As(err, &fe):
			code, msg = fiberCode(fe)
		default:
			code, msg = apierr.Classify(err)
			if code == apierr.Internal {
				log.ErrorContext(c.UserContext(), "request failed", "error", err.Error(), "path", c.Path())
			}
		}
		status := apierr.Status(code)
		if fe != nil && fe.Code == fiber.StatusRequestTimeout {
			status = fe.Code // the client was too slow, not a gateway behind the service
		}
		if err := c.Status(status).JSON(apierr.NewBody(code, msg)); err != nil {
			return err
		}
		// Errors raised by the HTTP layer itself (body too large, malformed request) reach this
		// handler without passing the middleware: give them a request id and an access line too.
		if len(c.Response().Header.Peek(fiber.HeaderXRequestID)) == 0 {
			id := utils.UUIDv4()
			c.Set(fiber.HeaderXRequestID, id)
			method, path := c.Method(), c.Path()
			if fe != nil && fe.Code == fiber.StatusBadRequest {
				// What a request that did not parse left in the method and path is not to be
				// trusted or repeated.
				method, path = "-", "-"
			}
			log.Info("request", "method", method, "path", path, "status", status, "request_id", id)
		}
		return nil
	}
}

// malformedRequest is the whole message of a 400 for a request that is not HTTP.
const malformedRequest = "malformed HTTP request"

func fiberCode(fe *fiber.Error) (apierr.Code, string) {
	switch fe.Code {
	case fiber.StatusRequestEntityTooLarge:
		return apierr.PayloadTooLarge, "request body larger than the service accepts (APP__MAX_BODY_BYTES)"
	case fiber.StatusNotFound:
		return apierr.NotFound, "no such route"
	case fiber.StatusMethodNotAllowed:
		return apierr.BadUserInput, "method not allowed on this route"
	case fiber.StatusBadRequest:
		// Only fasthttp's parser raises a 400 (the handlers return apierr errors), and its message
		// quotes the request's bytes, headers included (an API key): the client gets a fixed text.
		return apierr.BadUserInput, malformedRequest
	case fiber.StatusRequestTimeout:
		return apierr.Timeout, "the request did not arrive whole within APP__READ_TIMEOUT"
	default:
		if fe.Code >= 500 {
			return apierr.Internal, apierr.InternalMessage
		}
		return apierr.BadUserInput, fe.Message
	}
}
