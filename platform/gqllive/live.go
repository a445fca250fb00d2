// Package gqllive is the GraphQL path's live answers (contract 6.11): a subscription is the
// same question as its query, answered again each time the data changes, over Server-Sent
// Events in the graphql-sse protocol's "distinct connections" mode. A POST with text/event-stream among its Accept values whose
// operation is a subscription becomes a stream (every other request is answered as before,
// JSON included); its events are
//
//	event: next        data: {"data": ...} (or {"errors": [...]}), the answer when it changed
//	: (a comment)      at least every APP__STREAM_HEARTBEAT, so that proxies keep a quiet stream
//	event: complete    at the end: the service stopping, or the key revoked (after a next with
//	                   the error)
//
// The answers are computed by a feed per question (feed.go), once per data version however many
// streams carry it, and sent only when they differ from the last sent. gqlgen's transport.SSE
// is not used: it is net/http's, computes per stream, and knows none of the bounds here.
package gqllive

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/clientwatch"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
	"github.com/emsanalytics/emsquery/platform/requestctx"
	"github.com/emsanalytics/emsquery/platform/responsebody"
)

// Streams are the live answers of every endpoint: their bounds (LIMITS__MAX_STREAMS, each key's
// max_streams or else LIMITS__MAX_STREAMS_PER_KEY, and the memory their questions and answers
// hold), their heartbeat, their feeds, and their end when the service stops. A nil Streams
// refuses every subscription.
type Streams struct {
	max       int
	maxPerKey int // 0: a key without max_streams is bounded by max alone
	heartbeat time.Duration
	// closing is closed by End: every stream completes.
	closing chan struct{}
	endOnce sync.Once

	// maxBytes bounds what the feeds hold together, their questions (feed.question) and their
	// answers, maxAnswer one answer; held is what they hold now (each question and answer
	// once, however many streams carry it).
	maxBytes, maxAnswer int64
	held                atomic.Int64

	mu     sync.Mutex
	open   int
	perKey map[string]int
	feeds  map[feedKey]*feed
	wg     sync.WaitGroup // the feeds' goroutines

	metrics streamMetrics
}

// StreamsConfig are the streams' settings.
type StreamsConfig struct {
	// Max is LIMITS__MAX_STREAMS: the streams open at once, all keys together.
	Max int
	// MaxPerKey is LIMITS__MAX_STREAMS_PER_KEY: the streams open at once of a key without a
	// max_streams of its own (the single AUTHENTICATION__API_KEY's too); 0, no such bound.
	MaxPerKey int
	// Heartbeat is APP__STREAM_HEARTBEAT: a comment line goes out on a stream quiet for this
	// long (contract: at most 15 s).
	Heartbeat time.Duration
	// MaxBytes bounds what the feeds hold together, the questions they answer and their
	// answers (CACHE__MAX_BYTES: as much again as the answer cache), and one answer to an
	// eighth of it (as the cache's).
	MaxBytes int64
	// Meter creates the streams' instruments (nil: none).
	Meter metric.Meter
}

// NewStreams makes the streams' registry; the cleanup ends every stream (End) and waits for
// their feeds.
func NewStreams(cfg StreamsConfig) (*Streams, func(), error) {
	s := &Streams{
		max:       cfg.Max,
		maxPerKey: cfg.MaxPerKey,
		heartbeat: cfg.Heartbeat,
		maxBytes:  cfg.MaxBytes,
		maxAnswer: cfg.MaxBytes / 8,
		closing:   make(chan struct{}),
		perKey:    map[string]int{},
		feeds:     map[feedKey]*feed{},
	}
	if err := s.metrics.init(cfg.Meter); err != nil {
		return nil, nil, err
	}
	return s, func() {
		s.End()
		s.wg.Wait()
	}, nil
}

// End completes every stream (each sends `complete` and ends) and refuses new ones: the first
// step of a stop, so that the server's graceful shutdown finds the streams ending.
func (s *Streams) End() {
	if s == nil {
		return
	}
	s.endOnce.Do(func() { close(s.closing) })
}

// errStreams is why a stream was refused: status, code, message.
type errStreams struct {
	status  int
	code    apierr.Code
	message string
}

