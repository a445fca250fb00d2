package app_test

// Outside-in tests of the service foundation: the real binary, real HTTP, a real PostgreSQL.
// Every expected count is computed with SQL over the loaded rows, never written as a constant.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const recordsCountQuery = `{ records_count { count } }`

// expectedCount is the number of rows of fact_record, computed by the database itself.
func expectedCount(t *testing.T, db servicetest.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Pool(t).QueryRow(context.Background(), "SELECT count(*) FROM fact_record").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// countOf decodes data.records_count.count of a successful response.
func countOf(t *testing.T, r *servicetest.GraphQLResponse) int64 {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.Status, r.Raw)
	}
	var d struct {
		RecordsCount struct {
			Count int64 `json:"count"`
		} `json:"records_count"`
	}
	r.DataInto(t, &d)
	return d.RecordsCount.Count
}

// wantGraphQLError checks status and errors[0].extensions.code.
func wantGraphQLError(t *testing.T, r *servicetest.GraphQLResponse, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
	if len(r.Errors) == 0 || r.Errors[0].Code() != code {
		t.Errorf("want errors[0].extensions.code %s, got %s", code, r.Raw)
	}
}

// decodeJSON decodes a JSON object body.
func decodeJSON(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, body)
	}
	return m
}

// wantJSON GETs path without a key and checks the status and the decoded body's fields.
func wantJSON(t *testing.T, svc *servicetest.Service, path string, status int, want map[string]string) map[string]any {
	t.Helper()
	resp, body := svc.Get(t, path, nil)
	if resp.StatusCode != status {
		t.Errorf("GET %s: status %d, want %d: %s", path, resp.StatusCode, status, body)
	}
	m := decodeJSON(t, body)
	for k, v := range want {
		if m[k] != v {
			t.Errorf("GET %s: %s = %v, want %q (body %s)", path, k, m[k], v, body)
		}
	}
	return m
}

// postGraphQL posts a query with its own client, without failing the test, so that it can run
// in a goroutine.
func postGraphQL(url string, headers map[string]string, query string) (int, []byte, error) {
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// lockFactRecord takes an ACCESS EXCLUSIVE lock on fact_record in a transaction of the test's
// own; the returned function releases it (idempotent).
func lockFactRecord(t *testing.T, db servicetest.DB) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE fact_record IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

// waitForLockWaiters waits until n of the service's sessions wait for a lock in db.
func waitForLockWaiters(t *testing.T, db servicetest.DB, n int) {
	t.Helper()
	pool := db.Pool(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		err := pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity
			  WHERE datname = $1 AND application_name = 'emsquery' AND wait_event_type = 'Lock'`, db.Name).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d service sessions wait for the lock after 10s, want %d", waiting, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOutput waits until the process output contains s.
func waitOutput(t *testing.T, svc *servicetest.Service, s string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(svc.Output(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output has no %q after 5s:\n%s", s, svc.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit, so that every log line is written.
func stop(t *testing.T, svc *servicetest.Service) {
	t.Helper()
	svc.Signal(syscall.SIGTERM)
	code, err := svc.Wait(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0\n%s", code, svc.Output())
	}
}

// logFiles returns the contents of every file in dir by name.
func logFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// assertNoSecret fails when any log file or the process output contains one of the secrets.
func assertNoSecret(t *testing.T, svc *servicetest.Service, secrets ...string) {
	t.Helper()
	files := logFiles(t, svc.LogDir)
	if len(files) == 0 {
		t.Errorf("no log file in %s", svc.LogDir)
	}
	files["(process output)"] = []byte(svc.Output())
	for name, b := range files {
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s contains a secret (%.6s...)", name, s)
			}
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Authentication and CORS

func TestAuthentication(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	// DEBUG: the most verbose logging must not leak the key either.
	svc := servicetest.Start(t, db, map[string]string{"LOG__LEVEL": "DEBUG"})

	t.Run("no key", func(t *testing.T) {
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, nil)
		wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		if len(r.Data) > 0 && string(r.Data) != "null" {
			t.Errorf("401 carries data: %s", r.Raw)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		wrong := servicetest.RandomKey()
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": wrong})
		wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		// The key with one more character, and a prefix of it, are wrong too.
		for _, k := range []string{svc.Key + "x", svc.Key[:len(svc.Key)-1]} {
			r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": k})
			wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		}
	})
	t.Run("right key", func(t *testing.T) {
		if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
			t.Errorf("records_count = %d, want %d", got, want)
		}
		// Header names are case-insensitive.
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"X-API-KEY": svc.Key})
		if got := countOf(t, r); got != want {
			t.Errorf("records_count = %d, want %d", got, want)
		}
	})
	t.Run("preflight without key", func(t *testing.T) {
		resp, _ := preflight(t, svc, "/graphql", "http://localhost:3000", "x-api-key,content-type")
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			t.Errorf("preflight status %d, want 2xx", resp.StatusCode)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://localhost:3000" {
			t.Errorf("Access-Control-Allow-Origin = %q, want http://localhost:3000", got)
		}
		if got := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")); !strings.Contains(got, "x-api-key") || !strings.Contains(got, "content-type") {
			t.Errorf("Access-Control-Allow-Headers = %q, want x-api-key and content-type", got)
		}
		if got := resp.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(got, "POST") {
			t.Errorf("Access-Control-Allow-Methods = %q, want POST", got)
		}
	})
	t.Run("OPTIONS never runs a query", func(t *testing.T) {
		// Preflights pass the key check; an OPTIONS request that carries a query must still not
		// reach execution.
		req, err := http.NewRequest(http.MethodOptions, "/graphql", strings.NewReader(`{"query":"`+recordsCountQuery+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, body := svc.Do(t, req)
		if bytes.Contains(body, []byte("records_count")) || resp.StatusCode == http.StatusOK && len(body) > 0 {
			t.Errorf("OPTIONS without a key answered %d %s", resp.StatusCode, body)
		}
	})
	t.Run("disallowed origin", func(t *testing.T) {
		resp, _ := preflight(t, svc, "/graphql", "http://evil.example", "x-api-key,content-type")
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("Access-Control-Allow-Origin = %q for a disallowed origin, want none", got)
		}
		// A real request from that origin gets no allow-origin either.
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": svc.Key, "Origin": "http://evil.example"})
		if got := r.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("Access-Control-Allow-Origin = %q on a request from a disallowed origin", got)
		}
	})
	t.Run("exempt routes", func(t *testing.T) {
		wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
		wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	})
	t.Run("key never logged", func(t *testing.T) {
		stop(t, svc)
		assertNoSecret(t, svc, svc.Key, db.Password)
	})
}

