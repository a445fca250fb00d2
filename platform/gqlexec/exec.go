// Package gqlexec is the execution of a GraphQL request, from its parameters to the response
// written: the document parsed, limited (limits.go) and validated once (cache.go), gqlgen's
// executor run with the service's error codes, operation metrics (metrics.go) and spans
// (tracing.go), and the answer written where each root field's JSON goes (answer.go), a whole
// table's rows read from the database as they are written. It knows no HTTP framework: the
// endpoint (platform/gqlhttp) reads the request and hands it a ResponseWriter.
package gqlexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/clientwatch"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqljson"
	"github.com/emsanalytics/emsquery/platform/keyslots"
	"github.com/emsanalytics/emsquery/platform/requestctx"
)

// Options are what an endpoint's executor is built from.
type Options struct {
	// Route is the path the endpoint is mounted at ("/graphql"): the http.route of its
	// operation metrics.
	Route string
	// MaxQueryDepth and MaxQueryComplexity are LIMITS__MAX_QUERY_DEPTH and
	// LIMITS__MAX_QUERY_COMPLEXITY (see limits.go).
	MaxQueryDepth      int
	MaxQueryComplexity int
	// MaxRootFields is LIMITS__MAX_ROOT_FIELDS (limits.go); 0: no bound.
	MaxRootFields int
	// RequestParallelism is LIMITS__REQUEST_PARALLELISM: the database connections one request
	// holds at once (its other root fields wait their turn); 0: no bound of its own.
	RequestParallelism int
	// StreamedAnswers bounds the whole-table lists sent while their rows are read, with the
	// export (LIMITS__MAX_STREAMED_ANSWERS and a key's share of it); nil: no bound.
	StreamedAnswers *keyslots.Slots
	// Log receives the resolver errors that clients see only as a code.
	Log *slog.Logger
	// Meter creates the operation-duration instrument, with DurationBuckets as its boundaries
	// (seconds); a nil Meter measures nothing.
	Meter           metric.Meter
	DurationBuckets []float64
	// TracerProvider makes each operation a span (tracing.go); nil traces nothing.
	TracerProvider trace.TracerProvider
	// GqlgenOnly leaves every value to gqlgen's own marshaling, without the direct-JSON path:
	// the reference the tests compare the direct JSON with, byte for byte.
	GqlgenOnly bool
	// AroundFields, when set, is one more field middleware, outermost (tests count with it
	// the fields gqlgen resolves one by one).
	AroundFields graphql.FieldMiddleware
}

// Executor runs the requests of one schema.
type Executor struct {
	exec        *executor.Executor
	parallelism int
	streamed    *keyslots.Slots

	// What direct resolution (direct.go) runs as gqlgen's executor would: the schema, the
	// fields it resolves directly (none: it is off), the response interceptors in the order
	// they were used, the error presenter and the recover function.
	es         graphql.ExecutableSchema
	direct     DirectFields
	responders []graphql.ResponseInterceptor
	presenter  graphql.ErrorPresenterFunc
	recover    graphql.RecoverFunc
}