// admit counts a new stream of key (its max_streams: 0, none of its own, and then
// LIMITS__MAX_STREAMS_PER_KEY bounds it), or says why not.
func (s *Streams) admit(key string, maxOfKey int) *errStreams {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closing:
		return &errStreams{http.StatusServiceUnavailable, apierr.ServiceUnavailable, "the service is stopping; open the stream again in a moment"}
	default:
	}
	if s.open >= s.max {
		return &errStreams{http.StatusTooManyRequests, apierr.RateLimited, fmt.Sprintf(
			"%d live answers are open, the service's bound (LIMITS__MAX_STREAMS); retry when one has ended", s.max)}
	}
	if maxOfKey > 0 && s.perKey[key] >= maxOfKey {
		return &errStreams{http.StatusTooManyRequests, apierr.RateLimited, fmt.Sprintf(
			"the API key %q has %d live answers open, its max_streams; retry when one has ended", key, maxOfKey)}
	}
	if maxOfKey <= 0 && s.maxPerKey > 0 && s.perKey[key] >= s.maxPerKey {
		return &errStreams{http.StatusTooManyRequests, apierr.RateLimited, fmt.Sprintf(
			"the API key %q has %d live answers open, the bound of a key without max_streams (LIMITS__MAX_STREAMS_PER_KEY); retry when one has ended", key, s.maxPerKey)}
	}
	s.open++
	s.perKey[key]++
	return nil
}

// hold counts delta more bytes held by the feeds, unless that goes past maxBytes.
func (s *Streams) hold(delta int64) bool {
	for {
		held := s.held.Load()
		if delta > 0 && held+delta > s.maxBytes {
			return false
		}
		if s.held.CompareAndSwap(held, held+delta) {
			return true
		}
	}
}

func (s *Streams) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.perKey[key]--; s.perKey[key] <= 0 {
		delete(s.perKey, key)
	}
}

// Endpoint is the live answers of one GraphQL path.
type Endpoint struct {
	s        *Streams
	route    string
	exec     *gqlexec.Executor
	cache    *answercache.Cache
	timeout  time.Duration
	timedOut error
	// tables is the tables a question reads (nil: any), as the endpoint's fields declare them.
	tables func(query, operation string) []string
	// attrs carries the route on the streams' metrics.
	attrs metric.MeasurementOption
}

// NewEndpoint is the live answers of the path route, run on exec and following cache's data
// versions; each computation ends after timeout (0: no bound) with timedOut. tables says which
// tables a question reads (nil, or a nil answer: any), so that its feed wakes only when one of
// them changes. s nil (or cache nil) refuses every subscription.
func NewEndpoint(s *Streams, route string, exec *gqlexec.Executor, cache *answercache.Cache, timeout time.Duration, timedOut error, tables func(query, operation string) []string) *Endpoint {
	return &Endpoint{s: s, route: route, exec: exec, cache: cache, timeout: timeout, timedOut: timedOut, tables: tables, attrs: routeAttrs(route)}
}

// Subscribe answers r with a stream when it asks for one: a POST accepting text/event-stream
// whose operation is a subscription. false: r is answered as any other request (a query, or a
// document that does not validate, which gets its errors as a query would: prepared once).
func (e *Endpoint) Subscribe(c *fiber.Ctx, r *gqlexec.Request) bool {
	if events, _ := AcceptsEvents(r.Accept); r.Get || !events {
		return false
	}
	ctx := c.UserContext()
	if !e.exec.Prepare(ctx, r).Subscription() {
		return false // the document is checked: Execute need not again
	}
	s := e.s
	if s == nil || e.cache == nil {
		// Without the cache nothing tells when the data changed.
		refuseStream(c, &errStreams{http.StatusServiceUnavailable, apierr.ServiceUnavailable,
			"live answers need the answer cache (CACHE__ENABLED=true), which tells when the data changed"})
		return true
	}
	keyName := requestctx.KeyName(ctx)
	grant := requestctx.GrantOf(ctx)
	maxOfKey := 0
	if grant != nil {
		maxOfKey = grant.MaxStreams()
	}
	if refusal := s.admit(keyName, maxOfKey); refusal != nil {
		refuseStream(c, refusal)
		return true
	}
	// A stream's answer does not depend on how the client wrote Accept: one feed per question.
	r.Live, r.Accept = true, MIMEEvents
	f, refusal := s.join(e, r, ctx)
	if refusal != nil {
		s.release(keyName)
		refuseStream(c, refusal)
		return true
	}
	if grant != nil {
		grant.LeaveInFlight()
	}
	// The request's body is parsed (r) and the feed keeps what it needs of it: fasthttp would
	// otherwise keep the body's buffer (its size rounded up to a power of two, and counted
	// nowhere) until the stream ends, hours from now. ResetBody would keep the buffer for the
	// connection's next request; released, the collector takes it.
	c.Request().ReleaseBody(0)
	st := &stream{s: s, f: f, grant: grant, keyName: keyName, attrs: e.attrs, gone: clientwatch.PeerGone(c.Context().Conn())}
	s.metrics.opened(e.attrs)
	h := &c.Response().Header
	h.SetContentType(MIMEEvents)
	h.Set(fiber.HeaderCacheControl, "no-cache")
	// nginx buffers responses unless told not to; a live answer must not wait in a proxy.
	h.Set("X-Accel-Buffering", "no")
	c.Set(answercache.HeaderCacheStatus, answercache.StatusBypass)
	responsebody.SendEvents(c, st)
	return true
}