// preflight sends a CORS preflight for a POST from origin, without a key.
func preflight(t *testing.T, svc *servicetest.Service, path, origin, headers string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", headers)
	return svc.Do(t, req)
}

func TestAuthenticationCustomHeader(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEY_HEADER": "X-Reporting-Key"})

	if got := countOf(t, svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"X-Reporting-Key": svc.Key})); got != want {
		t.Errorf("records_count = %d, want %d", got, want)
	}
	r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": svc.Key})
	wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
	if !strings.Contains(r.Errors[0].Message, "X-Reporting-Key") {
		t.Errorf("401 message %q does not name the configured header", r.Errors[0].Message)
	}
	// Browsers may send the configured header.
	resp, _ := preflight(t, svc, "/graphql", "http://localhost:3000", "x-reporting-key,content-type")
	if got := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")); !strings.Contains(got, "x-reporting-key") {
		t.Errorf("Access-Control-Allow-Headers = %q, want the configured header", got)
	}
}

func TestAuthenticationAuthorizationHeader(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEY_HEADER": "Authorization"})

	for _, v := range []string{svc.Key, "Bearer " + svc.Key, "bearer " + svc.Key} {
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"Authorization": v})
		if got := countOf(t, r); got != want {
			t.Errorf("Authorization %.7s...: records_count = %d, want %d", v, got, want)
		}
	}
	for name, h := range map[string]map[string]string{
		"bearer wrong key":  {"Authorization": "Bearer " + servicetest.RandomKey()},
		"other scheme":      {"Authorization": "Basic " + svc.Key},
		"bearer only":       {"Authorization": "Bearer"},
		"default header":    {"x-api-key": svc.Key},
		"no header at all":  {},
		"key after garbage": {"Authorization": "Bearer x " + svc.Key},
	} {
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, h)
		if r.Status != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401: %s", name, r.Status, r.Raw)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Start-up: key, bad settings, env file

