// Package servicetest runs the real service binary against a real database for outside-in
// tests: HTTP in, JSON or CSV out, settings from the environment, logs on disk, signals. The
// process itself is internal/launcher's; this package adds the test databases, the test's
// cleanup and failure reports, and the request helpers.
package servicetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/fixture"
	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/schema"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the service once per test binary (launcher.Build) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "emsquery-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath, buildErr = launcher.Build(context.Background(), dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// DB names a database in a test cluster.
type DB struct {
	Cluster  *pgtest.Cluster
	Name     string
	Host     string
	Port     int
	User     string
	Password string
	// TransactionPooling: Host and Port are a PgBouncer in transaction mode.
	TransactionPooling bool
}

// NewDB returns the shared cluster's fresh, empty database with the schema applied.
func NewDB(t testing.TB) DB {
	t.Helper()
	return newDatabase(t, pgtest.Shared(t))
}

// NewDBOn is NewDB on cluster c: a cluster of the test's own (pgtest.New), which it may stop,
// start or give TLS. The layout, and whether PgBouncer stands between, follow the test's
// Backend.
func NewDBOn(t testing.TB, c *pgtest.Cluster) DB {
	t.Helper()
	return newDatabase(t, c)
}

// FixtureDB returns a fresh database holding the hand-made edge-case fixture.
func FixtureDB(t testing.TB) DB {
	t.Helper()
	return withFixture(t, NewDB(t))
}

// FixtureDBOn is FixtureDB on cluster c, a cluster of the test's own.
func FixtureDBOn(t testing.TB, c *pgtest.Cluster) DB {
	t.Helper()
	return withFixture(t, NewDBOn(t, c))
}

func withFixture(t testing.TB, db DB) DB {
	t.Helper()
	if err := db.Cluster.Exec(context.Background(), db.Name, fixture.EdgeSQL); err != nil {
		t.Fatalf("load fixture: %v", err)
	}
	return db
}

// WithMeasures applies schema.MeasuresDDL to db (the time columns of fact_record and the table
// fact_unit_shift, contract 6.12.6), on either layout, and returns db. Apply it before the
// service starts: the service looks for the extensions at start-up only.
func WithMeasures(t testing.TB, db DB) DB {
	t.Helper()
	if err := db.Cluster.Exec(context.Background(), db.Name, schema.MeasuresDDL); err != nil {
		t.Fatalf("measures DDL: %v", err)
	}
	return db
}

// Pool returns a superuser pool on the database for the test's own SQL; closed at cleanup.
func (db DB) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cc, err := db.Cluster.ConnConfig(db.Name)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := pgxpool.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig = cc
	pc.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Env returns the settings that point the service at db.
func (db DB) Env() map[string]string {
	env := map[string]string{
		"DATABASE__HOST":     db.Host,
		"DATABASE__PORT":     strconv.Itoa(db.Port),
		"DATABASE__NAME":     db.Name,
		"DATABASE__USERNAME": db.User,
		"DATABASE__PASSWORD": db.Password,
		"DATABASE__ENCRYPT":  "no",
	}
	if db.TransactionPooling {
		env["DATABASE__TRANSACTION_POOLING"] = "yes"
	}
	return env
}

// Service is a running service process.
type Service struct {
	URL    string // http://127.0.0.1:port, without the root path
	Key    string
	Header string
	LogDir string
	Port   int

	proc   *launcher.Process
	client *http.Client
}

// Start runs the service with db's settings, a random key, logs in a temp dir, metrics and
// traces off and a free port; env overrides any of them (an empty value unsets it). It waits until /v1/ping
// answers and stops the process at cleanup.
func Start(t testing.TB, db DB, env map[string]string) *Service {
	t.Helper()
	s, err := launch(t, db, env)
	if err != nil {
		t.Fatal(err)
	}
	s.WaitReady(t, s.Port)
	return s
}

// Launch starts the service without waiting for it to be ready, for tests of start-up
// failures. The process is killed at cleanup if still running.
func Launch(t testing.TB, db DB, env map[string]string) *Service {
	t.Helper()
	s, err := launch(t, db, env)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Exec runs the service in dir with args and exactly the given settings: none of Start's
// defaults, an empty value is set empty, and none of the test process's own settings or PG*
// variables leak in. It is for tests of the command line and env files, and does not wait: see
// WaitReady. URL and Port follow APP__PORT when the settings have it.
func Exec(t testing.TB, dir string, args []string, settings map[string]string) *Service {
	t.Helper()
	s, err := run(t, dir, args, settings)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func launch(t testing.TB, db DB, env map[string]string) (*Service, error) {
	port, err := pgtest.FreePort()
	if err != nil {
		return nil, err
	}
	settings := map[string]string{
		"APP__HOST":                  "127.0.0.1",
		"APP__PORT":                  strconv.Itoa(port),
		"AUTHENTICATION__API_KEY":    RandomKey(),
		"LOG__PATH":                  t.TempDir(),
		"OTEL_METRICS_EXPORTER":      "none",
		"OTEL_TRACES_EXPORTER":       "none",
		"DATABASE__POOL_SIZE":        "2",
		"APP__SHUTDOWN_TIMEOUT":      "10",
		"LOG__CONSOLE__FORMAT":       "plain",
		"SECURITY__CORS__ENABLED":    "true",
		"APP__HEALTH_CHECKS_ENABLED": "true",
	}
	if db.Name != "" {
		for k, v := range db.Env() {
			settings[k] = v
		}
	}
	for k, v := range env {
		if v == "" {
			delete(settings, k)
		} else {
			settings[k] = v
		}
	}
	return run(t, t.TempDir(), nil, settings) // a folder of its own: no stray .env is read
}

// run starts the binary (launcher.Start, the test's environment passed on but for the service's
// own settings and PG* variables); SIGTERM, then SIGKILL after 15 s, at cleanup.
func run(t testing.TB, dir string, args []string, settings map[string]string) (*Service, error) {
	s := &Service{
		Header: "x-api-key",
		LogDir: settings["LOG__PATH"],
		Key:    settings["AUTHENTICATION__API_KEY"],
		client: &http.Client{Timeout: 60 * time.Second},
	}
	if h := settings["AUTHENTICATION__API_KEY_HEADER"]; h != "" {
		s.Header = h
	}
	if p, err := strconv.Atoi(settings["APP__PORT"]); err == nil {
		s.Port = p
	}
	s.URL = "http://127.0.0.1:" + strconv.Itoa(s.Port)
	proc, err := launcher.Start(launcher.Options{Bin: Binary(t), Args: args, Dir: dir, Settings: settings, InheritEnv: true})
	if err != nil {
		return nil, err
	}
	s.proc = proc
	t.Cleanup(func() {
		_, _ = proc.Stop(syscall.SIGTERM, 15*time.Second)
		if t.Failed() {
			t.Logf("service output:\n%s", s.Output())
		}
	})
	return s, nil
}

// WaitReady waits until /v1/ping answers 200 on port, failing the test when the process exits
// first or after 15 s.
func (s *Service) WaitReady(t testing.TB, port int) {
	t.Helper()
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/v1/ping"
	if err := s.proc.WaitReady(context.Background(), url, 15*time.Second); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, s.Output())
	}
}

// PID is the service process's id (for internal/procstat).
func (s *Service) PID() int { return s.proc.PID() }

// Output is everything the process wrote to stdout and stderr so far.
func (s *Service) Output() string { return s.proc.Output() }

// Signal sends sig to the process.
func (s *Service) Signal(sig os.Signal) { s.proc.Signal(sig) }

// Wait waits at most timeout for the process to exit and returns its exit code.
func (s *Service) Wait(timeout time.Duration) (int, error) { return s.proc.Wait(timeout) }

// Do sends req (a path-only URL is resolved against the service) and returns the response
// with its body read.
func (s *Service) Do(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	if req.URL.Host == "" {
		u, err := req.URL.Parse(s.URL + req.URL.String())
		if err != nil {
			t.Fatal(err)
		}
		req.URL = u
		req.Host = u.Host
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, body
}

// Get sends a GET to path with the given headers.
func (s *Service) Get(t testing.TB, path string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return s.Do(t, req)
}

// GraphQLError is one entry of a GraphQL errors array.
type GraphQLError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// Code is extensions.code.
func (e GraphQLError) Code() string { c, _ := e.Extensions["code"].(string); return c }

// GraphQLResponse is a decoded GraphQL HTTP response.
type GraphQLResponse struct {
	Status int
	Header http.Header
	Data   json.RawMessage `json:"data"`
	Errors []GraphQLError  `json:"errors"`
	Raw    []byte
}

// GraphQL posts query (with variables) to path with the service's key.
func (s *Service) GraphQL(t testing.TB, path, query string, vars map[string]any) *GraphQLResponse {
	t.Helper()
	return s.GraphQLWithHeaders(t, path, query, vars, map[string]string{s.Header: s.Key})
}

// GraphQLWithHeaders posts query with exactly the given extra headers (no key unless given).
func (s *Service) GraphQLWithHeaders(t testing.TB, path, query string, vars map[string]any, headers map[string]string) *GraphQLResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, raw := s.Do(t, req)
	out := &GraphQLResponse{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("GraphQL response is not JSON (%d): %v\n%s", resp.StatusCode, err, raw)
	}
	return out
}

// DataInto decodes data into v, failing the test when the response has errors.
func (r *GraphQLResponse) DataInto(t testing.TB, v any) {
	t.Helper()
	if len(r.Errors) > 0 {
		t.Fatalf("unexpected GraphQL errors: %s", r.Raw)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatalf("decode data: %v\n%s", err, r.Raw)
	}
}

// FreePort returns a TCP port on the loopback interface that was free a moment ago
// (pgtest.FreePort, failing the test when there is none).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// WaitFor polls ok every 20 ms until it holds, failing the test with "no <what> within
// <timeout>" when it still does not after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RandomKey returns a 64-character hex key.
func RandomKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Buffer collects a process's or a logger's output while the test reads it; safe for
// concurrent use.
type Buffer = launcher.Buffer
