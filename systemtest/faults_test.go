package systemtest

// Faults and limits over HTTP, against the real binary and real PostgreSQL clusters: the database
// stopped and started under load, the service started before its database, statement, request
// and export timeouts, clients that hang up, and SIGTERM under load. Every load here is bounded
// in count and time and goes to the loopback interface only.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// outcome is one request of a load.
type outcome struct {
	start, end time.Time
	status     int    // 0: no response (err)
	code       string // errors[0].extensions.code; "" for a clean answer
	count      int64  // data.records_count.count of a clean answer
	err        error  // transport error: no response at all
	reused     bool   // sent on a kept-alive connection
	closing    bool   // the response said Connection: close
}

func (o outcome) took() time.Duration { return o.end.Sub(o.start) }

// loadRun sends records_count from a few workers, each at most perWorker requests and for at
// most maxTime, until stop is called.
type loadRun struct {
	mu       sync.Mutex
	outcomes []outcome
	done     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

func startLoad(svc *servicetest.Service, workers, perWorker int, maxTime, pause time.Duration) *loadRun {
	l := &loadRun{done: make(chan struct{})}
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true},
	}
	body, _ := json.Marshal(map[string]any{"query": recordsCountQuery})
	until := time.Now().Add(maxTime)
	for range workers {
		l.wg.Go(func() {
			for i := 0; i < perWorker && time.Now().Before(until); i++ {
				select {
				case <-l.done:
					return
				default:
				}
				o := send(client, svc, body)
				l.mu.Lock()
				l.outcomes = append(l.outcomes, o)
				l.mu.Unlock()
				time.Sleep(pause)
			}
		})
	}
	return l
}

func send(client *http.Client, svc *servicetest.Service, body []byte) outcome {
	var o outcome
	req, _ := http.NewRequest(http.MethodPost, svc.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(svc.Header, svc.Key)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { o.reused = info.Reused },
	}))
	o.start = time.Now()
	resp, err := client.Do(req)
	if err != nil {
		o.end, o.err = time.Now(), err
		return o
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	o.end, o.status, o.closing = time.Now(), resp.StatusCode, resp.Close
	if err != nil {
		o.err = err
		return o
	}
	var r struct {
		Data struct {
			RecordsCount *struct {
				Count int64 `json:"count"`
			} `json:"records_count"`
		} `json:"data"`
		Errors []servicetest.GraphQLError `json:"errors"`
	}
	switch {
	case json.Unmarshal(raw, &r) != nil:
		o.code = "NOT_JSON: " + string(raw)
	case len(r.Errors) > 0:
		o.code = r.Errors[0].Code()
	case r.Data.RecordsCount == nil:
		o.code = "NO_DATA: " + string(raw)
	default:
		o.count = r.Data.RecordsCount.Count
	}
	return o
}

// stop ends the load and returns every outcome, in no particular order.
func (l *loadRun) stop() []outcome {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]outcome(nil), l.outcomes...)
}

func (l *loadRun) snapshot() []outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]outcome(nil), l.outcomes...)
}