func TestStartWithoutKey(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, wait func(time.Duration) (int, error), output func() string) {
		t.Helper()
		start := time.Now()
		code, err := wait(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 {
			t.Errorf("exit code 0 without a key")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %s to refuse", d)
		}
		if !strings.Contains(output(), "AUTHENTICATION__API_KEY") {
			t.Errorf("output does not name AUTHENTICATION__API_KEY:\n%s", output())
		}
	}
	t.Run("unset", func(t *testing.T) {
		t.Parallel()
		// servicetest unsets a variable given an empty value.
		svc := servicetest.Launch(t, servicetest.DB{}, map[string]string{"AUTHENTICATION__API_KEY": ""})
		check(t, svc.Wait, svc.Output)
	})
	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		p := runBinary(t, t.TempDir(), nil, map[string]string{
			"AUTHENTICATION__API_KEY": "", "APP__PORT": strconv.Itoa(freePort(t)),
			"LOG__PATH": t.TempDir(), "OTEL_METRICS_EXPORTER": "none",
		})
		check(t, p.wait, p.out.String)
	})
}

func TestStartWithShortKey(t *testing.T) {
	t.Parallel()
	const key = "short-but-not-empty-key" // 23 characters
	svc := servicetest.Start(t, servicetest.NewDB(t), map[string]string{"AUTHENTICATION__API_KEY": key})
	waitOutput(t, svc, "shorter than 32")
	out := svc.Output()
	if !strings.Contains(out, "WARNING") || !strings.Contains(out, "AUTHENTICATION__API_KEY") {
		t.Errorf("no WARNING naming AUTHENTICATION__API_KEY:\n%s", out)
	}
	if strings.Contains(out, key) {
		t.Errorf("the warning shows the key:\n%s", out)
	}
	// It serves with that key.
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != 0 {
		t.Errorf("records_count = %d on an empty database", got)
	}

}

func TestBadSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value string }{
		{"APP__PORT", "abc"},
		{"LOG__LEVEL", "LOUD"},
		{"SECURITY__CORS__ALLOW_ORIGINS", "notjson"},
		{"DATABASE__POOL_SIZE", "-1"},
		{"DATABASE__ENCRYPT", "maybe"},
		{"APP__ROOT_PATH", "no-slash"},
		{"AUTHENTICATION__API_KEY_HEADER", "x api key"},
		{"DATABASE__POOL_TIMEOUT", "soon"},
		{"LOG__CONSOLE__FORMAT", "xml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := servicetest.Launch(t, servicetest.DB{}, map[string]string{tc.name: tc.value})
			code, err := svc.Wait(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			out := strings.TrimRight(svc.Output(), "\n")
			if code != 2 {
				t.Errorf("exit code %d, want 2\n%s", code, out)
			}
			if strings.Contains(out, "\n") {
				t.Errorf("output has more than one line:\n%s", out)
			}
			if !strings.Contains(out, tc.name) || !strings.Contains(out, tc.value) {
				t.Errorf("output does not name %s and %q:\n%s", tc.name, tc.value, out)
			}
		})
	}
}

// process is the service binary run by hand, for arguments and working folders of the test's
// choice.
type process struct {
	cmd  *exec.Cmd
	out  *servicetest.Buffer
	done chan struct{}
	code int
}

