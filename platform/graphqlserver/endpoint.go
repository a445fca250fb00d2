package graphqlserver

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/gofiber/fiber/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"

	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/keyslots"
	"github.com/emsanalytics/emsquery/platform/requestctx"
)

// Endpoint is one GraphQL path (/graphql, /serve/graphql, /lookups/graphql). A request goes:
//
//  1. Handlers: the key check (the server's), then serve;
//  2. serve reads the request once (readRequest: method, Content-Type, the parameters decoded)
//     and derives the cache key from it; a kept answer is sent at once;
//  3. otherwise run gives the request its context (LIMITS__REQUEST_TIMEOUT, the client watch)
//     and a writer that streams from 64 KiB on, and the answer is computed once for all
//     identical requests in flight (answercache.Share), recorded for the cache as it is sent;
//  4. execute hands gqlgen's executor the parameters (the document is parsed and validated once,
//     and kept: limits.go), and writes its response, with the JSON platform/gqljson wrote in
//     its place (directjson.go): whole-table lists are read from the database as they are sent.
type Endpoint struct {
	route    string
	exec     *executor.Executor
	cache    *answercache.Cache
	timeout  time.Duration
	timedOut error
	// parallelism is LIMITS__REQUEST_PARALLELISM: the connections one request holds at once.
	parallelism int
	// streams carries the endpoint's live answers (live.go); nil: subscriptions refused.
	streams *Streams
	// streamed bounds the whole-table lists sent while their rows are read
	// (LIMITS__MAX_STREAMED_ANSWERS); nil: no bound.
	streamed *keyslots.Slots
	// liveAttrs carries the route on the streams' metrics.
	liveAttrs metric.MeasurementOption
}

// Handlers are the Fiber handlers of the endpoint, auth being the key check: every response,
// a refusal too, carries a Cache-Status.
func (e *Endpoint) Handlers(auth fiber.Handler) []fiber.Handler {
	return []fiber.Handler{cacheStatus, auth, e.serve}
}

// cacheStatus marks a response the cache never saw (a refusal, caching off) "fwd=bypass".
func cacheStatus(c *fiber.Ctx) error {
	err := c.Next()
	if len(c.Response().Header.Peek(answercache.HeaderCacheStatus)) == 0 {
		c.Set(answercache.HeaderCacheStatus, answercache.StatusBypass)
	}
	return err
}

func (e *Endpoint) serve(c *fiber.Ctx) error {
	r, err := readRequest(c)
	if r == nil || err != nil {
		return err
	}
	r.minCell = requestctx.MinCell(c.UserContext())
	if e.subscribe(c, r) {
		return nil
	}
	if events, json := acceptsEvents(r.accept); !r.get && events && !json {
		e.answerAsEvents(c, r)
		return nil
	}
	version, cacheable := e.cache.Current()
	var (
		key answercache.Key
		tag string
	)
	if cacheable {
		key = r.key(e.route)
		tag = etag(key, version)
		if r.ifNoneMatch != "" && matches(r.ifNoneMatch, tag, r.get) {
			// The client holds this question's answer of this data version (an ETag goes only
			// on an answer without errors), whether or not this replica still keeps it.
			e.cache.Count(c.UserContext(), e.route, answercache.Hit)
			c.Set(headerETag, tag)
			c.Set(headerCacheControl, revalidate)
			c.Set(answercache.HeaderCacheStatus, answercache.StatusHit)
			c.Status(http.StatusNotModified)
			return nil
		}
		if a := e.cache.Get(key, version); a != nil {
			e.cache.Count(c.UserContext(), e.route, answercache.Hit)
			sendKept(c, a, answercache.StatusHit)
			c.Set(headerETag, tag)
			c.Set(headerCacheControl, revalidate)
			return nil
		}
	}
	run(c, e.timeout, e.timedOut, func(ctx context.Context, w responseWriter) {
		if !cacheable {
			e.cache.Count(ctx, e.route, answercache.Bypass)
			w.Header().Set(answercache.HeaderCacheStatus, answercache.StatusBypass)
			e.execute(ctx, w, r)
			return
		}
		// One computation per question, into memory: the requests that wait for it are never
		// held by this one's client, and each sends its own copy at its own pace.
		a, f := e.cache.Join(ctx, key, version)
		switch {
		case f != nil:
			rec := &recorder{w: w, limit: e.cache.MaxAnswer(), outgrown: func() { f.End(nil) }}
			defer f.End(nil) // also when the computation panics
			f.End(e.compute(ctx, rec, r, tag))
			if !rec.over {
				_ = rec.flush()
			}
		case a == nil:
			// Not shareable: errors may be the computing request's own (its timeout, its
			// client gone), or too large to keep. Computed again.
			e.cache.Count(ctx, e.route, answercache.Bypass)
			w.Header().Set(answercache.HeaderCacheStatus, answercache.StatusBypass)
			e.execute(ctx, w, r)
		default:
			e.cache.Count(ctx, e.route, answercache.Coalesced)
			w.Header().Set(headerETag, tag)
			w.Header().Set(headerCacheControl, revalidate)
			writeKept(w, a, answercache.StatusMiss)
		}
	})
	return nil
}

