package requestbody

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// bodyServer serves, as the service does (bodies streamed, StreamBodies), one route
// that answers the SHA-256 of the body ReadBody read, or ReadBody's error. A request carries a
// key when it has an X-Key header. It returns the server's address.
func bodyServer(t *testing.T, limit int) string {
	t.Helper()
	f := fiber.New(fiber.Config{DisableStartupMessage: true, BodyLimit: limit, StreamRequestBody: true, DisablePreParseMultipartForm: true,
		ReadTimeout: 2 * time.Second})
	StreamBodies(f, func(h *fasthttp.RequestHeader) bool { return len(h.Peek("X-Key")) > 0 })
	f.Post("/sum", func(c *fiber.Ctx) error {
		if len(c.Request().Header.Peek("X-Key")) == 0 {
			return c.Status(fiber.StatusUnauthorized).SendString("no key")
		}
		body, err := ReadBody(c)
		if err != nil {
			return err
		}
		defer body.Release()
		return c.SendString(sumOf(body.Bytes()))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.Listener(ln) }()
	t.Cleanup(func() { _ = f.Shutdown() })
	return ln.Addr().String()
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Bodies around the sizes that matter (fasthttp's 8 KiB read before the handler, the pieces of
// bodyPiece), announced and chunked, on one keep-alive connection: each read whole and exactly.
func TestReadBodySizes(t *testing.T) {
	addr := bodyServer(t, 1<<20)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	for _, size := range []int{1, 100, 8<<10 - 1, 8 << 10, 8<<10 + 1, bodyPiece - 1, bodyPiece, bodyPiece + 1, 2 * bodyPiece, 3*bodyPiece + 7, 1 << 20} {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(i*7 + i/251)
		}
		for _, chunked := range []bool{false, true} {
			if chunked {
				fmt.Fprintf(c, "POST /sum HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nTransfer-Encoding: chunked\r\n\r\n")
				for rest := body; len(rest) > 0; {
					n := min(len(rest), 5000)
					fmt.Fprintf(c, "%x\r\n%s\r\n", n, rest[:n])
					rest = rest[n:]
				}
				io.WriteString(c, "0\r\n\r\n")
			} else {
				fmt.Fprintf(c, "POST /sum HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nContent-Length: %d\r\n\r\n%s", size, body)
			}
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("%d bytes (chunked %v): %v", size, chunked, err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(got) != sumOf(body) || resp.Close {
				t.Errorf("%d bytes (chunked %v): HTTP %d (close %v) %s, want 200 with the body's sum, kept alive", size, chunked, resp.StatusCode, resp.Close, got)
			}
		}
	}
}

// askRaw sends raw on a new connection and returns the answer, and whether the connection then
// ended with nothing more (false for an answer that keeps it open).
func askRaw(t *testing.T, addr, raw string) (*http.Response, string, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !resp.Close {
		return resp, string(body), false
	}
	rest, err := io.ReadAll(r)
	return resp, string(body), err == nil && len(rest) == 0
}

// Refusals: a body over the limit is 413 whether announced (at once, unread) or chunked (once
// past it); a body without a key is not read, and its request is answered at once; after each,
// the connection ends rather than read the rest of the body as a request.
func TestReadBodyRefusals(t *testing.T) {
	addr := bodyServer(t, 1000)
	inner := "GET /sum HTTP/1.1\r\nHost: x\r\n\r\n"
	for name, tc := range map[string]struct {
		raw    string
		status int
	}{
		"announced over the limit, headers only": {"POST /sum HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nContent-Length: 1001\r\n\r\n", 413},
		"chunked over the limit":                 {"POST /sum HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n" + strings.Repeat("a", 1001) + "\r\n" + inner, 413},
		"no key, headers only":                   {"POST /sum HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", 401},
		"no key, a request as its body":          {fmt.Sprintf("POST /sum HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner), 401},
		"no key, chunked":                        {fmt.Sprintf("POST /sum HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(inner), inner), 401},
		"a method Fiber does not know, no key":   {fmt.Sprintf("FOO /sum HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner), 400},
		"a method Fiber does not know, a key":    {fmt.Sprintf("FOO /sum HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nContent-Length: %d\r\n\r\n%s", len(inner), inner), 400},
		"a header that says withheld":            {fmt.Sprintf("POST /sum HTTP/1.1\r\nHost: x\r\nX-Key: k\r\n%s: %s\r\nContent-Length: 3\r\n\r\nabc", withheldHeader, withheldTooLarge), 200},
	} {
		start := time.Now()
		resp, body, ended := askRaw(t, addr, tc.raw)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: HTTP %d %q, want %d", name, resp.StatusCode, body, tc.status)
		}
		if tc.status != 200 && (!resp.Close || !ended) {
			t.Errorf("%s: Connection: close %v, ended with nothing more %v; want both", name, resp.Close, ended)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: answered after %s, want at once", name, d)
		}
	}
}

// A body that stops arriving is a 408 at the read timeout, and one whose client ends its side
// early a 400: never a body made of what came, or of the error's text.
func TestReadBodyIncomplete(t *testing.T) {
	addr := bodyServer(t, 1<<20)
	body := bytes.Repeat([]byte("x"), 20<<10)
	head := fmt.Sprintf("POST /sum HTTP/1.1\r\nHost: x\r\nX-Key: k\r\nContent-Length: %d\r\n\r\n", len(body)+1)
	start := time.Now()
	resp, got, _ := askRaw(t, addr, head+string(body))
	if took := time.Since(start); resp.StatusCode != http.StatusRequestTimeout || took < 1500*time.Millisecond || took > 4*time.Second {
		t.Errorf("a body that stops: HTTP %d %q after %s, want 408 at the 2 s read timeout", resp.StatusCode, got, took)
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, head+string(body))
	_ = c.(*net.TCPConn).CloseWrite()
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body cut short: HTTP %d, want 400", resp.StatusCode)
	}
}
