// Package requestbody reads request bodies as their bytes arrive, only once their key has been
// checked, within APP__MAX_BODY_BYTES and APP__READ_TIMEOUT, and never takes what is left of
// one for the next request (see below): what fasthttp, under Fiber, does not do as a net/http
// server would.
package requestbody

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// Request bodies cost memory as their bytes arrive, not as their Content-Length announces
// (contract 6.10). Without fiber.Config.StreamRequestBody, fasthttp allocates the announced
// length (up to APP__MAX_BODY_BYTES) before any handler runs, for any client: 1,000 connections
// announcing 1 MiB and sending 64 KiB each cost a gigabyte. Streaming alone is not enough:
//
//   - fasthttp still reads the first 8 KiB of a body before it calls the handler, waiting for
//     them (and more than that for a body over the limit): a request without a key would be
//     answered only once its body came;
//   - a body over the limit is no longer refused by fasthttp, which leaves it to the handler;
//   - Request.Body() reads the rest of a streamed body whole, whatever its size, and a read
//     that fails (a client that stops sending) leaves the error's text as the body;
//   - a body the handler did not read to its end stays on the connection: fasthttp (v1.78)
//     drains up to 256 KiB of it after the answer, waiting for the client to send them,
//     and closes when more is left; a withheld body (below), which fasthttp was told is empty,
//     it would take for the next request.
//
// So StreamBodies sets the server up: before fasthttp reads a byte of a body, it withholds one
// larger than the limit and one that comes without a valid key (fasthttp is told there is
// none); it answers the first with 413, and closes the connection of every request whose body
// was not read to its end, whatever answered it; and ReadBody reads a body as it arrives,
// within the limit and APP__READ_TIMEOUT (the read deadline fasthttp set for the request,
// headers and body).

// withheldHeader marks a request whose body headerReceived withheld; its value says why. A
// client's own header of that name is removed first, so only headerReceived sets it.
const withheldHeader = "X-Emsquery-Body-Withheld"

const (
	withheldTooLarge = "too-large"
	withheldNoKey    = "no-key"
)

// StreamBodies sets up f, a Fiber app whose StreamRequestBody is on, to read request bodies as
// they arrive, only once their key is checked (see above); hasKey says whether a request's
// headers carry a valid key, without counting a failure (the route's key check counts it when
// it refuses). Call it before any other middleware or route is added: its middleware, which
// answers a body over the limit, must come first.
func StreamBodies(f *fiber.App, hasKey func(*fasthttp.RequestHeader) bool) {
	s := f.Server()
	s.HeaderReceived = headerReceived(f.Config().BodyLimit, hasKey)
	s.Handler = closeUnread(s.Handler)
	f.Use(refuseTooLarge)
}

// headerReceived is fasthttp's Server.HeaderReceived: called once a request's headers are read,
// before any byte of its body, it withholds a body larger than limit (refuseTooLarge answers
// 413) and a body whose request carries no valid key (the route's key check answers 401):
// either is answered at once, and neither is read.
func headerReceived(limit int, hasKey func(*fasthttp.RequestHeader) bool) func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
	return func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		h.Del(withheldHeader)
		n := h.ContentLength() // -1: chunked, -2: no body
		if n == 0 || n == -2 {
			return fasthttp.RequestConfig{}
		}
		switch {
		case n > limit:
			withhold(h, withheldTooLarge)
		case !hasKey(h):
			withhold(h, withheldNoKey)
		}
		// Zero values: the server's own limit and timeouts.
		return fasthttp.RequestConfig{}
	}
}

// withhold makes fasthttp take h's request for one without a body, which it then does not read.
func withhold(h *fasthttp.RequestHeader, why string) {
	h.Set(withheldHeader, why)
	h.SetContentLength(0)
	// No "100 Continue" either: the client is not to send the body.
	h.Del(fasthttp.HeaderExpect)
}

// bodyReadKey is the user value that tells a body read to its end (ReadBody).
type bodyReadKey struct{}

// refuseTooLarge answers a request whose body headerReceived withheld as larger than the limit
// with 413: the REST error body, as fasthttp's own refusal was before bodies were streamed.
func refuseTooLarge(c *fiber.Ctx) error {
	if string(c.Request().Header.Peek(withheldHeader)) == withheldTooLarge {
		return fiber.ErrRequestEntityTooLarge
	}
	return c.Next()
}

// closeUnread runs the server's handler h, then makes fasthttp close the connection of a
// request whose body is still on it: withheld, or not read to its end by whatever answered
// (ReadBody was not called or failed, a route that takes no body, a refusal, Fiber's own answer
// to a method it does not know). fasthttp would otherwise read the rest of that body as the next
// request on the connection: a request smuggled past whatever saw one request there (a proxy).
// The connection closes gracefully (serverconn.Lingering): the client reads the answer before the end.
func closeUnread(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		h(ctx)
		n := ctx.Request.Header.ContentLength()
		if (n > 0 || n == -1) && ctx.UserValue(bodyReadKey{}) == nil || len(ctx.Request.Header.Peek(withheldHeader)) > 0 {
			ctx.SetConnectionClose()
		}
	}
}

