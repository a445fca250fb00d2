// Package answercache keeps GraphQL answers in memory and serves them again while the data
// they were computed from has not changed (contract section 6.5).
//
// What is kept: per endpoint, a successful answer (HTTP 200, no errors member) byte for byte as
// the engine wrote it, headers included, under a key of everything those bytes depend on (see
// keyOf). Answers with errors are never kept; the CSV export is not a GraphQL endpoint and
// never passes here.
//
// Freshness: every answer is kept under the data version (an epoch, see versions) current when
// its computation started, and served only while that version is still current. The version
// comes from database.Watch: a connection of its own to each database host that reads the
// server's data version (the snapshot of its writing transactions on a primary, the replay
// position on a standby) every CACHE__MAX_STALENESS/2 and listens for NOTIFY on
// CACHE__NOTIFY_CHANNEL; with several hosts a change on any of them starts a new version, and
// every host must have been read within the bound (see versions).
//
// Identical questions in flight are coalesced (golang.org/x/sync/singleflight, keyed by key
// and version): the first computes, the others wait for its answer; when that answer cannot be
// shared (errors: a timeout or a client that left may be the cause), each computes its own.
//
// Memory: answers, keys and bookkeeping stay within CACHE__MAX_BYTES (least recently used out
// first); an answer larger than an eighth of it is not kept.
//
// Every GraphQL response says what happened in an RFC 9211 Cache-Status header: "emsquery;
// hit", "emsquery; fwd=miss" (computed, and kept or keepable) or "emsquery; fwd=bypass" (not
// cacheable, or caching off); Status sets the last on responses the engine never saw (401, a
// refused request).
package answercache

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/singleflight"

	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqljson"
)

// The Cache-Status values (RFC 9211), "emsquery" being the cache's name.
const (
	HeaderCacheStatus = "Cache-Status"
	StatusHit         = "emsquery; hit"
	StatusMiss        = "emsquery; fwd=miss"
	StatusBypass      = "emsquery; fwd=bypass"
)

// minPollInterval bounds how often the data version is read, however small the staleness.
const minPollInterval = 10 * time.Millisecond

// Cache is the answers kept for the GraphQL endpoints. A nil Cache is caching off.
type Cache struct {
	store    *store
	versions *versions
	flights  singleflight.Group
	metrics  *cacheMetrics
}

// New starts the cache (its watch connection) unless CACHE__ENABLED is false, in which case it
// returns a nil Cache: nothing is kept and nothing runs. The cleanup stops the watch.
func New(cfg config.Cache, db *database.DB, log *slog.Logger, mp metric.MeterProvider) (*Cache, func(), error) {
	if !cfg.Enabled {
		log.Info("cache: off (CACHE__ENABLED=false)")
		return nil, func() {}, nil
	}
	c := &Cache{}
	var err error
	c.metrics, err = newCacheMetrics(mp,
		func() (int, int64) { return c.store.stats() },
		func() (time.Duration, bool) { return c.versions.age() })
	if err != nil {
		return nil, nil, err
	}
	c.store = newStore(int64(cfg.MaxBytes), c.metrics.evicted)
	staleness := cfg.MaxStaleness.Duration()
	c.versions = newVersions(db.Hosts(), staleness, log, c.metrics.invalidated)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.Watch(ctx, string(cfg.NotifyChannel), max(staleness/2, minPollInterval), c.versions)
	}()
	log.Info("cache: on", "max_staleness", staleness.String(), "max_bytes", int64(cfg.MaxBytes),
		"notify_channel", string(cfg.NotifyChannel))
	return c, func() {
		cancel()
		<-done
		_ = c.metrics.reg.Unregister()
	}, nil
}

// Handler serves the GraphQL endpoint at route through the cache: engine is the endpoint's
// engine (platform/graphqlserver), which also gets a response hook that tells the cache
// whether an answer has errors. On a nil Cache it returns engine itself.
func (c *Cache) Handler(route string, engine *handler.Server) http.Handler {
	if c == nil {
		return engine
	}
	engine.AroundResponses(noteOutcome)
	return &endpoint{c: c, route: route, next: engine,
		attrs: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("http.route", route)))}}
}

// Status is the Fiber middleware of a GraphQL path that marks a response the cache never saw
// (a 401, a request refused before the engine, or caching off) "fwd=bypass".
func Status(c *fiber.Ctx) error {
	err := c.Next()
	if len(c.Response().Header.Peek(HeaderCacheStatus)) == 0 {
		c.Set(HeaderCacheStatus, StatusBypass)
	}
	return err
}

type endpoint struct {
	c     *Cache
	route string
	next  http.Handler
	attrs []metric.AddOption
}

