package gqllive

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
)

// feed is the live answer to one question (endpoint, document, operation, variables: the
// answer cache's key) for every stream that carries it. Its goroutine computes the answer when
// the first stream joins and again each time the data version of the tables it reads changes
// (answercache's ChangedFor: a poll that saw a change, within CACHE__MAX_STALENESS, or a
// NOTIFY, at once; with the replication change source a change to another table wakes
// nothing), through the answer cache (Share: a question also asked as a query in that version
// is computed once), and publishes it only when its bytes differ from the last published. It
// ends when its last stream leaves.
//
// What a feed holds counts in the streams' budget (CACHE__MAX_BYTES) for as long as it lives:
// its question (what the client sent, which may be as large as APP__MAX_BODY_BYTES) from the
// first stream's admission, and its answer from each publication. Both are counted once per
// feed, however many streams carry it, because that is what is held: a stream keeps neither
// its request's body (released when the stream starts) nor its own copy of the question, so a
// stream that joins an existing feed adds nothing to the budget (its connection and buffers
// are LIMITS__MAX_STREAMS' to bound).
type feed struct {
	s   *Streams
	e   *Endpoint
	key answercache.Key
	q   question
	// tables are the tables the question reads (nil: any): the feed computes again only when
	// one of them changes (answercache's ChangedFor).
	tables []string
	base   context.Context // the first stream's values (key name, request id), never cancelled
	stop   chan struct{}   // closed when the last stream left
	// members is guarded by s.mu.
	members int

	mu      sync.Mutex
	event   []byte        // the answer last published (a GraphQL response) as a next event
	seq     uint64        // how many answers were published
	final   bool          // the last answer: the question itself is wrong (see compute)
	changed chan struct{} // closed when the next is published
}

// feedKey is a question's key.
type feedKey = answercache.Key

// question is what a feed keeps of the request that started it: only the parts that make the
// question (Request.Key's), the variables and extensions in their canonical JSON rather than decoded
// (a decoded object costs several times its JSON; decoding it again for each computation costs
// little beside the computation's statements).
type question struct {
	query, operation string
	vars, ext        []byte
}

func questionOf(r *gqlexec.Request) question {
	return question{query: r.Query, operation: r.Operation, vars: r.Vars, ext: r.Ext}
}

// size is what the question holds, as counted in the streams' budget.
func (q question) size() int64 {
	return int64(len(q.query) + len(q.operation) + len(q.vars) + len(q.ext))
}

// request is the question as a stream's request for one computation.
func (q question) request() *gqlexec.Request {
	r := &gqlexec.Request{Live: true, Accept: MIMEEvents, ContentType: MIMEEvents, Query: q.query, Operation: q.operation, Vars: q.vars, Ext: q.ext, ReadStart: time.Now()}
	// Canonical JSON that CanonicalObject made: it decodes again.
	r.Variables, _, _ = gqlexec.CanonicalObject(q.vars)
	r.Extensions, _, _ = gqlexec.CanonicalObject(q.ext)
	return r
}

// join adds a stream to the feed of r's question at e, started here when it is the first, or
// says why not: a new feed's question must fit in the streams' budget beside what the other
// feeds hold.
func (s *Streams) join(e *Endpoint, r *gqlexec.Request, ctx context.Context) (*feed, *errStreams) {
	k := r.Key(e.route)
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.feeds[k]
	if f == nil {
		q := questionOf(r)
		if !s.hold(q.size()) {
			return nil, &errStreams{http.StatusTooManyRequests, apierr.RateLimited, fmt.Sprintf(
				"the live answers and their questions hold all the memory they may (CACHE__MAX_BYTES=%d) and this question's %d bytes do not fit; retry when one has ended, or send a smaller document",
				s.maxBytes, q.size())}
		}
		f = &feed{s: s, e: e, key: k, q: q, base: context.WithoutCancel(ctx), stop: make(chan struct{}), changed: make(chan struct{})}
		if e.tables != nil {
			f.tables = e.tables(q.query, q.operation)
		}
		s.feeds[k] = f
		s.wg.Add(1)
		go f.run()
	}
	f.members++
	return f, nil
}

// leave removes a stream from f; the last to leave stops it.
func (s *Streams) leave(f *feed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.members--; f.members == 0 {
		delete(s.feeds, f.key)
		close(f.stop)
		// Its question and answer are nobody's now; publish sees stop and keeps nothing more.
		f.mu.Lock()
		s.held.Add(-int64(len(f.event)) - f.q.size())
		f.event = nil
		f.mu.Unlock()
	}
}

// latest is the answer last published (its next event), its number (0: none yet), and a
// channel closed when another is published.
// final says the stream ends after that answer.
func (f *feed) latest() (event []byte, seq uint64, final bool, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.event, f.seq, f.final, f.changed
}

// An answer with errors (a timeout, the database away) is computed again after a pause that
// doubles from retryFirst to retryMax while it fails, or at the next data change if sooner: a
// wall board does not keep an error until the next load.
const (
	retryFirst = 5 * time.Second
	retryMax   = 5 * time.Minute
)

