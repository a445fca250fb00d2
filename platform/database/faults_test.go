package database

// Limits and faults against a real PostgreSQL: statement and export timeouts, cancellation,
// and failing fast while the database cannot be reached.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// settings are the pool's options and timeouts, as the service passes them to Open.
type settings struct {
	Database Options
	Limits   Timeouts
}

// testConfig is the service's settings for a database on host:port, with the defaults of the
// settings the tests do not care about.
func testConfig(host string, port int, name, password string) *settings {
	return &settings{
		Database: Options{
			Hosts: []string{host}, Ports: []int{port}, Name: name, Username: "postgres", Password: password,
			Schema: "public", PoolSize: 1, MaxOverflow: 0,
			PoolTimeout: 30 * time.Second, PoolRecycle: 30 * time.Minute,
		},
		Limits: Timeouts{
			StatementTimeout: 30 * time.Second,
			ExportTimeout:    600 * time.Second,
		},
	}
}

// open opens the service's pool with cfg and closes it at cleanup.
func open(t *testing.T, cfg *settings) (*DB, *servicetest.Buffer) {
	t.Helper()
	logs := &servicetest.Buffer{}
	db, cleanup, err := Open(cfg.Database, cfg.Limits, slog.New(slog.NewTextHandler(logs, nil)), noop.NewMeterProvider(), tracenoop.NewTracerProvider())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return db, logs
}

// clusterConfig is testConfig for a fresh database of the shared cluster.
func clusterConfig(t *testing.T) (*settings, *pgtest.Cluster, string) {
	t.Helper()
	c := pgtest.Shared(t)
	name := pgtest.NewDatabase(t, c)
	return testConfig(c.Host(), c.Port(), name, c.Password()), c, name
}

// wantAPIError checks err's client code and that its message names want.
func wantAPIError(t *testing.T, err error, code apierr.Code, want string) {
	t.Helper()
	var ae *apierr.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is no apierr.Error, want %s", err, code)
	}
	if ae.Code != code || !strings.Contains(ae.Message, want) {
		t.Errorf("got %s %q, want %s naming %s", ae.Code, ae.Message, code, want)
	}
}

func show(t *testing.T, db *DB, setting string) string {
	t.Helper()
	rows, err := Collect(context.Background(), db, "show", "SHOW "+setting, nil, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return rows[0]
}

func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	cfg, _, _ := clusterConfig(t)
	cfg.Limits.StatementTimeout = 500 * time.Millisecond
	db, _ := open(t, cfg)
	if got := show(t, db, "statement_timeout"); got != "500ms" {
		t.Errorf("statement_timeout = %q, want 500ms (LIMITS__STATEMENT_TIMEOUT)", got)
	}
	start := time.Now()
	_, err := Collect(context.Background(), db, "sleep", "SELECT pg_sleep(5)::text", nil, pgx.RowTo[string])
	d := time.Since(start)
	wantAPIError(t, err, apierr.Timeout, "LIMITS__STATEMENT_TIMEOUT=0.5s")
	if d < 400*time.Millisecond || d > 3*time.Second {
		t.Errorf("the slow query failed after %s, want about 500ms", d)
	}
	// The connection is still good for the next query.
	if got := show(t, db, "statement_timeout"); got != "500ms" {
		t.Errorf("statement_timeout = %q after a timeout", got)
	}
}

// A query whose request ended (client gone, request timeout) fails with the request's reason,
// never as a statement timeout, although PostgreSQL reports a cancel and a timeout alike; and it
// really stops on the server.
func TestCancelledQuery(t *testing.T) {
	t.Parallel()
	cfg, c, name := clusterConfig(t)
	db, _ := open(t, cfg)

	t.Run("client gone", func(t *testing.T) {
		gone := fmt.Errorf("the client closed its connection: %w", context.Canceled)
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(300*time.Millisecond, func() { cancel(gone) })
		start := time.Now()
		_, err := Collect(ctx, db, "sleep", "SELECT pg_sleep(30)::text", nil, pgx.RowTo[string])
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the cancelled query returned after %s", d)
		}
		var ae *apierr.Error
		if errors.As(err, &ae) {
			t.Errorf("a cancelled query is %s %q, want no client code", ae.Code, ae.Message)
		}
		if !errors.Is(err, gone) || !errors.Is(err, context.Canceled) {
			t.Errorf("error %v does not carry the cancel's cause", err)
		}
		waitNoActiveQuery(t, c, name, "pg_sleep")
	})
	t.Run("request timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := Collect(ctx, db, "sleep", "SELECT pg_sleep(30)::text", nil, pgx.RowTo[string])
		wantAPIError(t, err, apierr.Timeout, "LIMITS__REQUEST_TIMEOUT")
		waitNoActiveQuery(t, c, name, "pg_sleep")
	})
	// The pool replaced the connections it closed to cancel.
	if got := show(t, db, "application_name"); got != "emsquery" {
		t.Errorf("application_name = %q", got)
	}
}

