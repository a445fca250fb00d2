package app

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gofiber/fiber/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// meterName is the instrumentation scope of the HTTP and GraphQL instruments.
const meterName = "github.com/emsanalytics/emsquery/app"

// durationBuckets are OpenTelemetry's advised boundaries for HTTP durations (seconds), widened
// for long CSV exports.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120}

// maxAttrSets bounds each cache of attribute sets; past it a set is built per measurement.
const maxAttrSets = 2000

// serviceMetrics holds the HTTP server's and the GraphQL endpoints' instruments. Attribute sets
// are built once per combination and cached, so a request allocates nothing for its metrics
// beyond what the OpenTelemetry SDK needs.
type serviceMetrics struct {
	duration   metric.Float64Histogram
	active     metric.Int64UpDownCounter
	operations metric.Float64Histogram

	activeSets map[string][]metric.AddOption // by method, built up front
	httpSets   attrCache[httpKey]
	gqlSets    attrCache[graphQLKey]

	routesOnce sync.Once
	routes     map[routeKey]bool // the app's routes other than middleware
}

type routeKey struct{ method, path string }

type httpKey struct {
	method, route string
	status        int
}

type graphQLKey struct {
	route, opType, opName, rootFields, errCode string
}

// newServiceMetrics creates the instruments on mp. Failing to create one (it cannot with these
// constant names) is logged, and the SDK then hands out an instrument that measures nothing.
func newServiceMetrics(mp metric.MeterProvider, log *slog.Logger) *serviceMetrics {
	meter := mp.Meter(meterName)
	m := &serviceMetrics{activeSets: map[string][]metric.AddOption{}}
	var errs [3]error
	m.duration, errs[0] = meter.Float64Histogram("http.server.request.duration",
		metric.WithDescription("Duration of HTTP server requests."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.active, errs[1] = meter.Int64UpDownCounter("http.server.active_requests",
		metric.WithDescription("Number of HTTP server requests in flight."),
		metric.WithUnit("{request}"))
	m.operations, errs[2] = meter.Float64Histogram("graphql.server.operation.duration",
		metric.WithDescription("Duration of GraphQL operations, from reading the request to the response, by endpoint, operation and root field."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	if err := errors.Join(errs[:]...); err != nil {
		log.Error("metrics: cannot create the HTTP instruments", "error", err.Error())
	}
	for _, method := range append(knownMethods[:], otherMethod) {
		m.activeSets[method] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String("http.request.method", method),
			attribute.String("url.scheme", "http"),
		))}
	}
	m.httpSets.build = func(k httpKey) attribute.Set {
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
		return attribute.NewSet(kv...)
	}
	m.gqlSets.build = func(k graphQLKey) attribute.Set {
		kv := make([]attribute.KeyValue, 0, 5)
		kv = append(kv,
			attribute.String("http.route", k.route),
			attribute.String("graphql.operation.type", k.opType),
			attribute.String("graphql.operation.name", k.opName),
			attribute.String("graphql.root_field", k.rootFields))
		if k.errCode != "" {
			kv = append(kv, attribute.String("error.type", k.errCode))
		}
		return attribute.NewSet(kv...)
	}
	m.gqlSets.own = func(k graphQLKey) graphQLKey {
		k.opName, k.rootFields = strings.Clone(k.opName), strings.Clone(k.rootFields)
		return k
	}
	return m
}

// handler is the Fiber middleware that measures every request: the active requests while it
// runs, then its duration with the matched route's template (never the raw path, which would
// make a series per id or typo), and the GraphQL operation it carried, if any.
func (m *serviceMetrics) handler(c *fiber.Ctx) error {
	start := time.Now()
	method := normalizeMethod(c.Method())
	active := m.activeSets[method]
	ctx := c.UserContext()
	m.active.Add(ctx, 1, active...)
	defer m.active.Add(ctx, -1, active...)

	// The GraphQL extension fills the slot; one allocation serves as context and record.
	slot := &graphQLSlot{Context: ctx}
	c.SetUserContext(slot)

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
	end := time.Now()
	m.duration.Record(ctx, end.Sub(start).Seconds(), m.httpSets.get(httpKey{method, route, status})...)
	if g := &slot.op; g.seen {
		opStart := g.start
		if opStart.IsZero() || opStart.Before(start) {
			opStart = start
		}
		k := graphQLKey{route: route, opType: g.opType, opName: g.opName, rootFields: g.rootFields, errCode: g.errCode}
		m.operations.Record(ctx, g.end.Sub(opStart).Seconds(), m.gqlSets.get(k)...)
	}
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

// otherValue stands for an error without a code.
const otherValue = "_OTHER"

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

// attrCache keeps the attribute sets built for each key, up to maxAttrSets, as option slices
// (passing a slice with ... allocates nothing).
type attrCache[K comparable] struct {
	build func(K) attribute.Set
	// own, when set, copies the key's strings before the cache keeps it, so that a kept key
	// does not pin a larger string (a whole GraphQL document) it was cut from.
	own  func(K) K
	mu   sync.RWMutex
	sets map[K][]metric.RecordOption
}

func (c *attrCache[K]) get(k K) []metric.RecordOption {
	c.mu.RLock()
	opt, ok := c.sets[k]
	c.mu.RUnlock()
	if ok {
		return opt
	}
	if c.own != nil {
		k = c.own(k)
	}
	opt = []metric.RecordOption{metric.WithAttributeSet(c.build(k))}
	c.mu.Lock()
	if c.sets == nil {
		c.sets = map[K][]metric.RecordOption{}
	}
	if len(c.sets) < maxAttrSets {
		c.sets[k] = opt
	}
	c.mu.Unlock()
	return opt
}

// graphQLSlot is the request's context.Context, carrying a record of its GraphQL operation
// that graphQLMetrics fills and the HTTP middleware measures once the route is known.
type graphQLSlot struct {
	context.Context
	op graphQLOperation
}

type graphQLSlotKey struct{}

func (s *graphQLSlot) Value(key any) any {
	if key == (graphQLSlotKey{}) {
		return s
	}
	return s.Context.Value(key)
}

type graphQLOperation struct {
	seen       bool
	start, end time.Time
	opType     string
	opName     string
	rootFields string
	errCode    string
}

// graphQLMetrics is the gqlgen extension that notes, for the metrics, each operation's type,
// name, root fields and error code. It measures nothing itself: the HTTP middleware does, with
// the endpoint's route.
type graphQLMetrics struct{}

var (
	_ graphql.HandlerExtension    = graphQLMetrics{}
	_ graphql.ResponseInterceptor = graphQLMetrics{}
)

func (graphQLMetrics) ExtensionName() string                   { return "OperationMetrics" }
func (graphQLMetrics) Validate(graphql.ExecutableSchema) error { return nil }

// maxOperationNameLength bounds the operation name kept as an attribute.
const maxOperationNameLength = 100

// InterceptResponse runs for every response, parse and validation failures included.
func (graphQLMetrics) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	slot, _ := ctx.Value(graphQLSlotKey{}).(*graphQLSlot)
	if slot == nil || slot.op.seen {
		return resp
	}
	op := &slot.op
	op.seen = true
	op.end = time.Now()
	if graphql.HasOperationContext(ctx) {
		oc := graphql.GetOperationContext(ctx)
		op.start = oc.Stats.OperationStart
		if oc.Operation != nil {
			op.opType = string(oc.Operation.Operation)
			op.opName = oc.Operation.Name
			if len(op.opName) > maxOperationNameLength {
				op.opName = op.opName[:maxOperationNameLength]
			}
			op.rootFields = rootFields(oc.Operation.SelectionSet)
		}
	}
	if resp != nil {
		for _, e := range resp.Errors {
			if code, _ := e.Extensions["code"].(string); code != "" {
				op.errCode = code
				break
			}
		}
		if op.errCode == "" && len(resp.Errors) > 0 {
			op.errCode = otherValue
		}
	}
	return resp
}

// rootFields names the operation's top-level fields (through fragments), sorted and joined
// with commas when there are several.
func rootFields(set ast.SelectionSet) string {
	var names []string
	var walk func(ast.SelectionSet, int)
	walk = func(set ast.SelectionSet, depth int) {
		if depth > 8 {
			return
		}
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				if !slices.Contains(names, s.Name) {
					names = append(names, s.Name)
				}
			case *ast.InlineFragment:
				walk(s.SelectionSet, depth+1)
			case *ast.FragmentSpread:
				if s.Definition != nil {
					walk(s.Definition.SelectionSet, depth+1)
				}
			}
		}
	}
	walk(set, 0)
	if len(names) == 1 {
		return names[0]
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
