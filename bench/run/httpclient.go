package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// rawClient is the service side's HTTP client in the measured loops: one keep-alive HTTP/1.1
// connection per worker, each request's bytes built once and written in one write, the
// response parsed as it arrives (status line, headers, a body by Content-Length or chunked) and
// read to its last byte. It is to HTTP what the hand-written baseline's raw pgconn connection is
// to PostgreSQL: the least a client can do and still read the whole answer. Go's net/http
// client cost the driver, on the same two processors as the service, 0.06 ms of processor time
// and 0.05 to 0.08 ms of latency per request more (TestClientCost; docs/benchmarks.md, "How it
// measures"): at concurrency 1 a sixth of a light request's time, and none of it the service's.
// fasthttp's HostClient, measured in its place with large bodies streamed, cost 0.01 to 0.03 ms
// more per light request than this client, enough to move one station's records_count from
// 0.52-0.55 of the hand-written SQL to 0.48 in a full run: that is why this one stays.
type rawClient struct {
	addr  string
	mu    sync.Mutex
	conns []*rawConn // by worker
}

type rawConn struct {
	c       net.Conn
	br      *bufio.Reader
	unwatch func() bool // stops the context watch of conn
}

// rawRequest is one request's bytes, as the client sends them.
type rawRequest []byte

// newRawRequest builds the bytes of a request to the service: method, path with its query
// string, the headers given (name, value, ...) and the body.
func newRawRequest(host, method, target string, body []byte, headers ...string) rawRequest {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host)
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	if body != nil {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// rawResponse is what do saw of a response besides its body.
type rawResponse struct {
	status      int
	cacheStatus []byte // the Cache-Status header's value
	hasCache    bool
	errBody     []byte // a status other than 200: the body's first bytes (the rest is read, not kept)
}

// errBodyMax is how much of an error's body is kept for the report.
const errBodyMax = 300

// headWriter keeps the first errBodyMax bytes written to it.
type headWriter struct{ b []byte }

func (h *headWriter) Write(p []byte) (int, error) {
	h.b = append(h.b, p[:min(len(p), errBodyMax-len(h.b))]...)
	return len(p), nil
}

var errMalformed = errors.New("malformed HTTP response")

// do sends req on worker's connection (dialled on first use, again after an error) and reads
// the response: its body is copied to body (bytes read are returned). ctx is checked before
// sending; a connection's reads end when the context it was dialled with ends.
func (c *rawClient) do(ctx context.Context, worker int, req rawRequest, body io.Writer) (rawResponse, int64, error) {
	if err := ctx.Err(); err != nil {
		return rawResponse{}, 0, err
	}
	cn, err := c.conn(ctx, worker)
	if err != nil {
		return rawResponse{}, 0, err
	}
	resp, n, keep, err := cn.roundTrip(req, body)
	if err != nil || !keep {
		c.drop(worker, cn)
	}
	return resp, n, err
}

func (c *rawClient) conn(ctx context.Context, worker int) (*rawConn, error) {
	c.mu.Lock()
	if worker < len(c.conns) && c.conns[worker] != nil {
		cn := c.conns[worker]
		c.mu.Unlock()
		return cn, nil
	}
	c.mu.Unlock()
	nc, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	unwatch := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	cn := &rawConn{c: nc, br: bufio.NewReaderSize(nc, 64<<10), unwatch: unwatch}
	c.mu.Lock()
	for len(c.conns) <= worker {
		c.conns = append(c.conns, nil)
	}
	c.conns[worker] = cn
	c.mu.Unlock()
	return cn, nil
}

func (c *rawClient) drop(worker int, cn *rawConn) {
	cn.unwatch()
	_ = cn.c.Close()
	c.mu.Lock()
	if worker < len(c.conns) && c.conns[worker] == cn {
		c.conns[worker] = nil
	}
	c.mu.Unlock()
}

// close closes every connection.
func (c *rawClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, cn := range c.conns {
		if cn != nil {
			cn.unwatch()
			_ = cn.c.Close()
			c.conns[i] = nil
		}
	}
}

// roundTrip writes req and reads its response; keep is false when the connection cannot carry
// another request.
func (cn *rawConn) roundTrip(req rawRequest, body io.Writer) (resp rawResponse, n int64, keep bool, err error) {
	if _, err = cn.c.Write(req); err != nil {
		return resp, 0, false, err
	}
	line, err := cn.line()
	if err != nil {
		return resp, 0, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return resp, 0, false, fmt.Errorf("%w: %q", errMalformed, line)
	}
	if resp.status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return resp, 0, false, fmt.Errorf("%w: %q", errMalformed, line)
	}
	length, chunked := int64(-1), false
	keep = true
	for {
		h, err := cn.line()
		if err != nil {
			return resp, 0, false, err
		}
		if len(h) == 0 {
			break
		}
		colon := bytes.IndexByte(h, ':')
		if colon < 0 {
			return resp, 0, false, fmt.Errorf("%w: header %q", errMalformed, h)
		}
		name, value := h[:colon], bytes.TrimSpace(h[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 {
				return resp, 0, false, fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			keep = keep && !bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte(headerCacheStatus)):
			// The value is copied: the reader's buffer is reused by the body.
			resp.cacheStatus, resp.hasCache = append(resp.cacheStatus[:0], value...), true
		}
	}
	if resp.status != 200 {
		hw := &headWriter{}
		body = hw
		defer func() { resp.errBody = hw.b }()
	}
	switch {
	case chunked:
		n, err = cn.chunked(body)
	case length >= 0:
		n, err = copyBuffered(body, cn.br, length)
	default:
		// Until the server closes the connection.
		n, err = io.Copy(body, cn.br)
		keep = false
	}
	if err != nil {
		return resp, n, false, err
	}
	return resp, n, keep, nil
}

// line reads one CRLF-ended line, without the CRLF; it is valid until the next read.
func (cn *rawConn) line() ([]byte, error) {
	l, err := cn.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line too long", errMalformed)
		}
		return nil, err
	}
	return bytes.TrimSuffix(l[:len(l)-1], []byte("\r")), nil
}

