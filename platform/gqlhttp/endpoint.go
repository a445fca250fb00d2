// Package gqlhttp is the GraphQL path's HTTP endpoint, on Fiber: it reads a request once
// (request.go: method, Content-Type, the parameters, refusals), negotiates the answer's
// Content-Type, answers from the answer cache (platform/answercache) with its ETag and
// Cache-Status or has the request executed (platform/gqlexec), and sends the answer, streamed
// from its first 64 KiB on (stream.go), recorded for the cache as it is made (recorder.go).
// Subscriptions are handed to platform/gqllive.
//
// Nothing else in the service speaks HTTP for GraphQL; everything the package needs comes in
// through Options: it knows no endpoint and no module.
package gqlhttp

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
	"github.com/emsanalytics/emsquery/platform/gqllive"
	"github.com/emsanalytics/emsquery/platform/requestctx"
)

// Options are what an endpoint is built from: its executor's, and the endpoint's own.
type Options struct {
	gqlexec.Options
	// RequestTimeout is LIMITS__REQUEST_TIMEOUT; what still runs then fails with TimedOut.
	RequestTimeout time.Duration
	TimedOut       error
	// Cache keeps answers (nil: caching off).
	Cache *answercache.Cache
	// FieldTables are the tables each root field reads (nil: any).
	FieldTables FieldTables
	// Streams carries the live answers of subscriptions (platform/gqllive); nil: none are
	// accepted.
	Streams *gqllive.Streams
}

// New builds the endpoint of one schema (see Endpoint).
func New(es graphql.ExecutableSchema, o Options) *Endpoint {
	exec := gqlexec.New(es, o.Options)
	tables := newQuestionTables(o.FieldTables)
	return &Endpoint{
		tables: tables,
		route:  o.Route, exec: exec, cache: o.Cache, timeout: o.RequestTimeout, timedOut: o.TimedOut,
		live:   gqllive.NewEndpoint(o.Streams, o.Route, exec, o.Cache, o.RequestTimeout, o.TimedOut, tables.tablesOf),
		bodies: newPlainBodies(),
	}
}

// answerAsEvents answers a query (or a document that does not validate) whose client accepts
// only an event stream, as graphql-sse's distinct connections mode wants every answer: one
// next event with the GraphQL response, then complete; a large answer streams as a query's
// does. Not kept in the answer cache.
func (e *Endpoint) answerAsEvents(c *fiber.Ctx, r *request) {
	r.ContentType = gqllive.MIMEEvents
	run(c, e.timeout, e.timedOut, func(ctx context.Context, w gqlexec.ResponseWriter) {
		e.cache.Count(ctx, e.route, answercache.Bypass)
		w.Header().Set(answercache.HeaderCacheStatus, answercache.StatusBypass)
		ew := &gqllive.EventWriter{W: w}
		e.exec.Execute(ctx, ew, r.Request)
		ew.End()
	})
}

// Endpoint is one GraphQL path (/graphql, /serve/graphql, /lookups/graphql). A request goes:
//
//  1. Handlers: the key check (the server's), then serve;
//  2. serve reads the request once (readRequest: method, Content-Type, the parameters decoded)
//     and derives the cache key from it; a kept answer is sent at once;
//  3. otherwise run gives the request its context (LIMITS__REQUEST_TIMEOUT, the client watch)
//     and a writer that streams from 64 KiB on, and the answer is computed once for all
//     identical requests in flight (answercache.Share), recorded for the cache as it is sent;
//  4. gqlexec.Executor.Execute hands gqlgen's executor the parameters (the document is parsed
//     and validated once, and kept), and writes its response, with the JSON platform/gqljson
//     wrote in its place: whole-table lists are read from the database as they are sent.
type Endpoint struct {
	tables   *questionTables
	route    string
	exec     *gqlexec.Executor
	cache    *answercache.Cache
	timeout  time.Duration
	timedOut error
	// live answers the endpoint's subscriptions (platform/gqllive).
	live *gqllive.Endpoint
	// bodies are the requests of recent POST bodies.
	bodies *plainBodies
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
	r, err := readRequest(c, e.bodies)
	if r == nil || err != nil {
		return err
	}
	r.MinCell = requestctx.MinCell(c.UserContext())
	if e.live.Subscribe(c, r.Request) {
		return nil
	}
	if events, json := gqllive.AcceptsEvents(r.Accept); !r.Get && events && !json {
		e.answerAsEvents(c, r)
		return nil
	}
	var tables []string
	if e.cache != nil {
		tables = e.tables.tablesOf(r.Query, r.Operation)
	}
	version, cacheable := e.cache.CurrentFor(tables)
	var (
		key answercache.Key
		tag string
	)
	if cacheable {
		key = r.Key(e.route)
		tag = etag(key, version)
		if inm := r.ifNoneMatch; inm != "" && matches(inm, tag, r.Get) {
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
	run(c, e.timeout, e.timedOut, func(ctx context.Context, w gqlexec.ResponseWriter) {
		if !cacheable {
			e.cache.Count(ctx, e.route, answercache.Bypass)
			w.Header().Set(answercache.HeaderCacheStatus, answercache.StatusBypass)
			e.exec.Execute(ctx, w, r.Request)
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
			e.exec.Execute(ctx, w, r.Request)
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
	resp, ok := e.exec.Execute(ctx, rec, r.Request)
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
func writeKept(w gqlexec.ResponseWriter, a *answercache.Answer, cacheStatus string) {
	h := w.Header()
	for _, kv := range a.Header {
		h.Add(kv[0], kv[1])
	}
	h.Set(answercache.HeaderCacheStatus, cacheStatus)
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}