// TestDatabaseRestartUnderLoad stops the database under a steady load and starts it again. While
// it is down every request fails with SERVICE_UNAVAILABLE at once (DATABASE__POOL_TIMEOUT is the
// default 30 s: nobody waits for it), healthz says 503, and the service neither crashes nor
// drops a connection; after the restart requests succeed again within a few seconds, without
// restarting the service.
func TestDatabaseRestartUnderLoad(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{})
	db := servicetest.FixtureDBOn(t, c)
	want := expectedCount(t, db)
	// The same question again and again: without answers from memory, each reaches the database.
	svc := servicetest.Start(t, db, map[string]string{"DATABASE__POOL_SIZE": "4", "CACHE__ENABLED": "false"})

	load := startLoad(svc, 4, 2000, 40*time.Second, 10*time.Millisecond)
	time.Sleep(time.Second)
	stopping := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	time.Sleep(200 * time.Millisecond)

	// With the database down: one request, healthz, ping.
	start := time.Now()
	r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	if d := time.Since(start); d > time.Second {
		t.Errorf("a request with the database down answered after %s, want < 1s", d)
	}
	if len(r.Errors) == 0 || r.Errors[0].Code() != "SERVICE_UNAVAILABLE" {
		t.Errorf("with the database down: want SERVICE_UNAVAILABLE, got %s", r.Raw)
	}
	start = time.Now()
	wantJSON(t, svc, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	if d := time.Since(start); d > time.Second {
		t.Errorf("healthz with the database down answered after %s", d)
	}
	wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
	time.Sleep(2 * time.Second)

	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	var back time.Time // the first success of the load after the restart
	for back.IsZero() {
		for _, o := range load.snapshot() {
			if o.start.After(restarted) && o.err == nil && o.code == "" && (back.IsZero() || o.end.Before(back)) {
				back = o.end
			}
		}
		if time.Since(restarted) > 10*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	outcomes := load.stop()

	if back.IsZero() {
		t.Fatal("no request succeeded within 10s after the database came back")
	}
	t.Logf("%d requests; database stopped in %s; first success %s after the restart",
		len(outcomes), stopped.Sub(stopping).Round(time.Millisecond), back.Sub(restarted).Round(time.Millisecond))
	if d := back.Sub(restarted); d > 5*time.Second {
		t.Errorf("first success %s after the database came back, want within 5s", d)
	}
	var before, during, after, slowest time.Duration
	var failed, okBefore, okAfter int
	for _, o := range outcomes {
		slowest = max(slowest, o.took())
		switch {
		case o.err != nil:
			t.Errorf("request at +%s: no answer: %v", o.start.Sub(stopping).Round(time.Millisecond), o.err)
		case o.status != http.StatusOK:
			t.Errorf("request at +%s: status %d (%s)", o.start.Sub(stopping).Round(time.Millisecond), o.status, o.code)
		case o.code != "":
			failed++
			if o.code != "SERVICE_UNAVAILABLE" {
				t.Errorf("request at +%s failed with %s, want SERVICE_UNAVAILABLE", o.start.Sub(stopping).Round(time.Millisecond), o.code)
			}
			if o.end.Before(stopping) || o.start.After(back.Add(time.Second)) {
				t.Errorf("request at +%s failed outside the outage", o.start.Sub(stopping).Round(time.Millisecond))
			}
			during = max(during, o.took())
		case o.count != want:
			t.Errorf("records_count = %d, want %d", o.count, want)
		case o.end.Before(stopping):
			okBefore++
			before = max(before, o.took())
		default:
			okAfter++
			after = max(after, o.took())
		}
	}
	t.Logf("answers: %d before the stop, %d failed (SERVICE_UNAVAILABLE, slowest %s), %d after; slowest of all %s",
		okBefore, failed, during.Round(time.Millisecond), okAfter, slowest.Round(time.Millisecond))
	if slowest > 3*time.Second {
		t.Errorf("the slowest request took %s, want none hanging over 3s", slowest)
	}
	if okBefore == 0 || failed == 0 || okAfter == 0 {
		t.Errorf("the load missed a phase: %d ok before, %d failed, %d ok after", okBefore, failed, okAfter)
	}
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	if n := strings.Count(svc.Output(), "msg=listening"); n != 1 {
		t.Errorf("the service started %d times, want once", n)
	}
	servicetest.WaitFor(t, 5*time.Second, "recovery logged", func() bool { return strings.Contains(svc.Output(), "database reachable again") })
	if !strings.Contains(svc.Output(), "database unreachable") || !strings.Contains(svc.Output(), "database reachable again") {
		t.Errorf("the outage and the recovery are not logged:\n%s", svc.Output())
	}
}

// TestStartWithDatabaseDown: the service starts while its database is down, says so on healthz,
// and serves as soon as the database comes, without a restart.
func TestStartWithDatabaseDown(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{})
	db := servicetest.FixtureDBOn(t, c)
	want := expectedCount(t, db)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Start(t, db, nil)
	wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
	start := time.Now()
	wantJSON(t, svc, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("healthz took %s", d)
	}
	for range 3 {
		start = time.Now()
		r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
		if len(r.Errors) == 0 || r.Errors[0].Code() != "SERVICE_UNAVAILABLE" {
			t.Errorf("want SERVICE_UNAVAILABLE, got %s", r.Raw)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("a request with the database down answered after %s, want < 1s", d)
		}
	}

	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	waitHealthy(t, svc, 5*time.Second)
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
		t.Errorf("records_count = %d, want %d", got, want)
	}
	t.Logf("serving %s after the database came", time.Since(started).Round(time.Millisecond))
}