// refuseStream answers a subscription that cannot be a stream now with an errors body.
func refuseStream(c *fiber.Ctx, r *errStreams) {
	if r.status == http.StatusTooManyRequests {
		c.Set(fiber.HeaderRetryAfter, "1")
	}
	_ = c.Status(r.status).JSON(fiber.Map{
		"errors": []fiber.Map{{"message": r.message, "extensions": fiber.Map{"code": r.code}}},
	})
}

// EventWriter writes a GraphQL response as a next event, then complete (End): always with
// status 200 (an event stream's errors are in its events). A query whose client accepts only
// an event stream is answered so, as graphql-sse's distinct connections mode wants every
// answer.
type EventWriter struct {
	W    gqlexec.ResponseWriter
	open bool // the next event's head is written
}

func (ew *EventWriter) Header() http.Header { return ew.W.Header() }
func (ew *EventWriter) WriteHeader(int)     { ew.W.WriteHeader(http.StatusOK) }
func (ew *EventWriter) Fail(err error)      { ew.W.Fail(err) }

func (ew *EventWriter) Write(p []byte) (int, error) {
	if !ew.open {
		ew.open = true
		if _, err := ew.W.Write(eventNextHead); err != nil {
			return 0, err
		}
	}
	return ew.W.Write(p)
}

func (ew *EventWriter) Reset() bool {
	if !ew.W.Reset() {
		return false
	}
	ew.open = false
	return true
}

// End closes the next event and completes the stream.
func (ew *EventWriter) End() {
	if ew.open {
		_, _ = ew.W.Write(eventEnd)
	}
	_, _ = ew.W.Write(eventComplete)
}

// AcceptsEvents reads an Accept header: whether it lists text/event-stream, and whether it
// lists a JSON type too (application/json, application/graphql-response+json, or a wildcard
// that covers them).
func AcceptsEvents(accept string) (events, json bool) {
	for _, part := range strings.Split(accept, ",") {
		mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mediaType {
		case MIMEEvents:
			events = true
		case "*/*", "application/*", gqlexec.MIMEJSON, gqlexec.MIMEGraphQLResponse:
			json = true
		}
	}
	return events, json
}

// MIMEEvents is an event stream's Content-Type.
const MIMEEvents = "text/event-stream"

// stream is one client's live answer: the body fasthttp reads (on the connection's goroutine)
// until it ends. Read blocks until there is something to send.
type stream struct {
	s       *Streams
	f       *feed
	grant   requestctx.Grant
	keyName string
	attrs   metric.MeasurementOption // the endpoint's http.route, for the metrics
	gone    func() bool              // the client closed its connection

	pending  []byte // what Read has still to hand out
	sent     uint64 // the feed's answer last sent (its seq; 0: none yet)
	lastSend time.Time
	done     bool // the last event is pending: EOF after it
	timer    *time.Timer
	closed   sync.Once
}

// keyCheckEvery is how often a quiet stream looks whether its key is still in force (a revoked
// key's streams end within this, and the keys file's poll interval, of the revocation;
// contract: 5 s) and whether its client is still there.
const keyCheckEvery = time.Second

var (
	eventComplete = []byte("event: complete\ndata:\n\n")
	eventComment  = []byte(":\n\n")
	eventNextHead = []byte("event: next\ndata: ")
	eventEnd      = []byte("\n\n")
)

func (st *stream) Read(p []byte) (int, error) {
	for len(st.pending) == 0 {
		if st.done {
			return 0, io.EOF
		}
		st.next()
	}
	n := copy(p, st.pending)
	st.pending = st.pending[n:]
	return n, nil
}