// DropBody tells that c's handler does not use the request's body, which is then not read: its
// connection closes after the answer. For a handler that would read it otherwise (Fiber's
// net/http adaptor reads every request's body whole).
func DropBody(c *fiber.Ctx) {
	if n := c.Request().Header.ContentLength(); n > 0 || n == -1 {
		c.Context().SetConnectionClose()
	}
	c.Request().ResetBody()
}

// ErrBodyWithheld is ReadBody's error for a body that headerReceived withheld because its
// request carried no valid key, where the key check let it through after all (the keys were
// reloaded in between): the request has to be sent again.
var ErrBodyWithheld = errors.New("the request's body was not read: its API key was not valid when its headers arrived; send the request again")

// ReadBody reads c's request body as its bytes arrive, into pieces of bodyPiece bytes, so that
// it costs memory as it arrives, never as its Content-Length announces. A body over the app's
// BodyLimit (APP__MAX_BODY_BYTES) is fiber.ErrRequestEntityTooLarge; one that does not arrive
// whole before the request's read deadline (APP__READ_TIMEOUT) is fiber.ErrRequestTimeout; one
// that ends early or whose chunked framing is broken is a 400. None of them is ever taken for a
// body, and after any of them the connection closes (what is left of the body is on it). The
// caller releases the body it got when it no longer uses its bytes.
func ReadBody(c *fiber.Ctx) (*Body, error) {
	req := c.Request()
	if len(req.Header.Peek(withheldHeader)) > 0 {
		return nil, ErrBodyWithheld
	}
	limit := c.App().Config().BodyLimit
	b := bodies.Get().(*Body)
	if !req.IsBodyStream() {
		// A server that does not stream bodies (a test's) has read this one whole, within its
		// limit.
		b.whole = req.Body()
		if len(b.whole) > limit {
			b.Release()
			return nil, fiber.ErrRequestEntityTooLarge
		}
		c.Locals(bodyReadKey{}, true)
		return b, nil
	}
	announced := req.Header.ContentLength() // -1: chunked
	if announced > limit {
		b.Release()
		c.Context().SetConnectionClose()
		return nil, fiber.ErrRequestEntityTooLarge
	}
	if err := b.readFrom(req.BodyStream(), announced, limit); err != nil {
		b.Release()
		c.Context().SetConnectionClose()
		return nil, err
	}
	// Read to its end: the connection is where the next request starts.
	req.ResetBody()
	c.Locals(bodyReadKey{}, true)
	return b, nil
}

// bodyPiece is the size of the pieces a streamed body is read into: what a body costs beyond
// its bytes is at most one piece (the one being filled), and a body of up to one piece is used
// where it was read.
const bodyPiece = 16 << 10

var pieces = sync.Pool{New: func() any { return new([bodyPiece]byte) }}

var bodies = sync.Pool{New: func() any { return &Body{} }}

// Body is a request body that ReadBody read.
type Body struct {
	pieces []*[bodyPiece]byte
	n      int    // bytes read
	joined []byte // the pieces in one slice, when there are several
	whole  []byte // the body fasthttp read (a server that does not stream bodies)
}

// readFrom reads r to its end: announced bytes (-1: up to the end of a chunked body), at most
// limit.
func (b *Body) readFrom(r io.Reader, announced, limit int) error {
	for b.n != announced {
		if b.n == len(b.pieces)*bodyPiece {
			b.pieces = append(b.pieces, pieces.Get().(*[bodyPiece]byte))
		}
		p := b.pieces[len(b.pieces)-1][b.n%bodyPiece:]
		m, err := r.Read(p)
		b.n += m
		if b.n > limit {
			return fiber.ErrRequestEntityTooLarge
		}
		switch {
		case err == io.EOF && announced >= 0 && b.n < announced:
			// fasthttp's stream ends a body whose client closed the connection early as if it
			// were whole.
			return fiber.NewError(fiber.StatusBadRequest, "the request body ended before its Content-Length")
		case err == io.EOF:
			return nil
		case err != nil:
			return readError(err)
		}
	}
	return nil
}

// readError is the answer to a body whose reading failed: 408 for one that did not arrive
// within APP__READ_TIMEOUT, 400 for the rest (the client left, broken chunked framing).
func readError(err error) error {
	var ne net.Error
	// fasthttp's errors of chunked framing carry the read's error in their text only.
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() || strings.Contains(err.Error(), "i/o timeout") {
		return fiber.ErrRequestTimeout
	}
	return fiber.NewError(fiber.StatusBadRequest, "the request body could not be read")
}

// Bytes is the body, in one slice, valid until Release.
func (b *Body) Bytes() []byte {
	switch {
	case b.whole != nil:
		return b.whole
	case len(b.pieces) == 0:
		return nil
	case len(b.pieces) == 1:
		return b.pieces[0][:b.n]
	case b.joined != nil:
		return b.joined
	}
	b.joined = make([]byte, 0, b.n)
	for i, p := range b.pieces {
		end := bodyPiece
		if i == len(b.pieces)-1 {
			end = b.n - i*bodyPiece
		}
		b.joined = append(b.joined, p[:end]...)
	}
	return b.joined
}

// Release gives the body's memory back, for another request's body.
func (b *Body) Release() {
	for i, p := range b.pieces {
		pieces.Put(p)
		b.pieces[i] = nil
	}
	b.pieces, b.n, b.joined, b.whole = b.pieces[:0], 0, nil, nil
	bodies.Put(b)
}
