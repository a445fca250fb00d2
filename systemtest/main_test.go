package systemtest

// TestMain, and what the package's outside-in tests share. They run the real binary over real
// HTTP against a real PostgreSQL; every expected count is computed with SQL over the loaded rows,
// never written as a constant.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
	return wantJSONHeaders(t, svc, path, nil, status, want)
}

// wantJSONWithKey is wantJSON with the service's key (healthz names the database hosts only to
// a key holder).
func wantJSONWithKey(t *testing.T, svc *servicetest.Service, path string, status int, want map[string]string) map[string]any {
	t.Helper()
	return wantJSONHeaders(t, svc, path, map[string]string{svc.Header: svc.Key}, status, want)
}

func wantJSONHeaders(t *testing.T, svc *servicetest.Service, path string, headers map[string]string, status int, want map[string]string) map[string]any {
	t.Helper()
	resp, body := svc.Get(t, path, headers)
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

// result is an HTTP answer received in a goroutine, where the test cannot fail.
type result struct {
	status int
	body   []byte
	err    error
}

// postGraphQL posts a query with its own client, without failing the test, so that it can run
// in a goroutine.
func postGraphQL(url string, headers map[string]string, query string) (int, []byte, error) {
	return postGraphQLWith(&http.Client{Timeout: 30 * time.Second}, url, headers, query)
}

// postGraphQLWith is postGraphQL with client.
func postGraphQLWith(client *http.Client, url string, headers map[string]string, query string) (int, []byte, error) {
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
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

// lockWaiters counts the service's sessions in db that wait for a lock.
func lockWaiters(t *testing.T, pool *pgxpool.Pool, db string) int {
	t.Helper()
	var n int
	err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity
		  WHERE datname = $1 AND application_name = 'emsquery' AND wait_event_type = 'Lock'`, db).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitForLockWaiters waits until n of the service's sessions wait for a lock in db.
func waitForLockWaiters(t *testing.T, db servicetest.DB, n int) {
	t.Helper()
	pool := db.Pool(t)
	servicetest.WaitFor(t, 10*time.Second, fmt.Sprintf("%d service sessions waiting for the lock", n), func() bool {
		return lockWaiters(t, pool, db.Name) >= n
	})
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
	// A rotation renames the current file: one listed may be gone when it is read. The lines
	// are written in batches, so rotations come in bursts; list again until a listing reads.
	for attempt := 0; ; attempt++ {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		files, renamed := map[string][]byte{}, false
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if errors.Is(err, fs.ErrNotExist) && attempt < 50 {
				renamed = true
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = b
		}
		if !renamed {
			return files
		}
		time.Sleep(10 * time.Millisecond)
	}
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

// waitHealthy polls healthz until it answers 200.
func waitHealthy(t *testing.T, svc *servicetest.Service, within time.Duration) {
	t.Helper()
	// healthz checks the database at most once a second and answers the last check meanwhile:
	// one from before what the test did must not pass for healthy.
	time.Sleep(1100 * time.Millisecond)
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
