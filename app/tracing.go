package app

import (
	"net"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/otel"
	"github.com/emsanalytics/emsquery/platform/requestctx"
	"github.com/emsanalytics/emsquery/platform/responsebody"
)

// tracerName is the instrumentation scope of the HTTP server spans.
const tracerName = "github.com/emsanalytics/emsquery/app"

// keyNameAttr is the attribute that names the request's API key (never the key) on the HTTP
// request metrics and the server span.
const keyNameAttr = "api_key.name"

// traceRequests is the Fiber middleware that makes each request one trace: it continues an
// incoming W3C traceparent and starts the HTTP server span, under which the GraphQL operation and
// the database statements are spans in turn. The span follows OpenTelemetry's HTTP server
// conventions: named "{method} {route}", with the method, path, scheme, route, status, server
// and client addresses, user agent and protocol version, error.type and an error status on 5xx;
// plus the request's key name. It records the path only: a query string may hold filter values
// (the export's, a GraphQL GET's), which no span may hold.
//
// It is the service's own because the middleware that exists for Fiber
// (github.com/gofiber/contrib/otelfiber) follows an old version of the conventions whose
// attributes (http.target, http.url) carry the query string, and records its own HTTP metrics
// besides the service's.
func (s *Server) traceRequests(tp trace.TracerProvider) fiber.Handler {
	tracer := tp.Tracer(tracerName)
	return func(c *fiber.Ctx) error {
		ctx := otel.Propagator.Extract(c.UserContext(), headerCarrier{&c.Request().Header})
		method := normalizeMethod(c.Method())
		ctx, span := tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer))
		c.SetUserContext(ctx)
		if !span.IsRecording() {
			// Not sampled, or no exporter: the context still carries the caller's trace id for
			// the log lines.
			defer span.End()
			return c.Next()
		}
		span.SetAttributes(requestAttributes(c, method)...)
		err := c.Next()
		status := c.Response().StatusCode()
		if err != nil {
			status = fiber.StatusInternalServerError // accessLog normally answers errors before
		}
		attrs := []attribute.KeyValue{semconv.HTTPResponseStatusCode(status)}
		if route := s.metrics.routeTemplate(c); route != "" {
			attrs = append(attrs, semconv.HTTPRoute(route))
			span.SetName(method + " " + route)
		}
		if name := auth.KeyName(c); name != "" {
			attrs = append(attrs, attribute.String(keyNameAttr, name))
		}
		if status >= 500 {
			attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(status)))
			span.SetStatus(codes.Error, "")
		}
		span.SetAttributes(attrs...)
		// The span ends with the answer's last byte (a streamed answer goes on after this).
		responsebody.AfterSent(c, func(_ int64, serr error) {
			if serr != nil {
				span.SetStatus(codes.Error, "the answer was cut: "+serr.Error())
			}
			span.End()
		})
		return err
	}
}

// requestAttributes are the server span's attributes known when the request arrives. Strings
// from the request are copied: fasthttp reuses its buffers once the request ends, and the span
// is exported later.
func requestAttributes(c *fiber.Ctx, method string) []attribute.KeyValue {
	path := c.OriginalURL()
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method),
		semconv.URLPath(strings.Clone(path)),
		semconv.URLScheme("http"),
		semconv.NetworkProtocolVersion(protocolVersion(c)),
	}
	if method == otherMethod {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(strings.Clone(c.Method())))
	}
	if host, port, err := net.SplitHostPort(string(c.Request().Host())); err == nil {
		attrs = append(attrs, semconv.ServerAddress(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	} else if h := c.Request().Host(); len(h) > 0 {
		attrs = append(attrs, semconv.ServerAddress(string(h)))
	}
	if addr, ok := c.Context().RemoteAddr().(*net.TCPAddr); ok {
		ip := addr.IP.String()
		client := ip
		if a, ok := requestctx.ClientAddress(c.UserContext()); ok {
			client = a.String() // behind a trusted proxy, the client it names
		}
		attrs = append(attrs, semconv.ClientAddress(client), semconv.NetworkPeerAddress(ip), semconv.NetworkPeerPort(addr.Port))
	}
	if ua := c.Request().Header.UserAgent(); len(ua) > 0 {
		attrs = append(attrs, semconv.UserAgentOriginal(string(ua)))
	}
	return attrs
}

func protocolVersion(c *fiber.Ctx) string {
	if c.Request().Header.IsHTTP11() {
		return "1.1"
	}
	return "1.0"
}

// headerCarrier reads the propagation headers (traceparent, tracestate) from a fasthttp request.
type headerCarrier struct{ h *fasthttp.RequestHeader }

func (hc headerCarrier) Get(key string) string { return string(hc.h.Peek(key)) }

// Set is not used: the server only reads the caller's trace context.
func (headerCarrier) Set(string, string) {}

func (hc headerCarrier) Keys() []string {
	var keys []string
	for k := range hc.h.All() {
		keys = append(keys, string(k))
	}
	return keys
}