// compute answers r into rec (held in memory until it outgrows what may be kept), and returns
// the answer when it may be kept. tag is the answer's ETag: set before the answer is written (a
// streamed answer's headers go out with its first bytes), taken back when the answer has
// errors and is still held.
func (e *Endpoint) compute(ctx context.Context, rec *recorder, r *request, tag string) *answercache.Answer {
	w := rec.w
	w.Header().Set(answercache.HeaderCacheStatus, answercache.StatusMiss)
	w.Header().Set(headerETag, tag)
	w.Header().Set(headerCacheControl, revalidate)
	resp, ok := e.execute(ctx, rec, r)
	var a *answercache.Answer
	if ok && len(resp.Errors) == 0 && (resp.HasNext == nil || !*resp.HasNext) {
		a = rec.answer()
	}
	if a == nil {
		e.cache.Count(ctx, e.route, answercache.Bypass)
		// Seen by the client where the answer was still held (all but streamed ones).
		w.Header().Set(answercache.HeaderCacheStatus, answercache.StatusBypass)
		w.Header().Del(headerETag)
		w.Header().Del(headerCacheControl)
		return nil
	}
	e.cache.Count(ctx, e.route, answercache.Miss)
	return a
}

// execute runs r on gqlgen's executor and writes the response into w, as gqlgen's POST and GET
// transports would (status, Content-Type, body). ok is false when the response is not a whole
// GraphQL answer that was written (a refusal, a failed stream, a client gone).
func (e *Endpoint) execute(ctx context.Context, w responseWriter, r *request) (resp *graphql.Response, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			err := e.exec.PresentRecoveredError(ctx, p)
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
	w.Header().Set("Content-Type", r.contentType)
	var (
		rc   *graphql.OperationContext
		errs gqlerror.List
	)
	if p := r.prepared; p != nil { // by subscribe, which did not take the request
		r.prepared = nil
		rc, errs = p.rc, p.errs
	} else {
		rc, errs = e.exec.CreateOperationContext(ctx, r.params())
	}
	if errs != nil {
		errs = documentErrors(rc, errs)
		w.WriteHeader(statusFor(r.contentType, errs))
		resp = e.exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		writeResponse(w, resp)
		return resp, false
	}
	if r.get && rc.Operation != nil && rc.Operation.Operation != ast.Query {
		w.WriteHeader(http.StatusNotAcceptable)
		resp = &graphql.Response{Errors: gqlerror.List{{Message: "GET requests only allow query operations"}}}
		writeResponse(w, resp)
		return resp, false
	}
	if !r.live && rc.Operation != nil && rc.Operation.Operation == ast.Subscription {
		w.WriteHeader(http.StatusNotAcceptable)
		resp = &graphql.Response{Errors: gqlerror.List{{Message: "a subscription is answered as an event stream (GraphQL over SSE): POST it with Accept: text/event-stream",
			Extensions: map[string]any{"code": string(apierr.BadUserInput)}}}}
		writeResponse(w, resp)
		return resp, false
	}
	ps := &parts{slots: e.streamed, key: requestctx.KeyName(ctx)}
	defer ps.done()
	if rec, ok := w.(*recorder); ok && e.streamed != nil {
		ps.inMemory = true
		rec.admit = ps.streamed
	}
	ctx = context.WithValue(ctx, partsKey{}, ps)
	// gqlgen resolves the root fields all at once; their statements take turns at the request's
	// LIMITS__REQUEST_PARALLELISM slots (platform/database), and so do the whole-table lists
	// that ps.write streams once the executor has returned: their contexts derive from this one.
	ctx = database.WithRequestLimit(ctx, e.parallelism)
	responses, ctx := e.exec.DispatchOperation(ctx, rc)
	resp = responses(ctx)
	if ps.refused == nil {
		err := ps.write(w, resp)
		if err == nil {
			return resp, true
		}
		if ps.refused == nil {
			return resp, false
		}
	}
	if w.Reset() {
		// Past LIMITS__MAX_STREAMED_ANSWERS (or the key's share): the request as a whole is
		// refused, as the export is, so that the client backs off (Retry-After).
		w.Header().Set("Content-Type", r.contentType)
		w.Header().Set(fiber.HeaderRetryAfter, strconv.Itoa(e.streamed.RetryAfter))
		w.WriteHeader(apierr.Status(ps.refused.Code))
		resp = &graphql.Response{Errors: gqlerror.List{{Message: ps.refused.Message,
			Extensions: map[string]any{"code": string(ps.refused.Code)}}}}
		writeResponse(w, resp)
	}
	return resp, false
}

