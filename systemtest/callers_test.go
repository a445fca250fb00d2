package systemtest

// No single caller takes the service down (contract 6.10), the parts outside GraphQL execution:
// clients that stop reading (APP__WRITE_TIMEOUT), one address's connections
// (APP__MAX_CONNECTIONS_PER_CLIENT), key guessing (AUTHENTICATION__FAILURES_PER_MINUTE),
// exports (LIMITS__MAX_CONCURRENT_EXPORTS), the health check, malformed requests.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// dialerFrom dials from source address ip (any of 127/8 on Linux's loopback), so that one test
// process is several clients to the service.
func dialerFrom(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
}

// clientFrom is an HTTP client whose connections come from ip.
func clientFrom(ip string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialerFrom(ip).DialContext}}
}

// tcpState is the kernel's TCP state of c (unix.BPF_TCP_ESTABLISHED, unix.BPF_TCP_CLOSE after a
// reset, ...), read without reading any data.
func tcpState(t *testing.T, c net.Conn) uint8 {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var serr error
	if err := raw.Control(func(fd uintptr) { info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return info.State
}

// smallReceiveBuffer makes a dialer's sockets take little at a time, so that a response stops in
// the server's socket as soon as the client stops reading (set before connecting, as the TCP
// window is agreed then).
func smallReceiveBuffer(d *net.Dialer) *net.Dialer {
	d.Control = func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}
	return d
}

// exportPath is the CSV export's route.
const exportPath = "/v1/reports/main-report/export"

// exportHeaders carry the service's key in both headers the export checks.
func exportHeaders(svc *servicetest.Service) map[string]string {
	return map[string]string{svc.Header: svc.Key, "SERVICE-X-API-KEY": svc.Key}
}

// graphiQLAsset is the largest static file the service serves without a key (about 1 MB).
const graphiQLAsset = "/graphiql/graphiql.min.js"

// slowExportRows are inserted in March 2019, a month of their own: a CSV of about 400 KB, which
// a reader at 50 KB/s takes several APP__WRITE_TIMEOUTs to download.
const slowExportRows = `INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency,
  distance, response_time_s, municipality, transported)
SELECT 900000 + g, timestamp '2019-03-01' + g * interval '5 minutes', 'Central', 'C', g % 9000 / 7.0,
  g % 1800, 'Oslo', g % 2 = 0
FROM generate_series(1, 6000) AS g`

// TestWriteTimeout: 2,000 sockets ask for the GraphiQL script (1 MB) with a small receive buffer
// and never read: each is reset once it has taken no byte for APP__WRITE_TIMEOUT (2 s here; at
// most a quarter more), not before, while other requests are answered all along. Meanwhile a
// client reads a CSV export at 50 KB/s for several timeouts and receives all of it.
func TestWriteTimeout(t *testing.T) {
	const n = 2000
	const writeTimeout = 2 * time.Second
	ensureFileLimit(t, 3*n+1000)
	db := servicetest.FixtureDB(t)
	if err := db.Cluster.Exec(context.Background(), db.Name, slowExportRows); err != nil {
		t.Fatal(err)
	}
	want := expectedCount(t, db)
	var wantRows int64
	if err := db.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM fact_record
WHERE occurred_at >= '2019-03-01' AND occurred_at < '2019-04-01'`).Scan(&wantRows); err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Start(t, db, map[string]string{"APP__WRITE_TIMEOUT": "2", "LOG__CONSOLE__ENABLED": "false"})
	addr := strings.TrimPrefix(svc.URL, "http://")
	var asset int
	{
		resp, body := svc.Get(t, graphiQLAsset, nil)
		file, err := os.ReadFile("../platform/graphiql/assets/dist/graphiql.min.js")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, file) {
			t.Fatalf("GET %s: status %d, %d bytes; want 200 and the file's %d bytes", graphiQLAsset, resp.StatusCode, len(body), len(file))
		}
		asset = len(body)
	}

	// The slow but steady reader starts first and reads all along.
	type download struct {
		rows     int64
		bytes    int
		duration time.Duration
		err      error
	}
	done := make(chan download, 1)
	go func() {
		var d download
		start := time.Now()
		defer func() { d.duration = time.Since(start); done <- d }()
		client := &http.Client{Transport: &http.Transport{DialContext: smallReceiveBuffer(&net.Dialer{}).DialContext}}
		req, _ := http.NewRequest(http.MethodGet, svc.URL+exportPath+"?start_date=2019-03-01&end_date=2019-03-31", nil)
		for k, v := range exportHeaders(svc) {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			d.err = err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			d.err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
			return
		}
		// 5 KB every 100 ms: 50 KB/s.
		buf := make([]byte, 5000)
		for tick := time.NewTicker(100 * time.Millisecond); ; <-tick.C {
			m, err := io.ReadFull(resp.Body, buf)
			d.bytes += m
			d.rows += int64(strings.Count(string(buf[:m]), "\n"))
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				d.err = err
				return
			}
		}
		d.rows-- // the header row
	}()

	// The sockets that never read, from 20 addresses (within APP__MAX_CONNECTIONS_PER_CLIENT).
	conns := make([]net.Conn, n)
	opened := time.Now()
	for i := range conns {
		c, err := smallReceiveBuffer(dialerFrom(fmt.Sprintf("127.0.0.%d", 10+i%20))).Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET "+graphiQLAsset+" HTTP/1.1\r\nHost: emsquery\r\n\r\n"); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	allSent := time.Now()
	t.Logf("%d sockets opened and asked in %s", n, allSent.Sub(opened).Round(time.Millisecond))

	// Others are answered meanwhile, until every stalled socket is reset.
	served := 0
	open := func() int {
		k := 0
		for _, c := range conns {
			if tcpState(t, c) == unix.BPF_TCP_ESTABLISHED {
				k++
			}
		}
		return k
	}
	var closedAt time.Time
	// The bound: the timeout and a quarter, and time for a loaded machine to have served 2,000
	// requests (without the write timeout they would stay open until APP__IDLE_TIMEOUT, 120 s).
	for deadline := allSent.Add(writeTimeout*5/4 + 8*time.Second); ; {
		if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
			t.Fatalf("records_count = %d, want %d", got, want)
		}
		wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
		served++
		k := open()
		if elapsed := time.Since(opened); elapsed < writeTimeout*3/4 && k < n {
			t.Fatalf("%d of %d stalled sockets closed %s after they asked, before APP__WRITE_TIMEOUT", n-k, n, elapsed)
		}
		if k == 0 {
			closedAt = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d sockets that never read still open %s after the last one asked (APP__WRITE_TIMEOUT 2 s)", k, n, time.Since(allSent))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("all %d stalled sockets reset %s after the first asked, %s after the last; %d other requests answered meanwhile",
		n, closedAt.Sub(opened).Round(time.Millisecond), closedAt.Sub(allSent).Round(time.Millisecond), served)
	// A reset socket has what the kernels held when it stopped, then the reset: never the whole file.
	for i, c := range conns[:50] {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		if err == nil || len(b) >= asset {
			t.Fatalf("stalled socket %d: read %d bytes (the file is %d), end %v; want part of it, then a reset", i, len(b), asset, err)
		}
	}
	if status := procStatus(t, svc.PID()); status != "" {
		t.Logf("service: %s", status)
	}

	d := <-done
	if d.err != nil {
		t.Fatalf("the slow reader's export failed after %s: %v", d.duration, d.err)
	}
	if d.duration < 2*writeTimeout {
		t.Errorf("the slow reader took %s, not longer than two write timeouts: the test proves nothing", d.duration)
	}
	if d.rows != wantRows {
		t.Errorf("the slow reader got %d rows (%d bytes in %s), want %d", d.rows, d.bytes, d.duration, wantRows)
	}
	t.Logf("slow reader: %d rows, %d bytes in %s", d.rows, d.bytes, d.duration.Round(time.Millisecond))
	waitHealthy(t, svc, 5*time.Second)
}

// procStatus is the peak and current memory of process pid.
func procStatus(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") || strings.HasPrefix(line, "VmRSS:") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(out, ", ")
}

// TestConnectionsPerClient: past APP__MAX_CONNECTIONS_PER_CLIENT connections from one address,
// its new ones are closed at once, while another address is served; a connection closed makes
// room for that address again.
func TestConnectionsPerClient(t *testing.T) {
	const perClient = 20
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{"APP__MAX_CONNECTIONS_PER_CLIENT": strconv.Itoa(perClient), "APP__READ_TIMEOUT": "60"})
	addr := strings.TrimPrefix(svc.URL, "http://")
	ping := func(ip string) error {
		resp, err := clientFrom(ip).Get(svc.URL + "/v1/ping")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	// One keep-alive connection that asks, and idle ones up to the bound, from 127.0.0.2.
	keep, err := dialerFrom("127.0.0.2").Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	keepReader := bufio.NewReader(keep)
	askKeep := func() error { return getOn(keep, keepReader, "/v1/ping", 5*time.Second) }
	if err := askKeep(); err != nil {
		t.Fatal(err)
	}
	idle := make([]net.Conn, 0, perClient-1)
	for range perClient - 1 {
		c, err := dialerFrom("127.0.0.2").Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
		defer c.Close()
	}
	time.Sleep(300 * time.Millisecond) // for the service to accept them all
	if _, closed := closedWithin(idle[len(idle)-1], 300*time.Millisecond); closed {
		t.Fatal("a connection within APP__MAX_CONNECTIONS_PER_CLIENT was closed")
	}
	// Past the bound, 127.0.0.2's new connections are closed at once ...
	for i := range 10 {
		c, err := dialerFrom("127.0.0.2").Dial("tcp", addr)
		if err != nil {
			continue // refused before the handshake finished: refused too
		}
		start := time.Now()
		b, closed := closedWithin(c, 2*time.Second)
		c.Close()
		if !closed || len(b) > 0 {
			t.Fatalf("connection %d past APP__MAX_CONNECTIONS_PER_CLIENT: closed %v, read %q; want closed at once", i, closed, b)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("connection %d past the bound closed after %s, want at once", i, d)
		}
	}
	if err := ping("127.0.0.2"); err == nil {
		t.Fatal("a request on a new connection from 127.0.0.2 was answered past APP__MAX_CONNECTIONS_PER_CLIENT")
	}
	// ... while another address is served, and 127.0.0.2's open connection too.
	for range 5 {
		if err := ping("127.0.0.3"); err != nil {
			t.Fatalf("127.0.0.3 while 127.0.0.2 is at its bound: %v", err)
		}
	}
	if err := askKeep(); err != nil {
		t.Fatalf("127.0.0.2's open connection at its bound: %v", err)
	}
	servicetest.WaitFor(t, 5*time.Second, "the refusal warning", func() bool {
		return strings.Contains(svc.Output(), "APP__MAX_CONNECTIONS_PER_CLIENT")
	})
	// The refusal's warning, written once for many refusals, names no address (the access
	// lines of served requests name their client).
	for _, line := range strings.Split(svc.Output(), "\n") {
		if strings.Contains(line, "APP__MAX_CONNECTIONS_PER_CLIENT") && strings.Contains(line, "127.0.0.2") {
			t.Errorf("the refusal's warning names the refused address: %s", line)
		}
	}
	// One closed makes room for 127.0.0.2 again.
	idle[0].Close()
	servicetest.WaitFor(t, 5*time.Second, "127.0.0.2 served again after one of its connections closed", func() bool {
		return ping("127.0.0.2") == nil
	})
}

// TestMalformedRequest: a request that is not HTTP gets 400 with a fixed body that repeats
// nothing of it, and the log does not repeat it either; the key it carried is nowhere.
func TestMalformedRequest(t *testing.T) {
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, nil)
	addr := strings.TrimPrefix(svc.URL, "http://")
	for _, raw := range []string{
		// No method: the key where the request line should be, and in its header.
		svc.Key + "\r\n" + svc.Header + ": " + svc.Key + "\r\n\r\n",
		// A Content-Length that is not a number (the key).
		"POST /graphql HTTP/1.1\r\nHost: emsquery\r\n" + svc.Header + ": " + svc.Key + "\r\nContent-Length: " + svc.Key + "\r\n\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: status %d, want 400: %s", raw, resp.StatusCode, body)
		}
		if want := `{"error":{"code":"BAD_USER_INPUT","message":"malformed HTTP request"}}`; string(body) != want {
			t.Errorf("%q: body %s, want %s", raw, body, want)
		}
		for k, vs := range resp.Header {
			if strings.Contains(k+strings.Join(vs, ","), svc.Key) {
				t.Errorf("%q: the key is in the answer's header %s", raw, k)
			}
		}
	}
	waitHealthy(t, svc, 5*time.Second)
	// The access lines first (log lines reach the output within 100 ms), then what they hold.
	servicetest.WaitFor(t, 5*time.Second, "access line for the 400s", func() bool { return strings.Contains(svc.Output(), "status=400") })
	if strings.Contains(svc.Output(), svc.Key) {
		t.Error("the log repeats the key a malformed request carried")
	}
}

// manyExportRows are 300,000 records in May 2018, a month of their own: tens of megabytes of
// CSV, more than every buffer between the database and a client that does not read holds, so
// that the COPY stays active while the client does not read.
const manyExportRows = `INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency,
  distance, response_time_s, municipality, transported)
SELECT 1000000 + g, timestamp '2018-05-01' + g * interval '20 seconds', 'Central', 'C', g % 9000 / 7.0,
  g % 1800, 'Oslo', g % 2 = 0
FROM generate_series(1, 120000) AS g`

// TestConcurrentExports: with LIMITS__MAX_CONCURRENT_EXPORTS at its default (2), two exports
// whose clients do not read hold two database connections; a third is refused at once with 503
// SERVICE_UNAVAILABLE and Retry-After, no more COPY runs, and GraphQL is answered all along.
// When the two are abandoned at APP__WRITE_TIMEOUT (5 s here), their COPYs are cancelled and the
// next export is served.
func TestConcurrentExports(t *testing.T) {
	db := servicetest.FixtureDB(t)
	if err := db.Cluster.Exec(context.Background(), db.Name, manyExportRows); err != nil {
		t.Fatal(err)
	}
	want := expectedCount(t, db)
	pool := db.Pool(t)
	copies := func() int {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'emsquery' AND query LIKE '%COPY (SELECT%' AND state = 'active'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Each key may run one of the two exports (half of them, rounded up).
	first, second, third := newTestKey("first", "export"), newTestKey("second", "export"), newTestKey("third", "export")
	keys := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, keys, first, second, third)
	svc := servicetest.Start(t, db, map[string]string{"DATABASE__POOL_SIZE": "4", "DATABASE__MAX_OVERFLOW": "0", "CACHE__ENABLED": "false", "APP__WRITE_TIMEOUT": "5",
		"AUTHENTICATION__API_KEYS_FILE": keys, "LIMITS__MAX_STREAMED_ANSWERS": "3"})
	client := &http.Client{Transport: &http.Transport{DialContext: smallReceiveBuffer(&net.Dialer{}).DialContext, DisableKeepAlives: true}}
	exportWith := func(key testKey) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, svc.URL+exportPath+"?start_date=2018-05-01&end_date=2018-05-31", nil)
		req.Header.Set(svc.Header, key.secret)
		req.Header.Set("SERVICE-X-API-KEY", key.secret)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err) // from a goroutine too
			return &http.Response{Body: io.NopCloser(strings.NewReader(""))}
		}
		return resp
	}
	// Two exports that read their first bytes and then stop (started together: each waits for
	// its sort).
	running := make([]*http.Response, 2)
	var wg sync.WaitGroup
	for i, key := range []testKey{first, second} {
		wg.Add(1)
		go func() { defer wg.Done(); running[i] = exportWith(key) }()
		if i == 0 {
			// One key cannot hold both exports while another would wait: with one running,
			// the same key's second is refused for its key's share (429).
			servicetest.WaitFor(t, 30*time.Second, "the first export's statement running", func() bool { return copies() == 1 })
			resp := exportWith(first)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := decodeJSON(t, body)
			e, _ := m["error"].(map[string]any)
			if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || e["code"] != "RATE_LIMITED" ||
				!strings.Contains(fmt.Sprint(e["message"]), "LIMITS__MAX_CONCURRENT_EXPORTS=2") {
				t.Errorf("the first key's second export while its first runs: %d %v %s; want 429 RATE_LIMITED with Retry-After", resp.StatusCode, resp.Header, body)
			}
		}
	}
	wg.Wait()
	export := func() *http.Response { return exportWith(third) }
	for _, resp := range running {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("export within the limit: status %d: %s", resp.StatusCode, b)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if n := copies(); n != 2 {
		t.Fatalf("%d exports' statements running, want 2", n)
	}
	for i := range 3 {
		resp := export()
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("export %d past the limit: status %d, want 503: %.200s", i+3, resp.StatusCode, body)
		}
		m := decodeJSON(t, body)
		e, _ := m["error"].(map[string]any)
		if e["code"] != "SERVICE_UNAVAILABLE" || !strings.Contains(fmt.Sprint(e["message"]), "LIMITS__MAX_CONCURRENT_EXPORTS=2") {
			t.Errorf("export past the limit: body %s", body)
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Errorf("export past the limit: Retry-After %q", resp.Header.Get("Retry-After"))
		}
		// GraphQL has the rest of the pool.
		if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
			t.Fatalf("records_count = %d, want %d, with two exports running", got, want)
		}
	}
	// One key cannot hold both while another waits: the first key's second export is its
	// key's refusal (429), not the total's.
	resp := exportWith(first)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("the first key's second export with both running: %d %.200s; want 503 with Retry-After (the total wins)", resp.StatusCode, body)
	}
	if n := copies(); n != 2 {
		t.Errorf("%d exports' statements running after the refusals, want 2", n)
	}
	// Their clients never read on: after APP__WRITE_TIMEOUT their responses are abandoned and their
	// COPYs cancelled (the database work of a client that stopped reading), and the next export
	// is served.
	start := time.Now()
	servicetest.WaitFor(t, (5*time.Second)*5/4+5*time.Second, "the stalled exports' statements cancelled", func() bool { return copies() == 0 })
	t.Logf("the stalled exports' COPYs ended %s after the refusals", time.Since(start).Round(time.Millisecond))
	servicetest.WaitFor(t, 5*time.Second, "the abandoned exports logged", func() bool {
		return strings.Count(svc.Output(), "export abandoned: the client accepted no byte for APP__WRITE_TIMEOUT") == 2
	})
	servicetest.WaitFor(t, 5*time.Second, "an export served after the stalled ones were abandoned", func() bool {
		resp := export()
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// requestFrom sends method to path from source address ip with headers, and returns the
// response with its body read.
func requestFrom(t *testing.T, svc *servicetest.Service, ip, method, path string, headers map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, svc.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := clientFrom(ip).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestAuthFailuresPerMinute: past AUTHENTICATION__FAILURES_PER_MINUTE requests with a missing or
// wrong key, the address gets 429 RATE_LIMITED with Retry-After on every route that needs a key,
// its valid key included (no key is checked), in the body of the route (GraphQL errors or REST);
// health stays reachable for it; another address is served and counted on its own. (The end of
// the minute is tested with a clock of the test's own: platform/auth's failures test.)
func TestAuthFailuresPerMinute(t *testing.T) {
	const limit = 5
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__FAILURES_PER_MINUTE": strconv.Itoa(limit)})
	query := `{"query":"{ records_count { count } }"}`
	wrong := map[string]string{svc.Header: servicetest.RandomKey()}
	good := map[string]string{svc.Header: svc.Key}
	guesser, other := "127.0.0.4", "127.0.0.5"

	// limit failures: missing and wrong keys, on GraphQL and on the export.
	for i := range limit {
		var resp *http.Response
		var body []byte
		switch i % 3 {
		case 0:
			resp, body = requestFrom(t, svc, guesser, http.MethodPost, "/graphql", nil, query)
		case 1:
			resp, body = requestFrom(t, svc, guesser, http.MethodPost, "/graphql", wrong, query)
		default:
			resp, body = requestFrom(t, svc, guesser, http.MethodGet, exportPath+"?start_date=2024-01-01&end_date=2024-01-31",
				map[string]string{svc.Header: wrong[svc.Header], "SERVICE-X-API-KEY": wrong[svc.Header]}, "")
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d, want 401: %s", i+1, resp.StatusCode, body)
		}
	}
	// Past it: 429 for every request of that address, with a valid key too.
	retryAfter := func(resp *http.Response) {
		t.Helper()
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
			t.Errorf("Retry-After %q, want 1 to 60 s", resp.Header.Get("Retry-After"))
		}
	}
	for _, h := range []map[string]string{wrong, good, nil} {
		resp, body := requestFrom(t, svc, guesser, http.MethodPost, "/graphql", h, query)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"RATE_LIMITED"`) || !strings.Contains(string(body), `"errors"`) {
			t.Errorf("past the limit on /graphql: status %d: %s; want 429 with a GraphQL RATE_LIMITED error", resp.StatusCode, body)
		}
		if !strings.Contains(string(body), "AUTHENTICATION__FAILURES_PER_MINUTE") {
			t.Errorf("the refusal does not name the setting: %s", body)
		}
		retryAfter(resp)
	}
	resp, body := requestFrom(t, svc, guesser, http.MethodGet, exportPath+"?start_date=2024-01-01&end_date=2024-01-31", exportHeaders(svc), "")
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `{"error":{"code":"RATE_LIMITED"`) {
		t.Errorf("past the limit on the export, with the valid key: status %d: %s; want 429 with the REST body", resp.StatusCode, body)
	}
	retryAfter(resp)
	// Health stays reachable (a readiness probe may share the address).
	if resp, body := requestFrom(t, svc, guesser, http.MethodGet, "/v1/healthz", nil, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("healthz from the refused address: status %d: %s", resp.StatusCode, body)
	}
	// Another address is served, and counted on its own.
	resp, body = requestFrom(t, svc, other, http.MethodPost, "/graphql", good, query)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), fmt.Sprintf(`"count":%d`, want)) {
		t.Errorf("another address with the key: status %d: %s; want 200 with count %d", resp.StatusCode, body, want)
	}
	if resp, body := requestFrom(t, svc, other, http.MethodPost, "/graphql", wrong, query); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another address with a wrong key: status %d: %s; want 401", resp.StatusCode, body)
	}
	servicetest.WaitFor(t, 5*time.Second, "the refusal warning", func() bool {
		return strings.Contains(svc.Output(), "AUTHENTICATION__FAILURES_PER_MINUTE")
	})
	// The access lines name each request's client (client_address); the throttle's warning,
	// written once for many addresses, names none, and no line has the wrong key.
	for _, line := range strings.Split(svc.Output(), "\n") {
		if strings.Contains(line, "AUTHENTICATION__FAILURES_PER_MINUTE") && strings.Contains(line, guesser) {
			t.Errorf("the throttle's warning names the refused address: %s", line)
		}
	}
	if strings.Contains(svc.Output(), wrong[svc.Header]) {
		t.Error("the log has the wrong key")
	}
}

