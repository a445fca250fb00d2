package responsebody_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/platform/responsebody"
	"github.com/emsanalytics/emsquery/platform/serverconn"
)

// sentRecord is what one AfterSent callback saw.
type sentRecord struct {
	path string
	size int64
	// delivered: when the callback ran, the client's socket already held the whole response.
	delivered bool
}

// recorder serves, on Lingering, a Fiber app whose middleware records every request with
// AfterSent; peek, set by the test, looks at the client's side when a callback runs.
type recorder struct {
	mu      sync.Mutex
	records []sentRecord
	ran     chan struct{}
	peek    func() bool
	url     string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{ran: make(chan struct{}, 16)}
	f := fiber.New(fiber.Config{DisableStartupMessage: true})
	f.Use(func(c *fiber.Ctx) error {
		path := strings.Clone(c.Path())
		err := c.Next()
		responsebody.AfterSent(c, func(size int64, err error) {
			r.mu.Lock()
			delivered := r.peek != nil && r.peek()
			r.records = append(r.records, sentRecord{path, size, delivered})
			r.mu.Unlock()
			r.ran <- struct{}{}
		})
		return err
	})
	f.Get("/a", func(c *fiber.Ctx) error { return c.SendString("answer a") })
	f.Get("/b", func(c *fiber.Ctx) error {
		// The record of /a was made before the next request on the connection is handled.
		r.mu.Lock()
		n := len(r.records)
		r.mu.Unlock()
		return c.SendString(strings.Repeat("b", n))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.Listener(serverconn.Lingering(ln, time.Minute)) }()
	t.Cleanup(func() { _ = f.Shutdown() })
	r.url = ln.Addr().String()
	return r
}

func (r *recorder) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the AfterSent callback did not run")
	}
}

// What records a request runs once its response was written: the client already holds the
// whole response then, each callback runs once with the body's size, and before the next
// request on the connection is handled.
func TestAfterSentRunsOnceTheResponseIsWritten(t *testing.T) {
	r := newRecorder(t)
	conn, err := net.Dial("tcp", r.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The client's side, looked at from the callback: the whole first response (its head and
	// its 8-byte body) is already in the client's socket when the callback runs.
	br := bufio.NewReader(conn)
	r.mu.Lock()
	r.peek = func() bool {
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		defer conn.SetReadDeadline(time.Time{})
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return false
		}
		body, err := io.ReadAll(resp.Body)
		return err == nil && string(body) == "answer a"
	}
	r.mu.Unlock()
	if _, err := io.WriteString(conn, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	r.mu.Lock()
	r.peek = nil
	r.mu.Unlock()
	if _, err := io.WriteString(conn, "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "b" {
		t.Errorf("/b saw %d records of earlier requests, want 1 (the record of /a before the next request)", len(body))
	}
	// /b's connection closes after its response: its record is made on Close.
	r.wait(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	want := []sentRecord{{"/a", 8, true}, {"/b", 1, false}}
	if len(r.records) != len(want) {
		t.Fatalf("records %+v, want %+v", r.records, want)
	}
	for i := range want {
		if r.records[i] != want[i] {
			t.Errorf("record %d: %+v, want %+v", i, r.records[i], want[i])
		}
	}
	select {
	case <-r.ran:
		t.Error("a callback ran more than once")
	case <-time.After(100 * time.Millisecond):
	}
}

// Without a connection of serverconn.Lingering (Fiber's in-memory test listener), the callback
// runs at once, as AfterBody's does.
func TestAfterSentWithoutLingering(t *testing.T) {
	f := fiber.New(fiber.Config{DisableStartupMessage: true})
	var got int64 = -1
	f.Get("/", func(c *fiber.Ctx) error {
		if err := c.SendString("hello"); err != nil {
			return err
		}
		responsebody.AfterSent(c, func(size int64, _ error) { got = size })
		if got != 5 {
			t.Errorf("the callback had not run when AfterSent returned (size %d)", got)
		}
		return nil
	})
	resp, err := f.Test(httptest.NewRequest(http.MethodGet, "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != 5 {
		t.Errorf("the callback saw size %d, want 5", got)
	}
}