func (f *feed) run() {
	defer f.s.wg.Done()
	cache := f.e.cache
	var retry time.Duration
	for {
		// Taken before the version is read: a change after the read closes it. With the
		// replication change source only the question's tables' changes do.
		changed := cache.ChangedFor(f.tables)
		v, _ := cache.CurrentFor(f.tables)
		body, failed, final := f.compute(v)
		if f.publish(body, final) {
			return
		}
		var (
			again <-chan time.Time
			t     *time.Timer
		)
		if failed {
			retry = min(max(retry*2, retryFirst), retryMax)
			t = time.NewTimer(retry)
			again = t.C
		} else {
			retry = 0
		}
		ended := false
		select {
		case <-changed:
		case <-again:
		case <-f.stop:
			ended = true
		case <-f.s.closing:
			ended = true
		}
		if t != nil {
			t.Stop()
		}
		if ended {
			return
		}
	}
}

// compute answers the question in version v; failed when the answer has errors (it is
// published all the same: it is the answer now), final when they are the question's own
// (BAD_USER_INPUT: an unknown column, a bad date), which no data change mends: the streams end
// after it, as graphql-sse ends an operation that cannot run (next with the errors, complete).
func (f *feed) compute(v answercache.Version) (body []byte, failed, final bool) {
	e := f.e
	ctx, cancel := context.WithCancel(f.base)
	defer cancel()
	if e.timeout > 0 {
		// The request timeout bounds each computation, not the stream.
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, e.timeout, e.timedOut)
		defer stop()
	}
	run := func() []byte {
		w := &bufferWriter{header: http.Header{}}
		resp, ok := e.exec.Execute(ctx, w, f.q.request())
		f.s.metrics.recomputed(e.attrs)
		failed = !ok || resp == nil || len(resp.Errors) > 0
		final = failed && resp != nil && len(resp.Errors) > 0 && questionsFault(resp.Errors)
		return w.body
	}
	a, mine := e.cache.Share(f.key, v, func() *answercache.Answer {
		b := run()
		if failed {
			body = b
			return nil
		}
		return &answercache.Answer{Status: http.StatusOK, Body: b}
	})
	switch {
	case a != nil:
		return a.Body, false, false
	case mine:
		return body, true, final
	default: // another computation, not shareable
		return run(), failed, final
	}
}

// questionsFault says whether every error is the question's own fault.
func questionsFault(errs gqlerror.List) bool {
	for _, err := range errs {
		if code, _ := err.Extensions["code"].(string); code != string(apierr.BadUserInput) && code != errcode.ValidationFailed && code != errcode.ParseFailed {
			return false
		}
	}
	return true
}

// publish makes body the answer, unless it is the one published last; final: the last. An
// answer larger than a live answer may be, or than the feeds' budget has room for, is replaced
// by a RESULT_TOO_LARGE error, and is the last. It says whether the answer is the last.
func (f *feed) publish(body []byte, final bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.stop: // nobody follows it any more
		return true
	default:
	}
	if f.seq > 0 && bytes.Equal(body, f.body()) && !final {
		return false
	}
	event := nextEvent(body)
	if int64(len(body)) > f.s.maxAnswer || !f.s.hold(int64(len(event)-len(f.event))) {
		event, final = nextEvent(tooLargeAnswer(f.s.maxAnswer, f.s.maxBytes)), true
		f.s.held.Add(int64(len(event) - len(f.event)))
	}
	f.final, f.event = final, event
	f.seq++
	close(f.changed)
	f.changed = make(chan struct{})
	return final
}

// body is the GraphQL response of the answer last published.
func (f *feed) body() []byte {
	if f.event == nil {
		return nil
	}
	return f.event[len(eventNextHead) : len(f.event)-len(eventEnd)]
}

// tooLargeAnswer is the last answer of a question whose answer the feeds cannot hold (too large
// itself, or no room left beside the other feeds' questions and answers).
func tooLargeAnswer(maxAnswer, maxBytes int64) []byte {
	b, _ := json.Marshal(map[string]any{"errors": []map[string]any{{
		"message":    fmt.Sprintf("a live answer is at most %d bytes, and the live answers with their questions together at most %d (CACHE__MAX_BYTES): narrow the question, or ask it as a query", maxAnswer, maxBytes),
		"extensions": map[string]any{"code": string(apierr.ResultTooLarge)},
	}}})
	return b
}

// bufferWriter is the gqlexec.ResponseWriter a feed's answer is computed into: held whole (a
// subscription's answer is a dashboard's, never a whole table).
type bufferWriter struct {
	header http.Header
	status int
	body   []byte
}

func (w *bufferWriter) Header() http.Header { return w.header }

func (w *bufferWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufferWriter) Write(p []byte) (int, error) {
	w.body = append(w.body, p...)
	return len(p), nil
}

func (w *bufferWriter) Reset() bool {
	w.body, w.status = w.body[:0], 0
	return true
}

func (w *bufferWriter) Fail(error) {}