// waitNoActiveQuery waits at most 2 s until no session of database name runs a query containing
// text (other than this check).
func waitNoActiveQuery(t *testing.T, c *pgtest.Cluster, name, text string) {
	t.Helper()
	cc, err := c.ConnConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(2 * time.Second)
	for {
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid() AND query LIKE '%' || $2 || '%'`, name, text).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d queries with %q still active on the server 2s after the cancel", n, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

var errWriterFailed = errors.New("client went away")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, errWriterFailed
	}
	w.n -= len(p)
	return len(p), nil
}

// The export's COPY runs with LIMITS__EXPORT_TIMEOUT, and the connection goes back to the pool
// with LIMITS__STATEMENT_TIMEOUT whether the COPY succeeded, timed out or lost its client.
func TestCopyToUsesTheExportTimeout(t *testing.T) {
	t.Parallel()
	cfg, c, name := clusterConfig(t)
	cfg.Limits.StatementTimeout = 300 * time.Millisecond
	cfg.Limits.ExportTimeout = 5 * time.Second
	db, _ := open(t, cfg) // one connection: every step below uses the same session
	ctx := context.Background()
	copyOnce := func(w io.Writer, q string) (int64, error) {
		tag, err := db.CopyTo(ctx, "export", w, q)
		return tag.RowsAffected(), err
	}

	// Longer than the statement timeout, shorter than the export's.
	var out bytes.Buffer
	n, err := copyOnce(&out, "COPY (SELECT g, pg_sleep(0.2) FROM generate_series(1, 4) g) TO STDOUT")
	if err != nil || n != 4 {
		t.Fatalf("slow COPY: %d rows, %v; want 4 rows under LIMITS__EXPORT_TIMEOUT", n, err)
	}
	if got := show(t, db, "statement_timeout"); got != "300ms" {
		t.Errorf("statement_timeout = %q after an export, want 300ms", got)
	}

	// A client that goes away: the writer's error comes back as it is, and the query stops.
	// (Rows of 2 kB: the server sends COPY data in 8 kB chunks.)
	_, err = copyOnce(&failingWriter{n: 10000}, "COPY (SELECT g, repeat('x', 2000), pg_sleep(0.01) FROM generate_series(1, 100000) g) TO STDOUT")
	if !errors.Is(err, errWriterFailed) {
		t.Errorf("COPY into a failing writer: %v, want the writer's error", err)
	}
	waitNoActiveQuery(t, c, name, "generate_series(1, 100000)")
	if got := show(t, db, "statement_timeout"); got != "300ms" {
		t.Errorf("statement_timeout = %q after a failed export, want 300ms", got)
	}

	// An export past LIMITS__EXPORT_TIMEOUT: TIMEOUT naming it.
	short := *cfg
	short.Limits.StatementTimeout = 10 * time.Second
	short.Limits.ExportTimeout = 300 * time.Millisecond
	db2, _ := open(t, &short)
	start := time.Now()
	_, err = db2.CopyTo(ctx, "export", io.Discard, "COPY (SELECT pg_sleep(5)) TO STDOUT")
	wantAPIError(t, err, apierr.Timeout, "LIMITS__EXPORT_TIMEOUT=0.3s")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the export timed out after %s, want about 300ms", d)
	}
	if got := show(t, db2, "statement_timeout"); got != "10s" {
		t.Errorf("statement_timeout = %q after an export timeout, want 10s", got)
	}
}

// switchProxy forwards TCP connections to target, or, while black-holed, accepts them and never
// answers: a database host that hangs.
type switchProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	hole   bool
	conns  []net.Conn
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{ln: ln, target: target}
	t.Cleanup(p.close)
	go p.serve()
	return p
}

func (p *switchProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// setHole switches between hanging and forwarding. Either way the connections open so far end,
// as they do when a host hangs (its TCP peers give up) or comes back (it resets what it no
// longer knows).
func (p *switchProxy) setHole(hole bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hole = hole
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *switchProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		hole := p.hole
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if hole {
			continue // accepted, never answered
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

func (p *switchProxy) close() {
	p.ln.Close()
	p.setHole(true)
}

// While the database host hangs, only the first request waits (for DATABASE__POOL_TIMEOUT); the
// next ones fail at once with SERVICE_UNAVAILABLE. When it answers again, requests succeed
// within a few seconds without anything being restarted.
func TestFailFastWhileUnreachable(t *testing.T) {
	t.Parallel()
	cfg, c, _ := clusterConfig(t)
	proxy := newSwitchProxy(t, net.JoinHostPort(c.Host(), fmt.Sprint(c.Port())))
	cfg.Database.Ports = []int{proxy.port()}
	cfg.Database.PoolTimeout = 2 * time.Second
	db, logs := open(t, cfg)
	ctx := context.Background()
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}

	proxy.setHole(true)
	time.Sleep(1100 * time.Millisecond) // the idle connection is checked before use after 1 s
	start := time.Now()
	err := db.Ping(ctx)
	wantAPIError(t, err, apierr.ServiceUnavailable, "unavailable")
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("first request with the host hanging failed after %s, want about DATABASE__POOL_TIMEOUT (2s)", d)
	}
	// The probe's own attempt to connect hangs too, and after probeTimeout the database counts
	// as down.
	deadline := time.Now().Add(probeTimeout + 2*time.Second)
	for !db.reach.down.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the database does not count as down although it does not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 5 {
		start := time.Now()
		err := db.Ping(ctx)
		wantAPIError(t, err, apierr.ServiceUnavailable, "unavailable")
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("request %d while the database is known down failed after %s, want at once", i+2, d)
		}
	}
	if !strings.Contains(logs.String(), "database unreachable") {
		t.Errorf("no log line about the outage:\n%s", logs)
	}

	proxy.setHole(false)
	start = time.Now()
	for {
		err := db.Ping(ctx)
		if err == nil {
			break
		}
		wantAPIError(t, err, apierr.ServiceUnavailable, "unavailable")
		if time.Since(start) > 8*time.Second {
			t.Fatalf("still failing 8s after the database came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("requests succeed %s after the database came back", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(logs.String(), "database reachable again") {
		t.Errorf("no log line about the recovery:\n%s", logs)
	}
}

// A pool that is merely busy is no outage: requests keep waiting for a connection.
func TestBusyPoolIsNotAnOutage(t *testing.T) {
	t.Parallel()
	cfg, _, _ := clusterConfig(t)
	cfg.Database.PoolTimeout = 300 * time.Millisecond
	db, _ := open(t, cfg)
	ctx := context.Background()
	conn, err := db.acquire(ctx) // the only connection
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		start := time.Now()
		_, err := db.acquire(ctx)
		wantAPIError(t, err, apierr.ServiceUnavailable, "unavailable")
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Errorf("acquire on a busy pool failed after %s, want DATABASE__POOL_TIMEOUT", d)
		}
	}
	// Each timeout started a probe, which found the database answering.
	time.Sleep(500 * time.Millisecond)
	if db.reach.down.Load() {
		t.Error("a busy pool counts as a database outage")
	}
	start := time.Now()
	if _, err := db.acquire(ctx); err == nil || time.Since(start) < 250*time.Millisecond {
		t.Errorf("acquire on a busy pool: %v after %s, want SERVICE_UNAVAILABLE after DATABASE__POOL_TIMEOUT", err, time.Since(start))
	}
	conn.Release()
	if err := db.Ping(ctx); err != nil {
		t.Error(err)
	}
}

func TestClassify(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want apierr.Code // "" for an error without client code
	}{
		{"statement timeout", context.Background(), fmt.Errorf("q: %w", pgErr("57014")), apierr.Timeout},
		{"cancelled query", canceled, fmt.Errorf("q: %w", pgErr("57014")), ""},
		{"server shut down", context.Background(), pgErr("57P01"), apierr.ServiceUnavailable},
		{"connection ended mid-query", context.Background(), fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), apierr.ServiceUnavailable},
		{"syntax error", context.Background(), pgErr("42601"), ""},
	} {
		err := ClassifyContext(tc.ctx, tc.err)
		var ae *apierr.Error
		got := apierr.Code("")
		if errors.As(err, &ae) {
			got = ae.Code
		}
		if got != tc.want {
			t.Errorf("%s: code %q, want %q (%v)", tc.name, got, tc.want, err)
		}
	}
}

func pgErr(code string) error { return &pgconn.PgError{Code: code, Message: "test"} }