// wantTimeout checks a GraphQL TIMEOUT whose message has setting (NAME=value) and that came after
// about limit.
func wantTimeout(t *testing.T, r *servicetest.GraphQLResponse, took time.Duration, setting string, limit time.Duration) {
	t.Helper()
	if len(r.Errors) == 0 || r.Errors[0].Code() != "TIMEOUT" {
		t.Fatalf("want TIMEOUT, got %d %s", r.Status, r.Raw)
	}
	if !strings.Contains(r.Errors[0].Message, setting) {
		t.Errorf("message %q does not name %s", r.Errors[0].Message, setting)
	}
	if took < limit*8/10 || took > limit+2*time.Second {
		t.Errorf("TIMEOUT after %s, want about %s (%s)", took, limit, setting)
	}
}

// waitNoLockWaiters waits at most within until no session of the service waits for a lock: its
// query was cancelled on the server, while the test still holds the lock.
func waitNoLockWaiters(t *testing.T, db servicetest.DB, within time.Duration) time.Duration {
	t.Helper()
	pool := db.Pool(t)
	start := time.Now()
	for {
		waiting := lockWaiters(t, pool, db.Name)
		if waiting == 0 {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%d service sessions still wait for the lock %s later: the query was not cancelled", waiting, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getExport sends the CSV export of 2024 with the keys and returns the status and body.
func getExport(svc *servicetest.Service) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, svc.URL+"/v1/reports/main-report/export?start_date=2024-01-01&end_date=2024-12-31", nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set(svc.Header, svc.Key)
	req.Header.Set("SERVICE-X-API-KEY", svc.Key)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// TestStatementTimeoutOverHTTP: a query held up longer than LIMITS__STATEMENT_TIMEOUT (here by a
// lock; lock waits count) fails with TIMEOUT naming the setting; the CSV export runs under
// LIMITS__EXPORT_TIMEOUT instead, and past that fails with a 504 naming it.
func TestStatementTimeoutOverHTTP(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"LIMITS__STATEMENT_TIMEOUT": "1"})
	release := lockFactRecord(t, db)
	start := time.Now()
	r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	wantTimeout(t, r, time.Since(start), "LIMITS__STATEMENT_TIMEOUT=1s", time.Second)

	// The export waits for the lock longer than the statement timeout, and succeeds.
	exported := make(chan result, 1)
	go func() {
		status, body, err := getExport(svc)
		exported <- result{status, body, err}
	}()
	waitForLockWaiters(t, db, 1)
	time.Sleep(1500 * time.Millisecond)
	release()
	res := <-exported
	if res.err != nil || res.status != http.StatusOK || !bytes.HasPrefix(res.body, []byte("record_id,")) {
		t.Errorf("export held up 1.5s with LIMITS__STATEMENT_TIMEOUT=1: %d %v %.200s", res.status, res.err, res.body)
	}
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
		t.Errorf("records_count = %d after the timeout, want %d", got, want)
	}

	short := servicetest.Start(t, db, map[string]string{"LIMITS__EXPORT_TIMEOUT": "1"})
	lockFactRecord(t, db)
	start = time.Now()
	status, body, err := getExport(short)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusGatewayTimeout || !bytes.Contains(body, []byte(`"TIMEOUT"`)) || !bytes.Contains(body, []byte("LIMITS__EXPORT_TIMEOUT=1s")) {
		t.Errorf("export past LIMITS__EXPORT_TIMEOUT: %d %s, want 504 TIMEOUT naming the setting", status, body)
	}
	if took < 800*time.Millisecond || took > 3*time.Second {
		t.Errorf("the export failed after %s, want about 1s", took)
	}
}

// TestRequestTimeoutOverHTTP: a GraphQL request past LIMITS__REQUEST_TIMEOUT fails with TIMEOUT
// naming it, and its query stops on the server.
func TestRequestTimeoutOverHTTP(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{"LIMITS__REQUEST_TIMEOUT": "1"})
	lockFactRecord(t, db)
	start := time.Now()
	r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	wantTimeout(t, r, time.Since(start), "LIMITS__REQUEST_TIMEOUT=1s", time.Second)
	waitNoLockWaiters(t, db, 2*time.Second)
	wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
}

