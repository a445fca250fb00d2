package gqlhttp

import (
	"context"
	"errors"
	"io"
	"iter"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/platform/clientwatch"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
	"github.com/emsanalytics/emsquery/platform/responsebody"
)

// The one writer a GraphQL answer is written into (gqlexec.ResponseWriter) is the stream to
// the client (streamWriter), with the answer cache's recorder in front of it when the answer
// may be kept.

// streamAt is the size from which an answer is sent while it is still being written: the first
// streamAt bytes are held (an answer that ends before them is sent whole, with a
// Content-Length); from there on the body is chunked and every write goes to the client as
// fasthttp takes it. Memory per response is then this much, whatever the answer's size.
const streamAt = 64 << 10

// errCut ends a streamed body whose answer failed after its first bytes were sent.
var errCut = errors.New("the answer failed after its first bytes were sent")

// run answers c with answer, with a request context that ends after timeout, unless the
// answer streams by then (cause: the error what still runs fails with), or when the client
// closes its connection, and a writer that holds the first streamAt bytes. When answer ends
// first, its answer is sent as a whole; when it writes more, the held bytes and the rest go out
// as a chunked body (responsebody.SendStream), and the request context lives until answer returns.
//
// answer runs as a coroutine (an answerer) of the connection's goroutine: of the handler until
// it ends or its answer outgrows streamAt (most answers end there), then of fasthttp's sending
// of the body, which resumes it each time it has sent what answer wrote last (streamedBody).
// Writing and sending so take turns on one goroutine, at the cost of two switches between
// coroutines that the scheduler never sees per chunk. A goroutine of its own, handed over
// through channels, cost a light request a fifth of its processor time (waking another processor
// to run it, and waking the handler back); a streamed answer on a goroutine of its own, handing
// 64 KiB buffers to fasthttp's through a pipe of four, held 256 KiB more and, at concurrency 1,
// cost about a tenth more processor time per answer (1,000,000 patients: 500 against 440 ms).
// fasthttp closes the body when it stops reading it (sent, failed, or the response reset), which
// runs an answer still suspended to its end (streamedBody.stop).
func run(c *fiber.Ctx, timeout time.Duration, cause error, answer func(ctx context.Context, w gqlexec.ResponseWriter)) {
	// The request's time bound (LIMITS__REQUEST_TIMEOUT) is on computing the answer: it ends
	// when the answer starts to stream, whose pace is the client's (a steady reader is never
	// cut; one that stops reading is the write timeout's).
	ctx, cancel := context.WithCancelCause(c.UserContext())
	stopTimer := func() bool { return false }
	if timeout > 0 { // 0: no bound of its own (tests)
		stopTimer = time.AfterFunc(timeout, func() { cancel(cause) }).Stop
	}
	stopWatch := clientwatch.WatchClient(c.Context().Conn(), cancel)
	streaming := false
	defer func() { // also when answer panics
		stopWatch()
		stopTimer()
		if !streaming {
			cancel(nil)
		}
	}()
	w := &streamWriter{header: http.Header{}}
	a := getAnswerer()
	w.answerer = a
	if streaming = a.run(func() { answer(ctx, w); w.finish() }); !streaming {
		a.release()
		stopWatch()
		stopTimer()
		cancel(nil)
		w.writeHead(c)
		// Copied into fasthttp's own body buffer, reused from one response to the next, so
		// that the held bytes can be too.
		c.Response().SetBody(w.held)
		w.release()
		if clientwatch.IsClientGone(context.Cause(ctx)) {
			c.Status(clientwatch.StatusClientClosedRequest)
		}
		return
	}
	// Streaming: a client that leaves now shows as a failed write; the watch must not look at
	// the socket once fasthttp may read the client's next request from it.
	stopWatch()
	stopTimer()
	w.writeHead(c)
	body := &streamedBody{w: w, a: a, cancel: cancel}
	responsebody.SendStream(c, body, body.stop)
}