// New builds the executor of one schema; a DirectSchema's fields are resolved directly
// (direct.go) unless o.GqlgenOnly.
func New(es graphql.ExecutableSchema, o Options) *Executor {
	x := &Executor{es: es, parallelism: o.RequestParallelism, streamed: o.StreamedAnswers}
	exec := executor.New(rootFieldCost{es})
	cache := newQueryCache()
	exec.SetQueryCache(cache)
	exec.Use(extension.Introspection{})
	// Persisted queries first: the limits check the document a hash stands for.
	exec.Use(persistedQueries{extension.AutomaticPersistedQuery{Cache: newAPQCache()}})
	exec.Use(newQueryLimits(o.MaxQueryDepth, o.MaxQueryComplexity, o.MaxRootFields, cache, es.Schema()))
	// The response interceptors, outermost first; innermost, the error bound: spans and
	// metrics see the errors the client sees.
	x.responders = []graphql.ResponseInterceptor{newOperationTrace(o.TracerProvider), newOperationMetrics(o), errorLimit{}}
	for _, ri := range x.responders {
		exec.Use(ri.(graphql.HandlerExtension))
	}
	// queryLimits parses each document before the executor would; this bounds any other parse.
	exec.SetParserTokenLimit(maxTokens)
	if o.AroundFields != nil {
		exec.AroundFields(o.AroundFields)
	}
	if !o.GqlgenOnly {
		d := directJSON{w: gqljson.New(es.Schema())}
		exec.AroundRootFields(d.rootFields)
		exec.AroundFields(d.fields)
		if ds, ok := es.(DirectSchema); ok {
			x.direct = checkDirect(ds.DirectFields(), es.Schema())
		}
	}
	if len(x.direct) > 0 {
		exec.AroundFields(replayed) // innermost: next to the resolver
	}
	x.presenter = presentError(o.Log)
	exec.SetErrorPresenter(x.presenter)
	x.recover = func(ctx context.Context, p any) error {
		return fmt.Errorf("panic in resolver: %v", p)
	}
	exec.SetRecoverFunc(x.recover)
	x.exec = exec
	return x
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
		case errors.Is(err, keyslots.ErrRefused): // answered as the refusal it is (429 or 503)
		case clientwatch.IsClientGone(err): // nobody reads this answer; not a failure of the service
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

// Prepared is what gqlgen's executor made of a request's parameters: its operation, or the
// errors of a document that does not parse, validate or pass the limits.
type Prepared struct {
	rc   *graphql.OperationContext
	errs gqlerror.List
}

// Prepare checks r's document and prepares its operation (see Prepared), once: Execute runs r
// as prepared.
func (x *Executor) Prepare(ctx context.Context, r *Request) *Prepared {
	rc, errs := x.exec.CreateOperationContext(graphql.StartOperationTrace(ctx), r.params())
	p := &Prepared{rc, errs}
	r.prepared = p
	return p
}

// Subscription says whether the prepared operation is a valid subscription.
func (p *Prepared) Subscription() bool {
	return p.errs == nil && p.rc.Operation != nil && p.rc.Operation.Operation == ast.Subscription
}

// Execute runs r on gqlgen's executor and writes the response into w, as gqlgen's POST and GET
// transports would (status, Content-Type, body). ok is false when the response is not a whole
// GraphQL answer that was written (a refusal, a failed stream, a client gone).
func (x *Executor) Execute(ctx context.Context, w ResponseWriter, r *Request) (resp *graphql.Response, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			err := x.exec.PresentRecoveredError(ctx, p)
			gqlErr, _ := err.(*gqlerror.Error)
			resp = &graphql.Response{Errors: []*gqlerror.Error{gqlErr}}
			if w.Reset() {
				w.WriteHeader(http.StatusUnprocessableEntity)
				writeResponse(w, resp)
			} else {
				w.Fail(err)
			}
			ok = false
		}
	}()
	ctx = graphql.StartOperationTrace(ctx)
	w.Header().Set("Content-Type", r.ContentType)
	var (
		rc   *graphql.OperationContext
		errs gqlerror.List
	)
	if p := r.prepared; p != nil { // by Prepare, for a request not taken as a stream
		r.prepared = nil
		rc, errs = p.rc, p.errs
	} else {
		rc, errs = x.exec.CreateOperationContext(ctx, r.params())
	}
	if errs != nil {
		errs = documentErrors(rc, errs)
		w.WriteHeader(statusFor(r.ContentType, errs))
		resp = x.exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		writeResponse(w, resp)
		return resp, false
	}
	if r.Get && rc.Operation != nil && rc.Operation.Operation != ast.Query {
		w.WriteHeader(http.StatusNotAcceptable)
		resp = &graphql.Response{Errors: gqlerror.List{{Message: "GET requests only allow query operations"}}}
		writeResponse(w, resp)
		return resp, false
	}
	if !r.Live && rc.Operation != nil && rc.Operation.Operation == ast.Subscription {
		w.WriteHeader(http.StatusNotAcceptable)
		resp = &graphql.Response{Errors: gqlerror.List{{Message: "a subscription is answered as an event stream (GraphQL over SSE): POST it with Accept: text/event-stream",
			Extensions: map[string]any{"code": string(apierr.BadUserInput)}}}}
		writeResponse(w, resp)
		return resp, false
	}
	a := &answer{slots: x.streamed, key: requestctx.KeyName(ctx)}
	defer a.done()
	if m, ok := w.(MemoryWriter); ok && x.streamed != nil {
		a.inMemory = true
		m.AdmitStreaming(a.streamed)
	}
	ctx = withAnswer(ctx, a)
	// gqlgen resolves the root fields all at once; their statements take turns at the request's
	// LIMITS__REQUEST_PARALLELISM slots (platform/database), and so do the whole-table lists
	// that a.write streams once the executor has returned: their contexts derive from this one.
	ctx = database.WithRequestLimit(ctx, x.parallelism)
	if f, resolve := x.directField(r, rc); f != nil {
		resp = x.executeDirect(ctx, rc, f, resolve)
	} else {
		responses, ctx := x.exec.DispatchOperation(ctx, rc)
		resp = responses(ctx)
	}
	if a.refused == nil {
		err := a.write(w, resp)
		if err == nil {
			return resp, true
		}
		if a.refused == nil {
			return resp, false
		}
	}
	if w.Reset() {
		// Past LIMITS__MAX_STREAMED_ANSWERS (or the key's share): the request as a whole is
		// refused, as the export is, so that the client backs off (Retry-After).
		w.Header().Set("Content-Type", r.ContentType)
		w.Header().Set("Retry-After", strconv.Itoa(x.streamed.RetryAfter))
		w.WriteHeader(apierr.Status(a.refused.Code))
		resp = &graphql.Response{Errors: gqlerror.List{{Message: a.refused.Message,
			Extensions: map[string]any{"code": string(a.refused.Code)}}}}
		writeResponse(w, resp)
	}
	return resp, false
}

// ResponseWriter is the one writer a GraphQL answer is written into.
type ResponseWriter interface {
	Header() http.Header
	WriteHeader(status int)
	Write(p []byte) (int, error)
	// Reset drops what was written while none of it was sent, and says whether it could.
	Reset() bool
	// Fail marks the answer failed: a body partly sent is cut.
	Fail(err error)
}

// MemoryWriter is a ResponseWriter that makes the answer into memory first (the answer
// cache's recorder), where a whole-table list is read at the database's pace: it calls admit
// before the answer outgrows memory and goes on at its client's pace, and a refusal fails the
// write, nothing of the answer having reached the client.
type MemoryWriter interface {
	ResponseWriter
	AdmitStreaming(admit func() error)
}

// writeResponse writes a response without parts (an error), as gqlgen's transports do.
func writeResponse(w ResponseWriter, resp *graphql.Response) {
	b, err := json.Marshal(resp)
	if err != nil {
		panic(err)
	}
	_, _ = w.Write(b)
}
