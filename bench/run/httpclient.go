package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
)

// serviceClient is the service side's HTTP client in the measured loops: fasthttp's HostClient, with
// keep-alive connections reused by the workers, each request's bytes written in one write, and
// every response read to its last byte; a body larger than bodyInMemory (a whole table, the
// export's stream) is copied to the caller's writer as it arrives instead of being held. Go's
// net/http client cost the driver, on the same two processors as the service, 0.06 ms of
// processor time and 0.05 to 0.08 ms of latency per request more than fasthttp's
// (TestClientCost; docs/benchmarks.md, "How it measures"): at concurrency 1 a sixth of a light
// request's time, and none of it the service's.
type serviceClient struct {
	hc *fasthttp.HostClient
}

// bodyInMemory is the largest response body the client reads into memory; a larger one is
// streamed to the caller's writer.
const bodyInMemory = 64 << 10

func newServiceClient(addr string) *serviceClient {
	return &serviceClient{hc: &fasthttp.HostClient{
		Addr:                     addr,
		MaxConns:                 1024,
		ReadBufferSize:           64 << 10,
		StreamResponseBody:       true,
		MaxResponseBodySize:      bodyInMemory,
		NoDefaultUserAgentHeader: true,
	}}
}

// clientRequest is one request, built once and copied for each send.
type clientRequest struct{ r *fasthttp.Request }

// newClientRequest builds a request to the service at host: method, path with its query string,
// the headers given (name, value, ...) and the body (nil: none).
func newClientRequest(host, method, target string, body []byte, headers ...string) clientRequest {
	r := &fasthttp.Request{}
	r.SetRequestURI("http://" + host + target)
	r.Header.SetMethod(method)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	if body != nil {
		r.SetBody(body)
	}
	return clientRequest{r: r}
}

// clientResponse is what do saw of a response besides its body.
type clientResponse struct {
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

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// do sends req and reads the response: its body is copied to body (bytes read are returned).
// ctx is checked before sending; its deadline, or clientTimeout, bounds the exchange. The
// connections are the client's, shared by the workers.
func (c *serviceClient) do(ctx context.Context, req clientRequest, body io.Writer) (clientResponse, int64, error) {
	if err := ctx.Err(); err != nil {
		return clientResponse{}, 0, err
	}
	r, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(r)
	defer fasthttp.ReleaseResponse(resp)
	req.r.CopyTo(r)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(clientTimeout)
	}
	if err := c.hc.DoDeadline(r, resp, deadline); err != nil {
		return clientResponse{}, 0, err
	}
	out := clientResponse{status: resp.StatusCode()}
	if v := resp.Header.Peek(headerCacheStatus); v != nil {
		out.cacheStatus, out.hasCache = append([]byte(nil), v...), true
	}
	var hw *headWriter
	if out.status != http.StatusOK {
		hw = &headWriter{}
		body = hw
	}
	cw := &countingWriter{w: body}
	err := resp.BodyWriteTo(cw)
	if hw != nil {
		out.errBody = hw.b
	}
	if err != nil {
		return out, cw.n, fmt.Errorf("read the response body: %w", err)
	}
	return out, cw.n, nil
}

// close closes the idle connections.
func (c *serviceClient) close() { c.hc.CloseIdleConnections() }

// clientTimeout bounds a request sent without a deadline in its context: far beyond any
// measured request, it only keeps a stuck connection from holding a worker for good.
const clientTimeout = 30 * time.Minute
