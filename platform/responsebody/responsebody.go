// Package responsebody sends response bodies written while they are sent (SendStream, and event
// streams: SendEvents), and tells the middleware when a body was done, sent whole or cut
// (AfterBody, AfterSent): fasthttp, under Fiber, sends a body after the handler returned, so
// the handler alone cannot know.
package responsebody

import (
	"io"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/platform/clientwatch"
	"github.com/emsanalytics/emsquery/platform/serverconn"
)

type streamKey struct{}

// stream is a response body being sent: what the middleware wants to hear when it ends.
type stream struct {
	mu    sync.Mutex
	ended bool
	size  int64
	err   error
	after []func(size int64, err error)
}

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

// SendStream makes body, which its writer goes on filling after the handler returned, c's body:
// chunked, sent as fasthttp reads it (on the connection's goroutine). A body whose Read fails
// cuts the response: fasthttp then closes the connection without the chunked body's last
// chunk, so no client can take what it received for a whole answer. stop is called when
// fasthttp stops reading, the body sent or the client's connection failed (then before the
// body's end). The connection is corked while the body is sent (serverconn.Cork).
func SendStream(c *fiber.Ctx, body io.Reader, stop func()) {
	s := &stream{}
	c.Locals(streamKey{}, s)
	b := &streamBody{r: body, closeRead: stop, s: s, uncork: serverconn.Cork(c.Context().Conn())}
	c.Response().SetBodyStream(b, -1)
}

// SendEvents makes r c's body, chunked, each Read sent to the client as soon as it returns:
// an event stream (text/event-stream), whose Read blocks until the next event and returns
// io.EOF after the last. Not corked: an event waits for nothing. fasthttp calls Close when the
// body has been sent or the client failed; r's Read runs on the connection's goroutine, so a
// stream costs no goroutine of its own. Ended as SendStream's bodies are (AfterBody).
func SendEvents(c *fiber.Ctx, r io.ReadCloser) {
	s := &stream{}
	c.Locals(streamKey{}, s)
	b := &streamBody{r: r, closeRead: func() { _ = r.Close() }, s: s, uncork: func() {}}
	c.Response().SetBodyStream(b, -1)
}

// streamBody is the body stream fasthttp reads, counted; fasthttp closes it when it
// has sent the body or failed to, which is when the stream ends.
type streamBody struct {
	r         io.Reader
	closeRead func()
	s         *stream
	eof       bool
	err       error
	uncork    func()
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
		err = clientwatch.ErrClientGone // fasthttp stopped reading: its write to the client failed
	}
	b.closeRead()
	// fasthttp has written the last chunk into the socket (or failed): out with it now.
	b.uncork()
	b.s.end(err)
	return nil
}

// AfterBody calls f when the body of c is done: at once, with the body's size, for a response
// sent as a whole; when the last byte went out (or the sending failed: err), for one sent with
// SendStream. What a request holds until its answer ends (a key's place among its concurrent
// requests) is given back with it. f must not use c.
func AfterBody(c *fiber.Ctx, f func(size int64, err error)) {
	if !afterStream(c, f) {
		f(wholeSize(c), nil)
	}
}

// AfterSent is AfterBody for what records a request (the access log, the HTTP metrics, the
// request's span): a response sent as a whole is recorded once the server has written it
// (serverconn.AfterSent), so that the recording costs its client no time; a streamed one when
// its last byte went out, with its whole size and duration. f must not use c.
func AfterSent(c *fiber.Ctx, f func(size int64, err error)) {
	if afterStream(c, f) {
		return
	}
	size := wholeSize(c)
	if !serverconn.AfterSent(c.Context().Conn(), func() { f(size, nil) }) {
		f(size, nil)
	}
}

// wholeSize is the size of c's body, sent as a whole.
func wholeSize(c *fiber.Ctx) int64 {
	if c.Response().IsBodyStream() {
		// Another stream (the export's, which logs its own size): its length if known, and
		// reading Body() would read the whole stream into memory.
		return int64(c.Response().Header.ContentLength())
	}
	return int64(len(c.Response().Body()))
}

// afterStream has f called when c's body, sent with SendStream or SendEvents, ends; false when
// c's body is not such a stream.
func afterStream(c *fiber.Ctx, f func(size int64, err error)) bool {
	s, ok := c.Locals(streamKey{}).(*stream)
	if !ok {
		return false
	}
	s.mu.Lock()
	if s.ended {
		size, err := s.size, s.err
		s.mu.Unlock()
		f(size, err)
		return true
	}
	s.after = append(s.after, f)
	s.mu.Unlock()
	return true
}
