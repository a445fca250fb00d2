package systemtest

// Slow and idle clients (contract 6.8): thousands of connections trickling headers are cut off
// at APP__READ_TIMEOUT while others are answered, and past APP__MAX_CONNECTIONS new connections
// are closed at once while the service stays healthy.

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// getOn asks GET path on the keep-alive connection c (its answers read through r) and reads the
// answer whole, within timeout; an answer other than 200 is an error.
func getOn(c net.Conn, r *bufio.Reader, path string, timeout time.Duration) error {
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: emsquery\r\n\r\n"); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// ensureFileLimit raises the test process's open-file limit (which the service inherits) to
// need, within the hard limit.
func ensureFileLimit(t *testing.T, need uint64) {
	t.Helper()
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if r.Cur >= need {
		return
	}
	if r.Max < need {
		t.Fatalf("the open-file limit is %d (hard %d); this test needs %d: raise it (ulimit -Hn)", r.Cur, r.Max, need)
	}
	r.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
}

// closedWithin reads c until the server closes it (end of file or a reset) and returns what it
// read and whether that happened within d; a read that times out means the connection is open.
func closedWithin(c net.Conn, d time.Duration) ([]byte, bool) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return b, false
	}
	return b, true
}

func TestSlowClientsTrickling(t *testing.T) {
	const n = 2000
	const readTimeout = 3 * time.Second
	ensureFileLimit(t, 3*n+1000)
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"APP__READ_TIMEOUT": "3", "LOG__CONSOLE__ENABLED": "false",
		// The tricklers all come from 127.0.0.1: no bound per address here (see TestConnectionsPerClient).
		"APP__MAX_CONNECTIONS_PER_CLIENT": "0"})
	addr := strings.TrimPrefix(svc.URL, "http://")

	type trickler struct {
		conn     net.Conn
		opened   time.Time
		closedAt atomic.Int64 // unix nanoseconds; 0 while open
		first    []byte
	}
	ts := make([]*trickler, n)
	var wg sync.WaitGroup
	var closed atomic.Int32
	for i := range ts {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		tr := &trickler{conn: c, opened: time.Now()}
		ts[i] = tr
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET /v1/ping HTTP/1.1\r\nHost: emsquery\r\n"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := io.ReadAll(c) // until the server closes (or the test does)
			tr.first = b
			tr.closedAt.Store(time.Now().UnixNano())
			closed.Add(1)
		}()
	}
	// A header line from each every half second: never a whole request.
	stopTrickle := make(chan struct{})
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopTrickle:
				return
			case <-tick.C:
			}
			for _, tr := range ts {
				if tr.closedAt.Load() == 0 {
					_, _ = io.WriteString(tr.conn, "X-Trickle: still here\r\n")
				}
			}
		}
	}()
	defer close(stopTrickle)

	// Others are answered meanwhile, on new connections, until every trickler is cut off.
	served := 0
	deadline := time.Now().Add(readTimeout + 15*time.Second)
	for closed.Load() < n && time.Now().Before(deadline) {
		if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
			t.Fatalf("records_count = %d, want %d, with %d connections trickling", got, want, n-int(closed.Load()))
		}
		wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
		served++
		time.Sleep(100 * time.Millisecond)
	}
	if c := closed.Load(); c < n {
		t.Fatalf("%d of %d trickling connections still open %s after they opened (APP__READ_TIMEOUT=3)", n-int(c), n, readTimeout+15*time.Second)
	}
	if served < 5 {
		t.Errorf("only %d requests served while connections trickled", served)
	}
	wg.Wait()
	early := 0
	for _, tr := range ts {
		// The read deadline starts when the service accepts the connection, a moment after it
		// was opened here.
		if lived := time.Unix(0, tr.closedAt.Load()).Sub(tr.opened); lived < readTimeout-250*time.Millisecond {
			early++
		}
	}
	if early > 0 {
		t.Errorf("%d trickling connections closed before APP__READ_TIMEOUT", early)
	}
	if !strings.HasPrefix(string(ts[0].first), "HTTP/1.1 408") {
		t.Errorf("a trickling connection got %q, want 408 Request Timeout", ts[0].first)
	}
	waitHealthy(t, svc, 5*time.Second)
}

func TestMaxConnections(t *testing.T) {
	const max = 300
	ensureFileLimit(t, 3*max+1000)
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{"APP__MAX_CONNECTIONS": "300", "APP__READ_TIMEOUT": "60", "APP__MAX_CONNECTIONS_PER_CLIENT": "0"})
	addr := strings.TrimPrefix(svc.URL, "http://")

	// One keep-alive client connection, and idle ones up to the limit.
	keep, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	keepReader := bufio.NewReader(keep)
	ping := func() error { return getOn(keep, keepReader, "/v1/healthz", 10*time.Second) }
	if err := ping(); err != nil {
		t.Fatal(err)
	}
	idle := make([]net.Conn, 0, max-1)
	for range max - 1 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
		defer c.Close()
	}
	// The idle ones are within the limit: open.
	time.Sleep(500 * time.Millisecond) // for the service to accept them all
	if _, closed := closedWithin(idle[len(idle)-1], 300*time.Millisecond); closed {
		t.Fatal("a connection within APP__MAX_CONNECTIONS was closed")
	}

	// Past the limit: every new connection is closed at once, not left waiting.
	for i := range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			continue // refused before the handshake finished: refused too
		}
		b, closed := closedWithin(c, 2*time.Second)
		c.Close()
		if !closed || len(b) > 0 {
			t.Fatalf("connection %d past APP__MAX_CONNECTIONS: closed %v, read %q; want closed at once", i, closed, b)
		}
	}
	// The connection already open is served all along.
	if err := ping(); err != nil {
		t.Fatalf("keep-alive connection while full: %v", err)
	}
	servicetest.WaitFor(t, 5*time.Second, "the refusal warning", func() bool {
		return strings.Contains(svc.Output(), "APP__MAX_CONNECTIONS reached")
	})
	if n := strings.Count(svc.Output(), "APP__MAX_CONNECTIONS reached"); n != 1 {
		t.Errorf("the refusal is logged %d times for 20 refusals, want once", n)
	}

	// Closing some makes room again.
	for _, c := range idle[:50] {
		c.Close()
	}
	servicetest.WaitFor(t, 5*time.Second, "a new connection served", func() bool {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(svc.URL + "/v1/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err := ping(); err != nil {
		t.Fatal(err)
	}
}