// streamedBody is a streamed answer as fasthttp reads it: each Read hands on what the answer
// wrote last, and once that is sent resumes the answer (on the same goroutine) until it writes
// again or ends.
type streamedBody struct {
	w      *streamWriter
	a      *answerer
	cancel context.CancelCauseFunc
	rest   []byte // what the answer wrote last, not yet read
	done   bool
	err    error // what the body ends with: nil, or errCut when the answer failed
}

func (b *streamedBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		if b.done {
			if b.err != nil {
				return 0, b.err
			}
			return 0, io.EOF
		}
		b.resume()
		if !b.done {
			b.rest = b.w.out
		}
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// resume goes on with the answer, what it wrote last being read, until it writes again or ends.
func (b *streamedBody) resume() {
	b.w.out = nil
	if !b.a.resume() {
		b.end()
	}
}

// end follows the answer's end: its answerer is free again, its context ends, and a failed
// answer cuts the body.
func (b *streamedBody) end() {
	b.done = true
	b.a.release()
	b.w.mu.Lock()
	failed := b.w.failed
	b.w.mu.Unlock()
	if failed != nil {
		b.err = errCut
	}
	b.cancel(nil)
}

// stop is called when fasthttp stopped reading the body (sent, or the client's connection
// failed): an answer still running is told that its client is gone and run to its end.
func (b *streamedBody) stop() {
	if b.done {
		return
	}
	b.cancel(clientwatch.ErrClientGone)
	b.w.gone = true
	for !b.done {
		b.resume()
	}
}

// answerer is a coroutine (iter.Pull) that runs answers one after another, so that the stack
// the first one grew (gqlgen's calls are deep) serves the next ones: a coroutine per request
// had its stack copied as it grew, 4% of a light request's processor time.
type answerer struct {
	next  func() (streaming, ok bool)
	stop  func()
	job   func()
	yield func(streaming bool) bool
}

// idleAnswerers are the answerers between two answers; more than this many are ended.
var idleAnswerers = make(chan *answerer, 64)

func getAnswerer() *answerer {
	select {
	case a := <-idleAnswerers:
		return a
	default:
	}
	a := &answerer{}
	a.next, a.stop = iter.Pull(func(yield func(bool) bool) {
		a.yield = yield
		for {
			a.job()
			a.job = nil
			if !yield(false) {
				return
			}
		}
	})
	return a
}

// run runs job until it ends (false) or it streams (true; see stream), when resume goes on
// with it. A job that panics ends the answerer, and the panic goes on in the caller.
func (a *answerer) run(job func()) bool {
	a.job = job
	streaming, _ := a.next()
	return streaming
}

// stream, called by the job, hands the caller of run the answer that outgrows streamAt, and
// returns when resume goes on with it; false if it never will.
func (a *answerer) stream() bool { return a.yield(true) }

// resume goes on with a job that streams until it hands on what it wrote (true) or ends.
func (a *answerer) resume() bool {
	streaming, _ := a.next()
	return streaming
}

// hand, called by the job once it streams, hands the caller of resume what it wrote, and
// returns when resume goes on with it; false if it never will.
func (a *answerer) hand() bool { return a.yield(true) }

// release keeps a for the next answer, once its job ended.
func (a *answerer) release() {
	select {
	case idleAnswerers <- a:
	default:
		a.stop()
	}
}

// streamWriter holds the first streamAt bytes, then hands what is written to the body being
// sent (streamedBody): a large write as it is, small ones gathered up to streamAt bytes.
type streamWriter struct {
	header  http.Header
	status  int
	held    []byte
	heldBuf *[]byte // held's buffer, from heldBuffers
	// answerer runs the answer: its stream hands the handler the answer that outgrows
	// streamAt (see run), its hand the body each write once it streams.
	answerer *answerer
	// out is what the answer hands the body to send (streamedBody.Read), until the body
	// resumes the answer; gone is set once the client stopped reading.
	out  []byte
	gone bool

	mu        sync.Mutex
	streaming bool
	failed    error
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// handAt is the size from which a write is handed to the body as it is; smaller ones are
// gathered (gqlgen's response writes its envelope a few bytes at a time), each hand costing a
// chunk of the body and two switches between coroutines.
const handAt = 4 << 10

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	streaming := w.streaming
	w.mu.Unlock()
	if !streaming {
		if len(w.held)+len(p) <= streamAt {
			w.hold(p)
			return len(p), nil
		}
		w.mu.Lock()
		w.streaming = true
		w.mu.Unlock()
		if !w.answerer.stream() {
			return 0, errCut // never resumed: the handler stopped the answer
		}
	}
	if len(p) < handAt && len(w.held)+len(p) <= streamAt {
		w.hold(p)
		return len(p), nil
	}
	if err := w.handHeld(); err != nil {
		return 0, err
	}
	if err := w.hand(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// hand has the body send p, and returns once it did (or the client is gone).
func (w *streamWriter) hand(p []byte) error {
	if w.gone {
		return clientwatch.ErrClientGone
	}
	if len(p) == 0 {
		return nil
	}
	w.out = p
	if !w.answerer.hand() {
		return errCut // never resumed
	}
	if w.gone {
		return clientwatch.ErrClientGone
	}
	return nil
}

// handHeld has the body send the held bytes.
func (w *streamWriter) handHeld() error {
	err := w.hand(w.held)
	w.held = w.held[:0]
	return err
}

// finish ends the answer's writing: what a streamed answer still holds is sent.
func (w *streamWriter) finish() {
	w.mu.Lock()
	streaming := w.streaming
	w.mu.Unlock()
	if streaming {
		_ = w.handHeld()
		w.release()
	}
}

// Swap is Write for a whole chunk, whose buffer it returns to fill next: gqljson's streamed
// lists write their chunks so. Once the answer streams, the chunk is sent from where it is and
// its buffer comes back when it was (one copy less of the whole body).
func (w *streamWriter) Swap(b []byte) ([]byte, error) {
	w.mu.Lock()
	streaming := w.streaming
	w.mu.Unlock()
	if !streaming || len(b) < handAt {
		_, err := w.Write(b)
		return b[:0], err
	}
	if err := w.handHeld(); err != nil {
		return b[:0], err
	}
	return b[:0], w.hand(b)
}

// heldBuffers are streamWriters' held bytes, reused: an answer held whole grew them by
// appending, allocating about three times its size.
var heldBuffers = sync.Pool{New: func() any { b := make([]byte, 0, streamAt); return &b }}

// hold appends p to the held bytes, in a buffer from heldBuffers.
func (w *streamWriter) hold(p []byte) {
	if w.heldBuf == nil {
		w.heldBuf = heldBuffers.Get().(*[]byte)
		w.held = (*w.heldBuf)[:0]
	}
	w.held = append(w.held, p...)
}

// release gives the held bytes' buffer back once they were copied out.
func (w *streamWriter) release() {
	if w.heldBuf != nil && cap(w.held) == streamAt {
		*w.heldBuf = w.held[:0]
		heldBuffers.Put(w.heldBuf)
	}
	w.held, w.heldBuf = nil, nil
}

// Reset drops the held bytes, status and headers while nothing was sent.
func (w *streamWriter) Reset() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.streaming {
		return false
	}
	w.held, w.status = w.held[:0], 0
	clear(w.header)
	return true
}

// Fail marks the answer failed: a body being streamed is cut when the answer returns.
func (w *streamWriter) Fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = err
	}
}

// writeHead sets the status and headers on c's response.
func (w *streamWriter) writeHead(c *fiber.Ctx) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	resp := c.Response()
	resp.SetStatusCode(w.status)
	for k, vv := range w.header {
		for _, v := range vv {
			resp.Header.Add(k, v)
		}
	}
}