// runBinary starts the service in dir with args and exactly the given settings (none of the
// test process's own settings or PG* variables leak in); SIGTERM, then SIGKILL, at cleanup.
func runBinary(t *testing.T, dir string, args []string, settings map[string]string) *process {
	t.Helper()
	cmd := exec.Command(servicetest.Binary(t), args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		leak := strings.HasPrefix(k, "PG")
		for _, p := range []string{"APP__", "DATABASE__", "SECURITY__", "AUTHENTICATION__", "LOG__", "OTEL_"} {
			leak = leak || strings.HasPrefix(k, p)
		}
		if !leak {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &process{cmd: cmd, out: &servicetest.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits at most timeout for the process to exit and returns its exit code.
func (p *process) wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.code, nil
	case <-time.After(timeout):
		return -1, fmt.Errorf("still running after %s", timeout)
	}
}

// waitPing waits until /v1/ping answers on port.
func (p *process) waitPing(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("exited with code %d before it was ready:\n%s", p.code, p.out.String())
		default:
		}
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/ping", port)); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no ping on port %d after 10s:\n%s", port, p.out.String())
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := servicetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func writeEnvFile(t *testing.T, path string, vars map[string]string) {
	t.Helper()
	var b strings.Builder
	for k, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEnvFile(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	base := func() map[string]string {
		s := db.Env()
		s["APP__HOST"] = "127.0.0.1"
		s["LOG__PATH"] = t.TempDir()
		s["OTEL_METRICS_EXPORTER"] = "none"
		return s
	}
	count := func(t *testing.T, port int, header, key string) (int, int64) {
		t.Helper()
		status, raw, err := postGraphQL(fmt.Sprintf("http://127.0.0.1:%d/graphql", port), map[string]string{header: key}, recordsCountQuery)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Data struct {
				RecordsCount struct{ Count int64 } `json:"records_count"`
			}
		}
		_ = json.Unmarshal(raw, &r)
		return status, r.Data.RecordsCount.Count
	}

	t.Run("dot env in the working folder; the environment wins", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		port, fileKey, envKey := freePort(t), servicetest.RandomKey(), servicetest.RandomKey()
		writeEnvFile(t, filepath.Join(dir, ".env"), map[string]string{
			"APP__PORT":                      strconv.Itoa(port),
			"AUTHENTICATION__API_KEY_HEADER": "X-File-Key",
			"AUTHENTICATION__API_KEY":        fileKey,
		})
		settings := base()
		settings["AUTHENTICATION__API_KEY"] = envKey
		p := runBinary(t, dir, nil, settings)
		p.waitPing(t, port) // the port came from the file
		if status, n := count(t, port, "X-File-Key", envKey); status != http.StatusOK || n != want {
			t.Errorf("environment's key in the file's header: status %d count %d, want 200 and %d", status, n, want)
		}
		if status, _ := count(t, port, "X-File-Key", fileKey); status != http.StatusUnauthorized {
			t.Errorf("the file's key, overridden by the environment: status %d, want 401", status)
		}
		if status, _ := count(t, port, "x-api-key", envKey); status != http.StatusUnauthorized {
			t.Errorf("the default header, replaced by the file's: status %d, want 401", status)
		}
	})

	t.Run("--env-file", func(t *testing.T) {
		t.Parallel()
		dir, other := t.TempDir(), t.TempDir()
		// A .env beside is not read when --env-file names a file: its bad value would stop the start.
		writeEnvFile(t, filepath.Join(dir, ".env"), map[string]string{"LOG__LEVEL": "LOUD"})
		port, key := freePort(t), servicetest.RandomKey()
		file := filepath.Join(other, "emsquery.env")
		writeEnvFile(t, file, map[string]string{"APP__PORT": strconv.Itoa(port), "AUTHENTICATION__API_KEY": key})
		p := runBinary(t, dir, []string{"--env-file", file}, base())
		p.waitPing(t, port)
		if status, n := count(t, port, "x-api-key", key); status != http.StatusOK || n != want {
			t.Errorf("the file's key: status %d count %d, want 200 and %d", status, n, want)
		}
	})

	t.Run("--env-file missing", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(t.TempDir(), "nope.env")
		settings := base()
		settings["AUTHENTICATION__API_KEY"] = servicetest.RandomKey()
		p := runBinary(t, t.TempDir(), []string{"--env-file", missing}, settings)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Fatal("still running with a missing env file")
		}
		if p.code != 2 || !strings.Contains(p.out.String(), missing) {
			t.Errorf("exit code %d, want 2, and output naming %s:\n%s", p.code, missing, p.out.String())
		}
	})
}

// ---------------------------------------------------------------------------------------------
// Health

func TestHealthFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{})
	name := pgtest.NewDatabase(t, c)
	db := servicetest.DB{Cluster: c, Name: name, Host: c.Host(), Port: c.Port(), User: "postgres", Password: c.Password()}
	svc := servicetest.Start(t, db, nil)

	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	m := wantJSON(t, svc, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("healthz took %s with the database down, want <= 3s", d)
	}
	if reason, _ := m["database"].(string); reason == "" || reason == "ok" {
		t.Errorf("database = %v, want a short reason", m["database"])
	}
	wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
	// A query fails with SERVICE_UNAVAILABLE rather than INTERNAL.
	r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	if len(r.Errors) == 0 || r.Errors[0].Code() != "SERVICE_UNAVAILABLE" {
		t.Errorf("records_count with the database down: want SERVICE_UNAVAILABLE, got %s", r.Raw)
	}

	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	for {
		resp, body := svc.Get(t, "/v1/healthz", nil)
		if resp.StatusCode == http.StatusOK {
			if m := decodeJSON(t, body); m["status"] != "ok" || m["database"] != "ok" {
				t.Errorf("healthz body %s", body)
			}
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("healthz still %d 5s after the database came back: %s", resp.StatusCode, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != 0 {
		t.Errorf("records_count = %d on an empty database", got)
	}

	// A database that hangs: the server accepts TCP connections but never answers (postmaster
	// stopped with SIGSTOP), and the service's sessions are gone. They are ended after the stop,
	// over a connection opened before it, so that the pool cannot replace them in between.
	ctx := context.Background()
	cc, err := c.ConnConfig("postgres")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	pid := postmasterPID(t, c)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume := sync.OnceFunc(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	t.Cleanup(resume)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'emsquery'`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // idle pooled connections are checked before use after 1s
	start = time.Now()
	wantJSON(t, svc, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("healthz took %s with a hanging database, want <= 3s", d)
	}
	wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
	resume()
	waitHealthy(t, svc, 10*time.Second)
}

// waitHealthy polls healthz until it answers 200.
func waitHealthy(t *testing.T, svc *servicetest.Service, within time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		resp, body := svc.Get(t, "/v1/healthz", nil)
		if resp.StatusCode == http.StatusOK {
			return
		}
		if time.Since(start) > within {
			t.Fatalf("healthz still %d after %s: %s", resp.StatusCode, within, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postmasterPID reads the running server's pid from its data directory.
func postmasterPID(t *testing.T, c *pgtest.Cluster) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir(), "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestHealthChecksDisabled(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, servicetest.NewDB(t), map[string]string{"APP__HEALTH_CHECKS_ENABLED": "false"})
	resp, body := svc.Get(t, "/v1/healthz", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("healthz status %d, want 404: %s", resp.StatusCode, body)
	}
	wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
}

// ---------------------------------------------------------------------------------------------
// Database connection: password characters, TLS, pool

func TestPasswordWithSpecialCharacters(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	ctx := context.Background()
	role := "emsq_ro_" + strings.ToLower(servicetest.RandomKey()[:10])
	password := `p@ss:w/rd#?%41 it's "odd"` + servicetest.RandomKey()[:8]
	ident := pgx.Identifier{role}.Sanitize()
	if err := db.Cluster.Exec(ctx, "postgres", "CREATE ROLE "+ident+" LOGIN PASSWORD "+quoteLiteral(password)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = db.Cluster.Exec(ctx, db.Name, "DROP OWNED BY "+ident)
		if err := db.Cluster.Exec(ctx, "postgres", "DROP ROLE "+ident); err != nil {
			t.Logf("drop role: %v", err)
		}
	})
	grants := "GRANT CONNECT ON DATABASE " + pgx.Identifier{db.Name}.Sanitize() + " TO " + ident + ";" +
		"GRANT USAGE ON SCHEMA public TO " + ident + ";" +
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + ident
	if err := db.Cluster.Exec(ctx, db.Name, grants); err != nil {
		t.Fatal(err)
	}

	roleDB := db
	roleDB.User, roleDB.Password = role, password
	svc := servicetest.Start(t, roleDB, nil)
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
		t.Errorf("records_count = %d, want %d", got, want)
	}
	// The service's sessions really are the role's.
	var users []string
	rows, err := db.Pool(t).Query(ctx, `SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = $1 AND application_name = 'emsquery'`, db.Name)
	if err != nil {
		t.Fatal(err)
	}
	users, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 1 || users[0] != role {
		t.Errorf("service sessions belong to %v, want [%s]", users, role)
	}
	stop(t, svc)
	assertNoSecret(t, svc, password, svc.Key)
}

// quoteLiteral quotes s as an SQL string literal (standard_conforming_strings is on).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func TestDatabaseTLS(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{SSL: true})
	for _, tc := range []struct {
		name    string
		env     map[string]string
		healthy bool
		wantSSL bool
	}{
		{"no encryption", map[string]string{"DATABASE__ENCRYPT": "no"}, true, false},
		{"trusted without checks", map[string]string{"DATABASE__ENCRYPT": "yes", "DATABASE__TRUST_SERVER_CERTIFICATE": "yes"}, true, true},
		{"verified against system roots", map[string]string{"DATABASE__ENCRYPT": "yes", "DATABASE__TRUST_SERVER_CERTIFICATE": "no"}, false, false},
		{"verified against the root cert", map[string]string{"DATABASE__ENCRYPT": "yes", "DATABASE__TRUST_SERVER_CERTIFICATE": "no", "DATABASE__SSL_ROOT_CERT": c.CAFile()}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := pgtest.NewDatabase(t, c)
			db := servicetest.DB{Cluster: c, Name: name, Host: c.Host(), Port: c.Port(), User: "postgres", Password: c.Password()}
			svc := servicetest.Start(t, db, tc.env)
			start := time.Now()
			if !tc.healthy {
				m := wantJSON(t, svc, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("healthz took %s", d)
				}
				if m["database"] == "ok" {
					t.Errorf("database = ok with an untrusted certificate")
				}
				r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
				if len(r.Errors) == 0 || r.Errors[0].Code() != "SERVICE_UNAVAILABLE" {
					t.Errorf("query with an untrusted certificate: want SERVICE_UNAVAILABLE, got %s", r.Raw)
				}
				// Nothing fell back to a plain connection either.
				if n, _ := sessions(t, db); n != 0 {
					t.Errorf("%d service sessions with an untrusted certificate, want 0", n)
				}
				return
			}
			wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
			if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != 0 {
				t.Errorf("records_count = %d on an empty database", got)
			}
			n, allSSL := sessions(t, db)
			if n == 0 {
				t.Fatal("no service session in pg_stat_activity")
			}
			if allSSL != tc.wantSSL {
				t.Errorf("%d service sessions, all TLS = %v, want %v", n, allSSL, tc.wantSSL)
			}
		})
	}
}