// distinctPorts returns n free ports, no two the same: FreePort's port was free a moment ago and
// nothing holds it, so two calls can return the same one (the service then refused to start
// with its scrape port on its API port).
func distinctPorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	for len(out) < n {
		p := servicetest.FreePort(t)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// prometheusEnv serves the service's metrics on a port of the test's, and its API on another;
// it returns the settings, the scrape target and the ports taken.
func prometheusEnv(t *testing.T, more int) (map[string]string, string, []int) {
	ports := distinctPorts(t, 2+more)
	return map[string]string{
		"APP__PORT":                     strconv.Itoa(ports[1]),
		"OTEL_METRICS_EXPORTER":         "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(ports[0]),
	}, "127.0.0.1:" + strconv.Itoa(ports[0]), ports[2:]
}

// TestHealthzSharedCheck: 200 callers asking for health all at once, again and again, cost at
// most one database check per second (counted by the service's own statement metric); without a
// valid key the hosts are shown by position only, with one by address, as before.
func TestHealthzSharedCheck(t *testing.T) {
	const callers = 200
	db := servicetest.FixtureDB(t)
	env, target, more := prometheusEnv(t, 1)
	dead := more[0]
	env["DATABASE__HOST"] = db.Host + ",localhost"
	env["DATABASE__PORT"] = fmt.Sprintf("%d,%d", db.Port, dead)
	// Go's HTTP client dials beyond its 200 connections in use now and then (a dial races a
	// connection coming back); those are no matter here.
	env["APP__MAX_CONNECTIONS_PER_CLIENT"] = "0"
	svc := servicetest.Start(t, db, env)
	addresses := []string{net.JoinHostPort(db.Host, strconv.Itoa(db.Port)), net.JoinHostPort("localhost", strconv.Itoa(dead))}

	wantHosts := func(who string, body []byte, want map[string]string) {
		t.Helper()
		m := decodeJSON(t, body)
		got, _ := m["hosts"].(map[string]any)
		if len(got) != len(want) {
			t.Fatalf("%s: hosts %v, want %v", who, m["hosts"], want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: hosts %v, want %v", who, m["hosts"], want)
			}
		}
	}
	byPosition := map[string]string{"1": "ok", "2": "unreachable"}
	resp, body := svc.Get(t, "/v1/healthz", map[string]string{svc.Header: svc.Key})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz with the key: %d %s", resp.StatusCode, body)
	}
	wantHosts("with the key", body, map[string]string{addresses[0]: "ok", addresses[1]: "unreachable"})
	for who, h := range map[string]map[string]string{"without a key": nil, "with a wrong key": {svc.Header: servicetest.RandomKey()}} {
		resp, body := svc.Get(t, "/v1/healthz", h)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz %s: %d %s", who, resp.StatusCode, body)
		}
		wantHosts(who, body, byPosition)
		for _, a := range append(addresses, strconv.Itoa(db.Port), strconv.Itoa(dead), "localhost") {
			if strings.Contains(string(body), a) {
				t.Errorf("healthz %s shows %q: %s", who, a, body)
			}
		}
	}

	// The callers, each on a connection of its own, for about 2.5 s.
	before := scrapeOperations(t, target)
	start := time.Now()
	transport := &http.Transport{MaxIdleConnsPerHost: callers}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	var answered, failed atomic.Int64
	for range callers {
		wg.Go(func() {
			for time.Since(start) < 2500*time.Millisecond {
				resp, err := client.Get(svc.URL + "/v1/healthz")
				if err != nil {
					failed.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"1":"ok"`) {
					failed.Add(1)
					continue
				}
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	checks := scrapeOperations(t, target).minus(before)["ping"]
	t.Logf("%d healthz answers to %d callers in %s: %d database checks", answered.Load(), callers, elapsed.Round(time.Millisecond), checks)
	if failed.Load() > 0 {
		t.Errorf("%d healthz requests failed", failed.Load())
	}
	if answered.Load() < callers {
		t.Errorf("%d answers for %d callers", answered.Load(), callers)
	}
	if most := uint64(elapsed/time.Second) + 1; checks < 1 || checks > most {
		t.Errorf("%d database checks in %s, want 1 to %d (at most one a second)", checks, elapsed, most)
	}
}

// scrapeValue is the sum of a metric's samples (a counter's), 0 when the service has none yet.
func scrapeValue(t *testing.T, target, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("scrape %s: %q", name, line)
		}
		sum += v
	}
	return sum
}

// TestKeysFileReloadFailure: a keys file that does not parse, read again on SIGHUP, is counted in
// emsquery.auth.keys.reload.failures and shown in healthz (why, to a key holder only); the keys in force
// stay; a good file again clears healthz.
func TestKeysFileReloadFailure(t *testing.T) {
	db := servicetest.FixtureDB(t)
	good := newTestKey("good", "graphql")
	file := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, file, good)
	env, target, _ := prometheusEnv(t, 0)
	env["AUTHENTICATION__API_KEYS_FILE"] = file
	env["AUTHENTICATION__API_KEY"] = ""
	env["AUTHENTICATION__API_KEYS_POLL_INTERVAL"] = "0" // SIGHUP only
	svc := servicetest.Start(t, db, env)
	const metric = "emsquery_auth_keys_reload_failures_total"
	keysFile := func(h map[string]string) string {
		t.Helper()
		resp, body := svc.Get(t, "/v1/healthz", h)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %d %s", resp.StatusCode, body)
		}
		s, _ := decodeJSON(t, body)["keys_file"].(string)
		return s
	}
	withKey := map[string]string{svc.Header: good.secret}
	if s := keysFile(nil); s != "ok" {
		t.Errorf("keys_file %q at start, want ok", s)
	}
	if v := scrapeValue(t, target, metric); v != 0 {
		t.Errorf("%s = %v at start", metric, v)
	}

	writeFileAtomic(t, file, []byte(`[{"name": "good", "sha256": "`+good.entry.SHA256+`", "scopes": ["graphql"]`))
	svc.Signal(syscall.SIGHUP)
	servicetest.WaitFor(t, 5*time.Second, "the reload failure counted", func() bool { return scrapeValue(t, target, metric) == 1 })
	anon, holder := keysFile(nil), keysFile(withKey)
	if !strings.HasPrefix(anon, "reload failed at ") || strings.Contains(anon, "valid") || strings.Contains(anon, file) {
		t.Errorf("keys_file without a key %q, want the time only", anon)
	}
	when, err := time.Parse(time.RFC3339, strings.TrimPrefix(anon, "reload failed at "))
	if err != nil || time.Since(when) > time.Minute || time.Since(when) < -time.Second {
		t.Errorf("keys_file without a key %q: not a time of the last minute", anon)
	}
	if !strings.HasPrefix(holder, anon+": not valid") || !strings.Contains(holder, "ends too early") || strings.Contains(holder, good.entry.SHA256) {
		t.Errorf("keys_file with the key %q, want %q and why, without the hash", holder, anon+": not valid: ...")
	}
	resp, body := keyRequest(t, svc, "/graphql", good.secret)
	wantAllowed(t, "the key in force after a failed reload", "/graphql", resp, body)

	writeKeysFile(t, file, good)
	svc.Signal(syscall.SIGHUP)
	servicetest.WaitFor(t, 5*time.Second, "keys_file ok after a good reload", func() bool { return keysFile(nil) == "ok" })
	if v := scrapeValue(t, target, metric); v != 1 {
		t.Errorf("%s = %v after one failure and a good reload, want 1", metric, v)
	}
}

// TestTrustedProxies: behind a trusted proxy (APP__TRUSTED_PROXIES) the failed-key throttle
// counts the client the proxy names, not the proxy, so one guesser behind an ingress does not
// lock out everyone behind it; from any other peer the forwarding headers are ignored, so a
// client cannot pick the address it is counted as. The access line names the client.
func TestTrustedProxies(t *testing.T) {
	const limit = 3
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{
		"AUTHENTICATION__FAILURES_PER_MINUTE": strconv.Itoa(limit),
		"APP__TRUSTED_PROXIES":                `["127.0.0.6", "10.0.0.0/8"]`,
	})
	query := `{"query":"{ records_count { count } }"}`
	wrong := func(forwarded map[string]string) map[string]string {
		h := map[string]string{svc.Header: servicetest.RandomKey()}
		for k, v := range forwarded {
			h[k] = v
		}
		return h
	}
	good := func(forwarded map[string]string) map[string]string {
		h := map[string]string{svc.Header: svc.Key}
		for k, v := range forwarded {
			h[k] = v
		}
		return h
	}
	const proxy, stranger = "127.0.0.6", "127.0.0.7"
	guesser := map[string]string{"X-Forwarded-For": "192.0.2.66, 10.1.1.1"} // through two proxies
	for i := range limit {
		if resp, body := requestFrom(t, svc, proxy, http.MethodPost, "/graphql", wrong(guesser), query); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the guesser's failure %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if resp, _ := requestFrom(t, svc, proxy, http.MethodPost, "/graphql", good(guesser), query); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the guesser past the limit: %d, want 429", resp.StatusCode)
	}
	// Another client behind the same proxy, named by X-Forwarded-For or Forwarded, is served.
	for _, h := range []map[string]string{
		{"X-Forwarded-For": "192.0.2.77"},
		{"Forwarded": `for="192.0.2.78:4711";proto=http`},
		{"X-Forwarded-For": "192.0.2.66, 192.0.2.79"}, // the guesser's claim to the left is not believed
	} {
		if resp, body := requestFrom(t, svc, proxy, http.MethodPost, "/graphql", good(h), query); resp.StatusCode != http.StatusOK {
			t.Errorf("another client behind the proxy %v: %d %s", h, resp.StatusCode, body)
		}
	}
	// From a peer that is not trusted, the headers are ignored: its own address is counted,
	// whatever client it claims to forward for.
	for i := range limit {
		claim := map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i+1)}
		if resp, body := requestFrom(t, svc, stranger, http.MethodPost, "/graphql", wrong(claim), query); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the stranger's failure %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if resp, _ := requestFrom(t, svc, stranger, http.MethodPost, "/graphql", good(map[string]string{"X-Forwarded-For": "198.51.100.99"}), query); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the stranger past the limit with a new claimed address: %d, want 429", resp.StatusCode)
	}
	servicetest.WaitFor(t, 5*time.Second, "access lines naming the clients", func() bool {
		out := svc.Output()
		return strings.Contains(out, "client_address=192.0.2.77") && strings.Contains(out, "client_address=192.0.2.78") &&
			strings.Contains(out, "client_address=127.0.0.7") && !strings.Contains(out, "client_address=198.51.100.")
	})
}