// next waits for the next event and makes it pending.
func (st *stream) next() {
	for {
		select {
		case <-st.s.closing:
			st.pending, st.done = eventComplete, true
			return
		default:
		}
		answer, seq, final, changed := st.f.latest()
		if seq != st.sent {
			st.sent = seq
			st.pending = answer
			if final {
				st.pending = append(append([]byte(nil), answer...), eventComplete...)
				st.done = true
			}
			st.lastSend = time.Now()
			st.s.metrics.pushed(st.attrs)
			return
		}
		now := time.Now()
		if st.gone() {
			// Nobody reads: end now, not at the next heartbeat's failed write, so that its
			// place in LIMITS__MAX_STREAMS and max_streams is free at once.
			st.done = true
			return
		}
		if st.grant != nil && !st.grant.InForce() {
			st.pending = append(nextEvent(revokedAnswer), eventComplete...)
			st.done = true
			return
		}
		if st.lastSend.IsZero() {
			st.lastSend = now // the feed's first answer is still being computed
		}
		if wait := st.s.heartbeat - now.Sub(st.lastSend); wait <= 0 {
			st.pending = eventComment
			st.lastSend = now
			return
		}
		wait := min(keyCheckEvery, st.s.heartbeat-now.Sub(st.lastSend))
		if st.timer == nil {
			st.timer = time.NewTimer(wait)
		} else {
			st.timer.Reset(wait)
		}
		select {
		case <-st.s.closing:
		case <-changed:
		case <-st.timer.C:
		}
		st.timer.Stop()
	}
}

// Close is fasthttp's: the body was sent or the client failed.
func (st *stream) Close() error {
	st.closed.Do(func() {
		if st.timer != nil {
			st.timer.Stop()
		}
		st.s.leave(st.f)
		st.s.release(st.keyName)
		st.s.metrics.closed(st.attrs)
	})
	return nil
}

// revokedAnswer is the last answer of a stream whose key is no longer in force.
var revokedAnswer = []byte(`{"errors":[{"message":"the API key of this stream is no longer in force (the keys file changed)","extensions":{"code":"` + string(apierr.Unauthenticated) + `"}}]}`)

// nextEvent is a next event carrying response, a JSON object on one line.
func nextEvent(response []byte) []byte {
	b := make([]byte, 0, len(eventNextHead)+len(response)+len(eventEnd))
	b = append(b, eventNextHead...)
	b = append(b, response...)
	return append(b, eventEnd...)
}

// streamMetrics are the streams' instruments: open streams, answers pushed, and the feeds'
// computations, by endpoint.
type streamMetrics struct {
	pushes, recomputations metric.Int64Counter
	openByRoute            metric.Int64UpDownCounter
}

func (m *streamMetrics) init(meter metric.Meter) error {
	if meter == nil {
		meter = noop.Meter{}
	}
	var err error
	if m.pushes, err = meter.Int64Counter("emsquery.streams.pushes",
		metric.WithDescription("Answers sent on live-answer streams (events next), by endpoint."), metric.WithUnit("{event}")); err != nil {
		return fmt.Errorf("stream metrics: %w", err)
	}
	if m.recomputations, err = meter.Int64Counter("emsquery.streams.recomputations",
		metric.WithDescription("Answers the live-answer feeds computed (one per question and data change, however many streams carry it), by endpoint."), metric.WithUnit("{answer}")); err != nil {
		return fmt.Errorf("stream metrics: %w", err)
	}
	if m.openByRoute, err = meter.Int64UpDownCounter("emsquery.streams.open",
		metric.WithDescription("Live-answer streams open (at most LIMITS__MAX_STREAMS), by endpoint."), metric.WithUnit("{stream}")); err != nil {
		return fmt.Errorf("stream metrics: %w", err)
	}
	return nil
}

// routeAttrs is the measurement option of an endpoint's stream metrics, made once per endpoint.
func routeAttrs(route string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("http.route", route)))
}

func (m *streamMetrics) opened(attrs metric.MeasurementOption) {
	m.openByRoute.Add(context.Background(), 1, attrs)
}

func (m *streamMetrics) closed(attrs metric.MeasurementOption) {
	m.openByRoute.Add(context.Background(), -1, attrs)
}

func (m *streamMetrics) pushed(attrs metric.MeasurementOption) {
	m.pushes.Add(context.Background(), 1, attrs)
}

func (m *streamMetrics) recomputed(attrs metric.MeasurementOption) {
	m.recomputations.Add(context.Background(), 1, attrs)
}
