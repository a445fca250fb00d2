package app

import (
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/otel"
	"github.com/emsanalytics/emsquery/platform/responsebody"
)

// meterName is the instrumentation scope of the HTTP instruments and of the GraphQL engines'
// (created on the meter the server hands them).
const meterName = "github.com/emsanalytics/emsquery/app"

// durationBuckets are OpenTelemetry's advised boundaries for HTTP durations (seconds), widened
// for long CSV exports; the GraphQL engines' operation durations use them too.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120}

// serviceMetrics holds the HTTP server's instruments (the GraphQL engines record their
// operations themselves, on meter). Attribute sets are built once per combination and cached,
// so a request allocates nothing for its metrics beyond what the OpenTelemetry SDK needs.
type serviceMetrics struct {
	meter    metric.Meter
	duration metric.Float64Histogram
	active   metric.Int64UpDownCounter

	activeSets map[string][]metric.AddOption // by method, built up front
	httpSets   *otel.AttrSets[httpKey]

	routesOnce sync.Once
	routes     map[routeKey]bool // the app's routes other than middleware
}

type routeKey struct{ method, path string }

type httpKey struct {
	method, route, keyName string
	status                 int
}

// newServiceMetrics creates the instruments on mp. Failing to create one (it cannot with these
// constant names) is logged, and the SDK then hands out an instrument that measures nothing.
func newServiceMetrics(mp metric.MeterProvider, log *slog.Logger) *serviceMetrics {
	meter := mp.Meter(meterName)
	m := &serviceMetrics{meter: meter, activeSets: map[string][]metric.AddOption{}}
	var errs [2]error
	m.duration, errs[0] = meter.Float64Histogram("http.server.request.duration",
		metric.WithDescription("Duration of HTTP server requests."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.active, errs[1] = meter.Int64UpDownCounter("http.server.active_requests",
		metric.WithDescription("Number of HTTP server requests in flight."),
		metric.WithUnit("{request}"))
	if err := errors.Join(errs[:]...); err != nil {
		log.Error("metrics: cannot create the HTTP instruments", "error", err.Error())
	}
	for _, method := range append(knownMethods[:], otherMethod) {
		m.activeSets[method] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String("http.request.method", method),
			attribute.String("url.scheme", "http"),
		))}
	}
	m.httpSets = otel.NewAttrSets(func(k httpKey) attribute.Set {
		kv := make([]attribute.KeyValue, 0, 5)
		kv = append(kv,
			attribute.String("http.request.method", k.method),
			attribute.Int("http.response.status_code", k.status),
			attribute.String("url.scheme", "http"))
		if k.route != "" {
			kv = append(kv, attribute.String("http.route", k.route))
		}
		if k.status >= 500 {
			kv = append(kv, attribute.String("error.type", strconv.Itoa(k.status)))
		}
		if k.keyName != "" {
			kv = append(kv, attribute.String(keyNameAttr, k.keyName))
		}
		return attribute.NewSet(kv...)
	}, nil)
	return m
}

// handler is the Fiber middleware that measures every request: the active requests while it
// runs, then its duration with the matched route's template (never the raw path, which would
// make a series per id or typo) and the name of its API key (a handful of names, set by the
// operator).
func (m *serviceMetrics) handler(c *fiber.Ctx) error {
	start := time.Now()
	method := normalizeMethod(c.Method())
	active := m.activeSets[method]
	ctx := c.UserContext()
	m.active.Add(ctx, 1, active...)

	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		// accessLog normally turns errors into responses before this point.
		status = fiber.StatusInternalServerError
		var fe *fiber.Error
		if errors.As(err, &fe) {
			status = fe.Code
		}
	}
	route := m.routeTemplate(c)
	set := m.httpSets.Get(httpKey{method, route, auth.KeyName(c), status})
	// A streamed answer is active, and lasts, until its last byte is sent.
	responsebody.AfterSent(c, func(int64, error) {
		m.active.Add(ctx, -1, active...)
		m.duration.Record(ctx, time.Since(start).Seconds(), set...)
	})
	return err
}

// routeTemplate is the template of the route that handled the request ("/graphql",
// "/v1/healthz", "/graphiql/*"), or "" when no route did (a 404, a CORS preflight that the
// middleware answered): the route Fiber reports then is the last middleware that ran.
func (m *serviceMetrics) routeTemplate(c *fiber.Ctx) string {
	m.routesOnce.Do(func() {
		// Every route is registered before the server listens.
		m.routes = map[routeKey]bool{}
		for _, r := range c.App().GetRoutes(true) {
			m.routes[routeKey{r.Method, r.Path}] = true
		}
	})
	r := c.Route()
	if !m.routes[routeKey{r.Method, r.Path}] {
		return ""
	}
	return r.Path
}

var knownMethods = [...]string{
	fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch,
	fiber.MethodDelete, fiber.MethodConnect, fiber.MethodOptions, fiber.MethodTrace,
}

const otherMethod = "_OTHER"

// normalizeMethod returns the method as a constant string (Fiber's own may point into a buffer
// that is reused) or _OTHER, as the semantic conventions ask.
func normalizeMethod(m string) string {
	for _, k := range knownMethods {
		if m == k {
			return k
		}
	}
	return otherMethod
}