// sessions counts the service's sessions on db and says whether all of them use TLS.
func sessions(t *testing.T, db servicetest.DB) (n int, allSSL bool) {
	t.Helper()
	err := db.Pool(t).QueryRow(context.Background(), `
		SELECT count(*), coalesce(bool_and(s.ssl), false)
		  FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid
		 WHERE a.datname = $1 AND a.application_name = 'emsquery' AND a.pid <> pg_backend_pid()`, db.Name).Scan(&n, &allSSL)
	if err != nil {
		t.Fatal(err)
	}
	return n, allSSL
}

func TestPoolTimeout(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{
		"DATABASE__POOL_SIZE": "1", "DATABASE__MAX_OVERFLOW": "0", "DATABASE__POOL_TIMEOUT": "1",
	})
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})

	release := lockFactRecord(t, db)
	type result struct {
		status int
		body   []byte
		err    error
	}
	first := make(chan result, 1)
	go func() {
		status, body, err := postGraphQL(svc.URL+"/graphql", map[string]string{svc.Header: svc.Key}, recordsCountQuery)
		first <- result{status, body, err}
	}()
	waitForLockWaiters(t, db, 1) // the first request holds the only connection

	start := time.Now()
	r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	d := time.Since(start)
	if len(r.Errors) == 0 || r.Errors[0].Code() != "SERVICE_UNAVAILABLE" {
		t.Errorf("second request: want SERVICE_UNAVAILABLE, got %d %s", r.Status, r.Raw)
	}
	if d < 800*time.Millisecond || d > 3*time.Second {
		t.Errorf("second request failed after %s, want about DATABASE__POOL_TIMEOUT (1s)", d)
	}

	// The health check is bounded too: no free connection is a 503 within 3 s.
	start = time.Now()
	wantJSON(t, svc, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("healthz took %s with the pool exhausted, want <= 3s", d)
	}

	release()
	res := <-first
	if res.err != nil {
		t.Fatal(res.err)
	}
	got := countOf(t, &servicetest.GraphQLResponse{Status: res.status, Raw: res.body, Data: dataOf(t, res.body)})
	if got != want {
		t.Errorf("first request: records_count = %d, want %d", got, want)
	}
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
}

// dataOf returns the data member of a GraphQL body, failing on errors.
func dataOf(t *testing.T, body []byte) json.RawMessage {
	t.Helper()
	var r servicetest.GraphQLResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	if len(r.Errors) > 0 {
		t.Fatalf("unexpected errors: %s", body)
	}
	return r.Data
}

// ---------------------------------------------------------------------------------------------
// HTTP: root path, request ids, body limit, shutdown

func TestRootPath(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"APP__ROOT_PATH": "/analytics/"})
	for _, p := range []string{"/analytics/v1/ping", "/v1/ping"} {
		wantJSON(t, svc, p, http.StatusOK, map[string]string{"status": "ok"})
	}
	for _, p := range []string{"/analytics/v1/healthz", "/v1/healthz"} {
		wantJSON(t, svc, p, http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	}
	for _, p := range []string{"/analytics/graphql", "/graphql"} {
		if got := countOf(t, svc.GraphQL(t, p, recordsCountQuery, nil)); got != want {
			t.Errorf("%s: records_count = %d, want %d", p, got, want)
		}
		r := svc.GraphQLWithHeaders(t, p, recordsCountQuery, nil, nil)
		wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
	}
	// Only a whole path segment is the prefix.
	resp, body := svc.Get(t, "/analyticsx/v1/ping", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/analyticsx/v1/ping: status %d, want 404: %s", resp.StatusCode, body)
	}
}