// chunked reads a chunked body into body, and its trailers.
func (cn *rawConn) chunked(body io.Writer) (int64, error) {
	var n int64
	for {
		l, err := cn.line()
		if err != nil {
			return n, err
		}
		if i := bytes.IndexByte(l, ';'); i >= 0 {
			l = l[:i]
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(l)), 16, 64)
		if err != nil || size < 0 {
			return n, fmt.Errorf("%w: chunk size %q", errMalformed, l)
		}
		if size == 0 {
			for {
				t, err := cn.line()
				if err != nil {
					return n, err
				}
				if len(t) == 0 {
					return n, nil
				}
			}
		}
		m, err := copyBuffered(body, cn.br, size)
		n += m
		if err != nil {
			return n, err
		}
		if l, err := cn.line(); err != nil || len(l) != 0 {
			return n, fmt.Errorf("%w: no CRLF after a chunk", errMalformed)
		}
	}
}

// copyBuffered copies the next n bytes of br to w straight from br's buffer. io.CopyN, used here
// before, allocated a buffer of 32 KiB on every call (every chunk of a chunked body) and copied
// every byte through it: about 130 ms of the driver's processor time per 82 MB `patients`
// answer, on the processors the service and the database share (see "How it measures" in
// docs/benchmarks.md).
func copyBuffered(w io.Writer, br *bufio.Reader, n int64) (int64, error) {
	var done int64
	for done < n {
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return done, err
			}
		}
		p, _ := br.Peek(int(min(int64(br.Buffered()), n-done)))
		k, err := w.Write(p)
		_, _ = br.Discard(k)
		done += int64(k)
		if err != nil {
			return done, err
		}
		if k < len(p) {
			return done, io.ErrShortWrite
		}
	}
	return done, nil
}