// TestClientGoesAway: a client that closes its connection while its query runs gets the query
// cancelled on the server, for GraphQL and for an export still waiting for its first row. (An
// export that hangs up mid-stream: modules/reports, TestExportClientDisconnectStopsQuery.)
func TestClientGoesAway(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, nil)
	release := lockFactRecord(t, db)

	graphQL, _ := json.Marshal(map[string]any{"query": recordsCountQuery})
	for _, tc := range []struct {
		name    string
		request string
	}{
		{"graphql", "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + svc.Header + ": " + svc.Key +
			fmt.Sprintf("\r\nContent-Length: %d\r\n\r\n", len(graphQL)) + string(graphQL)},
		{"export before its first row", "GET /v1/reports/main-report/export?start_date=2024-01-01&end_date=2024-12-31 HTTP/1.1\r\nHost: x\r\n" +
			svc.Header + ": " + svc.Key + "\r\nSERVICE-X-API-KEY: " + svc.Key + "\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(svc.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(conn, tc.request); err != nil {
				t.Fatal(err)
			}
			waitForLockWaiters(t, db, 1)
			conn.Close()
			d := waitNoLockWaiters(t, db, 2*time.Second)
			t.Logf("query cancelled %s after the client left", d.Round(time.Millisecond))
		})
	}
	release()
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
		t.Errorf("records_count = %d, want %d", got, want)
	}
	// Log lines reach the output a moment after they are logged (platform/logging writes them
	// in the background): wait for the access lines of both requests.
	servicetest.WaitFor(t, 5*time.Second, "two access lines with status 499", func() bool {
		return strings.Count(svc.Output(), "status=499") >= 2
	})
	out := svc.Output()
	if !strings.Contains(out, "the client closed its connection") {
		t.Errorf("the cancellation is not logged:\n%s", out)
	}
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("a client that left is logged as an error:\n%s", out)
	}
	// Access lines say 499 (client closed request), as nginx does.
	if n := strings.Count(out, "status=499"); n != 2 {
		t.Errorf("%d access lines with status 499, want 2:\n%s", n, out)
	}
}

// TestGracefulShutdownUnderLoad: SIGTERM while a steady load has requests in flight (held by a
// lock, so that some surely are). Every request the service accepted is answered 200 with the
// right count, the answers given while stopping say Connection: close, new connections are
// refused, and the process exits 0. What the load could not send after the signal failed
// without a response (connection refused or closed before the request was read): never an
// error status, never an accepted request lost.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	// Without answers from memory, so that every worker's request waits for the lock.
	svc := servicetest.Start(t, db, map[string]string{"DATABASE__POOL_SIZE": "4", "CACHE__ENABLED": "false"})
	load := startLoad(svc, 4, 1000, 20*time.Second, 5*time.Millisecond)
	time.Sleep(time.Second)
	release := lockFactRecord(t, db)
	waitForLockWaiters(t, db, 4) // every worker has a request in flight
	svc.Signal(syscall.SIGTERM)
	signalled := time.Now()
	time.Sleep(300 * time.Millisecond)
	release()
	code, err := svc.Wait(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	time.Sleep(100 * time.Millisecond)
	outcomes := load.stop()

	var answered, inFlight, refused int
	for _, o := range outcomes {
		switch {
		case o.err != nil:
			if o.start.Before(signalled) {
				t.Errorf("request sent %s before SIGTERM got no answer: %v", signalled.Sub(o.start), o.err)
			}
			if !errors.Is(o.err, syscall.ECONNREFUSED) && !errors.Is(o.err, syscall.ECONNRESET) && !errors.Is(o.err, io.EOF) {
				t.Errorf("request after SIGTERM: %v, want connection refused or closed", o.err)
			}
			refused++
		case o.status != http.StatusOK || o.code != "" || o.count != want:
			t.Errorf("request at %s: status %d code %q count %d, want 200 and %d", o.start.Sub(signalled), o.status, o.code, o.count, want)
		default:
			answered++
			if o.end.After(signalled) {
				inFlight++
				if !o.closing {
					t.Errorf("an answer sent while stopping does not say Connection: close")
				}
			}
		}
	}
	t.Logf("%d answered (%d of them after SIGTERM), %d not sent after SIGTERM", answered, inFlight, refused)
	if inFlight < 4 {
		t.Errorf("%d requests answered after SIGTERM, want the 4 in flight", inFlight)
	}
	// The service's own account: every request it logged got 200, as many as the clients got.
	logged := 0
	sc := bufio.NewScanner(strings.NewReader(svc.Output()))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "msg=request") && strings.Contains(line, "path=/graphql") {
			logged++
			if !strings.Contains(line, "status=200") {
				t.Errorf("access line: %s", line)
			}
		}
	}
	if logged != answered {
		t.Errorf("the service logged %d GraphQL requests, the clients got %d answers", logged, answered)
	}
}