func TestLogFilesAndRequestIDs(t *testing.T) {
	t.Parallel()
	db := servicetest.NewDB(t)
	svc := servicetest.Start(t, db, map[string]string{"LOG__FILE__MAX_SIZE": "2000", "LOG__FILE__MAX_FILES": "3"})

	// Enough access lines for several rotations; some carry the key, one a wrong key.
	for i := range 40 {
		svc.Get(t, "/v1/ping", nil)
		if i%10 == 0 {
			svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
			svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": "wrong-" + svc.Key[:8]})
		}
	}

	const saneID = "test-req_42.a:b"
	resp, _ := svc.Get(t, "/v1/ping", map[string]string{"X-Request-ID": saneID})
	if got := resp.Header.Get("X-Request-ID"); got != saneID {
		t.Errorf("X-Request-ID = %q, want the caller's %q", got, saneID)
	}
	r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{svc.Header: svc.Key, "X-Request-ID": saneID + "-gql"})
	if got := r.Header.Get("X-Request-ID"); got != saneID+"-gql" {
		t.Errorf("GraphQL X-Request-ID = %q, want %q", got, saneID+"-gql")
	}
	insane := map[string]string{"too long": strings.Repeat("a", 300), "odd characters": "evil id\" level=ERROR"}
	for name, id := range insane {
		resp, _ := svc.Get(t, "/v1/ping", map[string]string{"X-Request-ID": id})
		got := resp.Header.Get("X-Request-ID")
		if got == "" || got == id || len(got) > 128 {
			t.Errorf("%s: X-Request-ID = %q, want a new sane id", name, got)
		}
	}
	resp, _ = svc.Get(t, "/v1/ping", nil)
	if resp.Header.Get("X-Request-ID") == "" {
		t.Error("no X-Request-ID on a response to a request without one")
	}

	// Old files are removed in the background: wait until the count settles.
	var files map[string][]byte
	deadline := time.Now().Add(5 * time.Second)
	for {
		files = logFiles(t, svc.LogDir)
		if len(files) == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(files) != 3 {
		t.Errorf("%d log files, want 3 (LOG__FILE__MAX_FILES): %v", len(files), keys(files))
	}
	if _, ok := files["service.log"]; !ok {
		t.Errorf("no service.log among %v", keys(files))
	}
	var access []map[string]any
	for name, b := range files {
		if len(b) > 2000 {
			t.Errorf("%s has %d bytes, want <= 2000 (LOG__FILE__MAX_SIZE)", name, len(b))
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Bytes()
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Errorf("%s: line is not JSON: %s", name, line)
				continue
			}
			for _, secret := range []string{svc.Key, db.Password} {
				if bytes.Contains(line, []byte(secret)) {
					t.Errorf("%s: a line holds a secret: %s", name, line)
				}
			}
			for _, id := range insane {
				if bytes.Contains(line, []byte(id)) {
					t.Errorf("%s: an insane request id reached the log: %s", name, line)
				}
			}
			if m["msg"] == "request" {
				access = append(access, m)
			}
		}
	}
	var found bool
	for _, m := range access {
		for _, k := range []string{"method", "path", "status", "duration_ms", "request_id"} {
			if _, ok := m[k]; !ok {
				t.Errorf("access line without %s: %v", k, m)
			}
		}
		if m["request_id"] == saneID {
			found = true
			if m["method"] != "GET" || m["path"] != "/v1/ping" || m["status"] != float64(200) {
				t.Errorf("access line of the ping: %v", m)
			}
		}
	}
	if !found {
		t.Errorf("no access line with request_id %q among %d", saneID, len(access))
	}
	if out := svc.Output(); strings.Contains(out, svc.Key) || strings.Contains(out, db.Password) {
		t.Error("the console output holds a secret")
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestConsoleJSON(t *testing.T) {
	t.Parallel()
	// A short key adds the start-up warning to the lines checked.
	svc := servicetest.Start(t, servicetest.NewDB(t), map[string]string{
		"LOG__CONSOLE__FORMAT": "json", "AUTHENTICATION__API_KEY": "0123456789",
	})
	svc.Get(t, "/v1/ping", nil)
	svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	svc.GraphQLWithHeaders(t, "/graphql", "{ nope }", nil, map[string]string{svc.Header: svc.Key})
	stop(t, svc)
	out := svc.Output()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 5 {
		t.Errorf("only %d console lines:\n%s", len(lines), out)
	}
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("console line is not JSON: %q", line)
		}
	}
	if !strings.Contains(out, `"level":"WARNING"`) {
		t.Errorf("no JSON warning line for the short key:\n%s", out)
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, servicetest.NewDB(t), nil)
	post := func(body []byte) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(svc.Header, svc.Key)
		return svc.Do(t, req)
	}
	// A valid query padded with JSON whitespace to exactly 1 MiB is accepted.
	head, tail := []byte(`{"query":"`+recordsCountQuery+`"`), []byte(`}`)
	exact := append(append(head, bytes.Repeat([]byte(" "), 1<<20-len(head)-len(tail))...), tail...)
	resp, body := post(exact)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("1 MiB body: status %d, want 200: %.300s", resp.StatusCode, body)
	}
	var missingRequestID bool
	// Over the limit. A client that keeps writing a body the server refuses may see its write
	// fail before it reads the answer (Go's client does), so the request is written by hand:
	// the headers announce the size, part of the body follows, then the answer is read.
	for name, framing := range map[string]string{
		"content-length": fmt.Sprintf("Content-Length: %d", 1<<20+1),
		"chunked":        "Transfer-Encoding: chunked",
	} {
		resp, body := rawPost(t, svc, "/graphql", framing, map[string]string{svc.Header: svc.Key})
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: status %d, want 413: %.300s", name, resp.StatusCode, body)
			continue
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "PAYLOAD_TOO_LARGE" || e.Error.Message == "" {
			t.Errorf("%s: 413 body %s, want the REST error body with PAYLOAD_TOO_LARGE", name, body)
		}
		if resp.Header.Get("X-Request-ID") == "" {
			missingRequestID = true
		}
	}
	// Contract section 4: every response carries X-Request-ID, also the 413 that the server
	// produces before any middleware runs.
	if missingRequestID {
		t.Error("a 413 response has no X-Request-ID")
	}
	// The service is still fine.
	wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
}