// result is one computation's answer, shared by the requests coalesced on it.
type result struct {
	hit       bool    // found kept after all (another computation finished first)
	cacheable bool    // 200, no errors, small enough: the waiters may have it too
	answer    *answer // the answer with its body in parts
	parts     [][]byte
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var body []byte
	if r.Method == http.MethodPost && r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			e.bypass(w, r, b)
			return
		}
		body = b
	}
	k, err := keyOf(e.route, r, body)
	if err != nil {
		e.bypass(w, r, body)
		return
	}
	epoch, ok := e.c.versions.epoch()
	if !ok {
		e.bypass(w, r, body)
		return
	}
	if a := e.c.store.get(k, epoch); a != nil {
		e.c.metrics.hits.Add(ctx, 1, e.attrs...)
		writeAnswer(w, a, [][]byte{a.body}, StatusHit)
		return
	}
	mine := false
	v, _, _ := e.c.flights.Do(flightKey(k, epoch), func() (any, error) {
		mine = true
		if a := e.c.store.get(k, epoch); a != nil {
			return &result{hit: true, cacheable: true, answer: a, parts: [][]byte{a.body}}, nil
		}
		return e.compute(w, r, body, k, epoch), nil
	})
	res := v.(*result)
	switch {
	case mine: // computed, and sent while it was computed
		if res.cacheable {
			e.c.metrics.misses.Add(ctx, 1, e.attrs...)
		} else {
			e.c.metrics.bypasses.Add(ctx, 1, e.attrs...)
		}
	case !res.cacheable:
		// Errors may be the computing request's own (its timeout, its client gone), or the
		// answer was too large to keep: compute.
		e.bypass(w, r, body)
	case res.hit:
		e.c.metrics.hits.Add(ctx, 1, e.attrs...)
		writeAnswer(w, res.answer, res.parts, StatusHit)
	default:
		e.c.metrics.coalesced.Add(ctx, 1, e.attrs...)
		writeAnswer(w, res.answer, res.parts, StatusMiss)
	}
}

// compute runs the engine for the request, its answer written to w as it comes (with a
// Cache-Status of fwd=miss, or fwd=bypass when that is known before the first bytes go out)
// and recorded; it keeps the answer when it may be kept, and returns it for every request
// coalesced on it.
func (e *endpoint) compute(w http.ResponseWriter, r *http.Request, body []byte, k key, epoch uint64) *result {
	o := &outcome{}
	rr := r.WithContext(context.WithValue(r.Context(), outcomeKey{}, o))
	rr.Body = io.NopCloser(bytes.NewReader(body))
	w.Header().Set(HeaderCacheStatus, StatusMiss)
	rec := &recorder{w: w, limit: int(e.c.store.maxEntry)}
	e.next.ServeHTTP(rec, rr)
	a := rec.answer()
	res := &result{answer: a}
	if rec.over || rec.failed || a.status != http.StatusOK || !o.seen || o.errors || o.incomplete || a.size()+int64(rec.size) > e.c.store.maxEntry {
		// Said where the answer is still held (all but streamed ones).
		w.Header().Set(HeaderCacheStatus, StatusBypass)
		return res
	}
	res.cacheable = true
	// The kept answer is a copy in one piece: the parts may be buffers platform/gqljson handed
	// over, which must not be pinned, and one piece is what a hit sends fastest.
	kept := *a
	kept.body = bytes.Join(rec.parts, nil)
	res.answer, res.parts = &kept, [][]byte{kept.body}
	e.c.store.put(k, &kept, epoch)
	return res
}

// bypass computes the answer as without the cache. body is the request's body, already read.
func (e *endpoint) bypass(w http.ResponseWriter, r *http.Request, body []byte) {
	e.c.metrics.bypasses.Add(r.Context(), 1, e.attrs...)
	w.Header().Set(HeaderCacheStatus, StatusBypass)
	if body != nil {
		r = r.WithContext(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	e.next.ServeHTTP(w, r)
}

// flightKey is the coalescing key: the question and the epoch it is asked in (a question
// asked after the data changed does not wait for an answer computed before).
func flightKey(k key, epoch uint64) string {
	var b [len(key{}) + 8]byte
	copy(b[:], k[:])
	binary.BigEndian.PutUint64(b[len(k):], epoch)
	return string(b[:])
}

// writeAnswer sends a kept or computed answer: its headers and status, the Cache-Status, and
// the body parts, handed over without a copy where the writer takes them so (they are never
// changed).
func writeAnswer(w http.ResponseWriter, a *answer, parts [][]byte, cacheStatus string) {
	h := w.Header()
	for _, kv := range a.header {
		h.Add(kv[0], kv[1])
	}
	h.Set(HeaderCacheStatus, cacheStatus)
	w.WriteHeader(a.status)
	sw, shared := w.(gqljson.SharedWriter)
	for _, p := range parts {
		var err error
		if shared {
			_, err = sw.WriteShared(p)
		} else {
			_, err = w.Write(p)
		}
		if err != nil {
			return
		}
	}
}

// outcome is what the engine's response hook saw of an answer computed for the cache.
type outcome struct {
	seen       bool // a GraphQL response was made (not a transport's refusal)
	errors     bool
	incomplete bool // more would follow (incremental delivery)
}

type outcomeKey struct{}

// noteOutcome is the engine's response hook: it tells compute whether the answer has errors.
func noteOutcome(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if o, ok := ctx.Value(outcomeKey{}).(*outcome); ok && resp != nil {
		o.seen = true
		o.errors = o.errors || len(resp.Errors) > 0
		o.incomplete = o.incomplete || resp.HasNext != nil && *resp.HasNext
	}
	return resp
}
