// Package httpbridge makes net/http handlers (gqlgen's) behave on Fiber, and fills in what
// fasthttp, under Fiber, does not do as a net/http server would:
//
//   - Handler serves a net/http handler with the request context Fiber's middleware built, and
//     sends large JSON from platform/gqljson without copying it into fasthttp's body buffer;
//   - Watched and Bounded end a request's context when its client closes the connection
//     (fasthttp reads a connection only between requests, so it never notices) or when the
//     request has run too long;
//   - Lingering closes connections gracefully, so a client still sending a body the server
//     refused reads the answer instead of a reset.
package httpbridge

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/emsanalytics/emsquery/platform/gqljson"
)

// Handler mounts a net/http handler (gqlgen's) on Fiber. The request is converted as Fiber's
// adaptor converts it, but carries the context our middleware built in Fiber's user context (the
// adaptor's would be the fasthttp request itself). The answer is written as the adaptor writes
// it, except that large JSON handed over by platform/gqljson is sent from where it is instead of
// being copied into fasthttp's body buffer (see bridgeWriter).
func Handler(h http.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var r http.Request
		if err := fasthttpadaptor.ConvertRequest(c.Context(), &r, true); err != nil {
			return fmt.Errorf("convert request for %s: %w", c.Path(), err)
		}
		w := bridgeWriter{resp: c.Response()}
		h.ServeHTTP(&w, r.WithContext(c.UserContext()))
		w.finish()
		return nil
	}
}

// bridgeWriter is the http.ResponseWriter Handler gives gqlgen: it writes status, headers and
// body into the fasthttp response as fasthttp's adaptor does, and takes JSON that
// platform/gqljson hands over (gqljson.SharedWriter) without copying it: the response body then
// becomes a stream of the parts in order, sent after the handler returns.
type bridgeWriter struct {
	resp   *fasthttp.Response
	header http.Header
	status int
	parts  [][]byte // the body, once a shared part came; nil before
	size   int
}

var _ gqljson.SharedWriter = (*bridgeWriter)(nil)

func (w *bridgeWriter) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header)
	}
	return w.header
}

func (w *bridgeWriter) WriteHeader(status int) { w.status = status }

func (w *bridgeWriter) Write(p []byte) (int, error) {
	if w.parts == nil {
		w.resp.AppendBody(p)
		return len(p), nil
	}
	w.parts = append(w.parts, bytes.Clone(p))
	w.size += len(p)
	return len(p), nil
}

// sharedMin is the size from which a shared part is sent from where it is; smaller answers
// are copied into fasthttp's buffer as any other.
const sharedMin = 64 << 10

// WriteShared keeps p, which its writer leaves unchanged, until the response is sent.
func (w *bridgeWriter) WriteShared(p []byte) (int, error) {
	if w.parts == nil && len(p) < sharedMin {
		return w.Write(p)
	}
	if w.parts == nil {
		body := w.resp.Body()
		w.parts = [][]byte{bytes.Clone(body)}
		w.size = len(body)
		w.resp.ResetBody()
	}
	w.parts = append(w.parts, p)
	w.size += len(p)
	return len(p), nil
}

// Flush does nothing: the response is sent when the handler returns, as with the adaptor.
func (w *bridgeWriter) Flush() {}

// finish sets the status, the headers (Content-Type sniffed when the handler set none, as the
// adaptor does) and, with shared parts, the body stream.
func (w *bridgeWriter) finish() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.resp.SetStatusCode(w.status)
	haveContentType := false
	for k, vv := range w.header {
		if k == fasthttp.HeaderContentType {
			haveContentType = true
		}
		for _, v := range vv {
			w.resp.Header.Add(k, v)
		}
	}
	var head []byte
	if w.parts == nil {
		head = w.resp.Body()
	} else {
		for _, p := range w.parts {
			head = append(head, p[:min(len(p), 512-len(head))]...)
			if len(head) == 512 {
				break
			}
		}
		w.resp.SetBodyStream(&partsReader{parts: w.parts}, w.size)
	}
	if !haveContentType {
		w.resp.Header.Set(fasthttp.HeaderContentType, http.DetectContentType(head[:min(len(head), 512)]))
	}
}

// partsReader reads parts one after the other; fasthttp sends it with WriteTo, part by part.
type partsReader struct {
	parts [][]byte
}

func (r *partsReader) Read(p []byte) (int, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

func (r *partsReader) WriteTo(w io.Writer) (int64, error) {
	var sum int64
	for len(r.parts) > 0 {
		n, err := w.Write(r.parts[0])
		sum += int64(n)
		r.parts[0] = r.parts[0][n:]
		if err != nil {
			return sum, err
		}
		r.parts = r.parts[1:]
	}
	return sum, nil
}