// rawPost writes a POST whose body is larger than 1 MiB over a plain TCP connection: the
// headers (framing is Content-Length or Transfer-Encoding), then body bytes from another
// goroutine until the server stops reading; it returns the server's answer.
func rawPost(t *testing.T, svc *servicetest.Service, path, framing string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(svc.Port)), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s\r\n", path, framing)
	for k, v := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	chunked := strings.HasPrefix(framing, "Transfer-Encoding")
	go func() {
		piece := bytes.Repeat([]byte(" "), 64<<10)
		for sent := 0; sent <= 1<<20; sent += len(piece) {
			var err error
			if chunked {
				_, err = fmt.Fprintf(conn, "%x\r\n%s\r\n", len(piece), piece)
			} else {
				_, err = conn.Write(piece)
			}
			if err != nil {
				return // the server closed the connection after answering
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body over the limit: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer to a body over the limit: %v", err)
	}
	return resp, body
}

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, nil)
	release := lockFactRecord(t, db)
	type result struct {
		status int
		body   []byte
		err    error
	}
	inFlight := make(chan result, 1)
	go func() {
		status, body, err := postGraphQL(svc.URL+"/graphql", map[string]string{svc.Header: svc.Key}, recordsCountQuery)
		inFlight <- result{status, body, err}
	}()
	waitForLockWaiters(t, db, 1)

	svc.Signal(syscall.SIGTERM)
	signalled := time.Now()
	// New connections are refused while the request in flight is still running.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(svc.Port))
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Since(signalled) > 2*time.Second {
			t.Fatal("new connections still accepted 2s after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case r := <-inFlight:
		t.Fatalf("the request in flight ended before the lock was released: %d %s %v", r.status, r.body, r.err)
	case <-time.After(time.Until(signalled.Add(300 * time.Millisecond))):
	}
	release()

	res := <-inFlight
	if res.err != nil {
		t.Fatalf("request in flight: %v", res.err)
	}
	got := countOf(t, &servicetest.GraphQLResponse{Status: res.status, Raw: res.body, Data: dataOf(t, res.body)})
	if got != want {
		t.Errorf("request in flight: records_count = %d, want %d", got, want)
	}
	code, err := svc.Wait(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0\n%s", code, svc.Output())
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Error("connection accepted after the process exited")
	}
}
