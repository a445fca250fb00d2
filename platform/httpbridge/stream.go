package httpbridge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// streamAt is the size from which an answer is sent while it is still being written: the
// handler's first streamAt bytes are held (an answer that ends before them is sent whole, with
// a Content-Length, as any other); from there on the body is chunked and every write goes to
// the client as fasthttp takes it. Memory per response is then this much, whatever the
// answer's size.
const streamAt = 64 << 10

// errCut ends a streamed body whose handler failed after its first bytes were sent: fasthttp
// then closes the connection without the chunked body's last chunk, so no client can take
// what it received for a whole answer.
var errCut = errors.New("the answer failed after its first bytes were sent")

// Serve mounts a net/http handler (the GraphQL engine) on Fiber, with a request context that
// ends after timeout (cause: the error what is still running fails with) or when the client
// closes its connection (see Watched), and with its answer streamed from streamAt bytes on.
//
// The handler runs in a goroutine of its own. Fiber's handler waits for it to finish or to
// write more than streamAt bytes; in the second case it hands fasthttp a body stream (a pipe
// the handler goes on writing into, each write waiting until fasthttp has taken the previous
// one) and returns, and the handler's context lives until the handler has written its last
// byte. A handler that reports a failure after streaming began (Fail) cuts the body.
func Serve(h http.Handler, timeout time.Duration, cause error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var r http.Request
		if err := fasthttpadaptor.ConvertRequest(c.Context(), &r, true); err != nil {
			return err
		}
		parent := c.UserContext()
		tctx, cancelTimeout := context.WithTimeoutCause(parent, timeout, cause)
		ctx, cancel := context.WithCancelCause(tctx)
		stopWatch := watchClient(c.Context().Conn(), cancel)
		end := func() {
			stopWatch()
			cancel(nil)
			cancelTimeout()
		}
		w := &streamWriter{header: http.Header{}, started: make(chan struct{}), flowing: make(chan struct{}), done: make(chan struct{})}
		go func() {
			defer close(w.done)
			h.ServeHTTP(w, r.WithContext(ctx))
		}()
		select {
		case <-w.done:
			end()
			w.finish(c)
			if errors.Is(context.Cause(ctx), errClientGone) {
				c.Status(statusClientClosedRequest)
			}
			return nil
		case <-w.started:
		}
		// Streaming: a client that leaves shows as a failed write now; the client watch, which
		// must not look at the socket while fasthttp may read the next request, stops here.
		stopWatch()
		s := newStream()
		c.Locals(streamKey{}, s)
		w.writeHead(c)
		pr, pw := io.Pipe()
		w.mu.Lock()
		w.pipe = pw
		w.mu.Unlock()
		c.Response().SetBodyStream(&streamBody{r: pr, s: s}, -1)
		go func() {
			<-w.done
			w.mu.Lock()
			failed := w.failed
			w.mu.Unlock()
			if failed != nil {
				_ = pw.CloseWithError(errCut)
			} else {
				_ = pw.Close()
			}
			cancel(nil)
			cancelTimeout()
		}()
		// The held bytes go first; the handler's next writes wait for them to be taken.
		close(w.flowing)
		return nil
	}
}

// ResponseWriter is the writer a GraphQL answer is written into, by the engine, the answer
// cache's recorder and the bridge alike: an http.ResponseWriter that also takes bytes its
// writer will not change (WriteShared), can drop what it holds while none of it was sent
// (Reset), and can be told the answer failed (Fail): a body partly sent is then cut.
type ResponseWriter interface {
	http.ResponseWriter
	WriteShared(p []byte) (int, error)
	Reset() bool
	Fail(err error)
}

var _ ResponseWriter = (*streamWriter)(nil)

// streamWriter is the http.ResponseWriter Serve gives the handler: it holds the first streamAt
// bytes, then writes into the pipe fasthttp reads.
type streamWriter struct {
	header  http.Header
	status  int
	held    []byte
	started chan struct{} // closed when the held bytes overflow streamAt
	flowing chan struct{} // closed when the pipe is in place
	done    chan struct{} // closed when the handler returned

	mu        sync.Mutex
	streaming bool
	pipe      *io.PipeWriter
	failed    error
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	streaming := w.streaming
	w.mu.Unlock()
	if !streaming {
		if len(w.held)+len(p) <= streamAt {
			w.held = append(w.held, p...)
			return len(p), nil
		}
		w.mu.Lock()
		w.streaming = true
		w.mu.Unlock()
		close(w.started)
		<-w.flowing
		if _, err := w.pipe.Write(w.held); err != nil {
			return 0, err
		}
		w.held = nil
	}
	return w.pipe.Write(p)
}

// WriteShared takes p as Write does: the pipe copies nothing, the held bytes are a copy.
func (w *streamWriter) WriteShared(p []byte) (int, error) { return w.Write(p) }

// Flush does nothing: streamed bytes go to the client as fasthttp takes them.
func (w *streamWriter) Flush() {}

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

// Fail marks the answer failed: a body being streamed is cut when the handler returns.
func (w *streamWriter) Fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = err
	}
}

// writeHead sets the status and headers (Content-Type sniffed when the handler set none, as
// fasthttp's adaptor does).
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
	if len(w.header.Values(fiber.HeaderContentType)) == 0 {
		resp.Header.Set(fiber.HeaderContentType, http.DetectContentType(w.held[:min(len(w.held), 512)]))
	}
}

// finish writes an answer that ended before streamAt: status, headers and body at once.
func (w *streamWriter) finish(c *fiber.Ctx) {
	w.writeHead(c)
	c.Response().SetBodyRaw(w.held)
}

type streamKey struct{}

// stream is a response body being sent: what the middleware wants to hear when it ends.
type stream struct {
	mu    sync.Mutex
	ended bool
	size  int64
	err   error
	after []func(size int64, err error)
}

func newStream() *stream { return &stream{} }

func (s *stream) end(err error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended, s.err = true, err
	after := s.after
	s.after = nil
	s.mu.Unlock()
	for _, f := range after {
		f(s.size, err)
	}
}

// streamBody is the body stream fasthttp reads: the pipe, counted; fasthttp closes it when it
// has sent the body or failed to, which is when the stream ends.
type streamBody struct {
	r   *io.PipeReader
	s   *stream
	eof bool
	err error
}

func (b *streamBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.s.mu.Lock()
	b.s.size += int64(n)
	b.s.mu.Unlock()
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
	return n, err
}

func (b *streamBody) Close() error {
	err := b.err
	if !b.eof && err == nil {
		err = errClientGone // fasthttp stopped reading: its write to the client failed
	}
	_ = b.r.CloseWithError(errClientGone)
	b.s.end(err)
	return nil
}

// AfterBody calls f when the response of c has been sent: at once, with the body's size, for
// a response sent as a whole; when the last byte went out (or the sending failed: err), for
// a streamed one. The access log, the HTTP metrics and the request span use it, so that a
// streamed answer is recorded with its whole size and duration. f must not use c.
func AfterBody(c *fiber.Ctx, f func(size int64, err error)) {
	s, ok := c.Locals(streamKey{}).(*stream)
	if !ok {
		if c.Response().IsBodyStream() {
			// Another stream (the export's, which logs its own size): its length if known, and
			// reading Body() would read the whole stream into memory.
			f(int64(c.Response().Header.ContentLength()), nil)
			return
		}
		f(int64(len(c.Response().Body())), nil)
		return
	}
	s.mu.Lock()
	if s.ended {
		size, err := s.size, s.err
		s.mu.Unlock()
		f(size, err)
		return
	}
	s.after = append(s.after, f)
	s.mu.Unlock()
}