// Revalidation (contract 6.11): an answer without errors, with the cache on, carries an ETag of
// its question and data version, and may be kept by the client but revalidated each time.
const (
	headerETag         = "ETag"
	headerCacheControl = "Cache-Control"
	revalidate         = "private, no-cache"
)

// etag is the ETag of the answer to question k in data version v: strong, since the answer's
// bytes depend on nothing else.
func etag(k answercache.Key, v answercache.Version) string {
	sum := answercache.KeyOf(k[:], []byte(v.String()))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// matches says whether an If-None-Match header names tag, or, for a GET, is * (any current
// answer). A POST's * is not a revalidation: it asks that the request act only where nothing
// exists yet (RFC 9110 13.1.2), and a POST's failed condition would be 412, never 304; a query
// sent by POST is answered as if the header were absent.
func matches(ifNoneMatch, tag string, get bool) bool {
	for _, t := range strings.Split(ifNoneMatch, ",") {
		t = strings.TrimSpace(t)
		if (t == "*" && get) || strings.TrimPrefix(t, "W/") == tag {
			return true
		}
	}
	return false
}

// writeResponse writes a response without parts (an error), as gqlgen's transports do.
func writeResponse(w responseWriter, resp *graphql.Response) {
	b, err := json.Marshal(resp)
	if err != nil {
		panic(err)
	}
	_, _ = w.Write(b)
}

// key is the cache key of r at route: everything the answer's bytes depend on. That is the
// endpoint, the method (GET and POST are answered alike, but a GET refuses mutations), the
// Accept header (it chooses the Content-Type), the document, the operation name, and the
// variables and extensions (persisted queries) in their canonical forms; and the key's
// small-cell threshold when it has one (contract 6.12.4: the same question, suppressed
// otherwise).
func (r *request) key(route string) answercache.Key {
	method := "POST"
	if r.get {
		method = "GET"
	}
	if r.minCell > 0 {
		return answercache.KeyOf([]byte(route), []byte(method), []byte(r.accept), []byte(r.query), []byte(r.operation), r.vars, r.ext, []byte("min_cell="+strconv.Itoa(r.minCell)))
	}
	return answercache.KeyOf([]byte(route), []byte(method), []byte(r.accept), []byte(r.query), []byte(r.operation), r.vars, r.ext)
}

// sendKept sends a kept answer as c's response, its body as it is kept (never changed).
func sendKept(c *fiber.Ctx, a *answercache.Answer, cacheStatus string) {
	resp := c.Response()
	resp.SetStatusCode(a.Status)
	for _, kv := range a.Header {
		resp.Header.Add(kv[0], kv[1])
	}
	resp.Header.Set(answercache.HeaderCacheStatus, cacheStatus)
	resp.SetBodyRaw(a.Body)
}

// writeKept writes a kept answer into w.
func writeKept(w responseWriter, a *answercache.Answer, cacheStatus string) {
	h := w.Header()
	for _, kv := range a.Header {
		h.Add(kv[0], kv[1])
	}
	h.Set(answercache.HeaderCacheStatus, cacheStatus)
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// The response types gqlgen's transports negotiate from Accept (without explicit headers, and
// with application/json as the default): see responseContentType.
const (
	mimeJSON            = "application/json"
	mimeGraphQLResponse = "application/graphql-response+json"
)

// responseContentType is the answer's Content-Type for the Accept header accept, as gqlgen's
// POST and GET transports choose it.
func responseContentType(accept string) string {
	if accept == "" {
		return mimeJSON
	}
	for _, part := range strings.Split(accept, ",") {
		mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mediaType {
		case "*/*", "application/*", mimeJSON:
			return mimeJSON
		case mimeGraphQLResponse:
			return mimeGraphQLResponse
		}
	}
	return mimeGraphQLResponse
}

// statusFor is the status of a request error, as gqlgen's transports give it: 422 (400 with
// application/graphql-response+json) for a protocol error (parse, validation, our limits), 200
// otherwise.
func statusFor(contentType string, errs gqlerror.List) int {
	if errcode.GetErrorKind(errs) != errcode.KindProtocol {
		return http.StatusOK
	}
	if contentType == mimeGraphQLResponse {
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}
