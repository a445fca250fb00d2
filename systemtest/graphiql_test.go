package systemtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// e2eScript returns the path of a script in e2e/ once node and the npm packages it needs are
// there; on CI their absence fails the test (make test installs them), elsewhere it skips.
func e2eScript(t *testing.T, name string, packages ...string) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "e2e", name))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node")
	}
	for _, pkg := range packages {
		if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", pkg)); err != nil {
			missing = append(missing, "e2e/node_modules/"+pkg+" (run scripts/test-deps.sh)")
		}
	}
	if len(missing) > 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s needs: %s", name, strings.Join(missing, ", "))
		}
		t.Skipf("%s needs: %s", name, strings.Join(missing, ", "))
	}
	return script
}

// browserOrSkip is e2eScript for the GraphiQL browser run, which also needs Debian's Chromium.
func browserOrSkip(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("browser test needs /usr/bin/chromium (Debian package chromium)")
		}
		t.Skip("browser test needs /usr/bin/chromium (Debian package chromium)")
	}
	return e2eScript(t, "graphiql.mjs", "playwright-core")
}

// TestGraphiQLInBrowser opens the GraphiQL page in headless Chromium with nothing but loopback
// reachable, types the key into the headers editor, runs a query and reads the result on the
// page. It runs behind a root path to check the page uses the prefix.
func TestGraphiQLInBrowser(t *testing.T) {
	script := browserOrSkip(t)
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{"APP__ROOT_PATH": "/analytics"})

	var want int64
	if err := db.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM fact_record WHERE station = 'Central'`).Scan(&want); err != nil {
		t.Fatal(err)
	}

	// Without a key, a browser GET gets the page; an API GET without a key gets 401.
	resp, body := svc.Get(t, "/analytics/graphql", map[string]string{"Accept": "text/html"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(string(body), "/analytics/graphiql/") || strings.Contains(string(body), "https://") {
		t.Errorf("page does not load its assets from the prefixed service path:\n%s", body)
	}
	if resp, _ := svc.Get(t, "/graphql?query=%7B__typename%7D", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET query without key: %d, want 401", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	shot := filepath.Join(t.TempDir(), "graphiql.png")
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(),
		"GRAPHIQL_URL="+svc.URL+"/analytics/graphql",
		"API_KEY_HEADER="+svc.Header,
		"API_KEY="+svc.Key,
		`QUERY={ records_count(station: "Central") { count } }`,
		fmt.Sprintf(`EXPECT="count": %d`, want),
		"SCREENSHOT="+shot,
	)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 passed, 0 failed") {
		t.Fatalf("browser run failed: %v\n%s", err, strings.ReplaceAll(string(out), svc.Key, "<key>"))
	}
}

// TestGraphiQLStreamsSubscription: a subscription typed into the GraphiQL page in headless
// Chromium streams: the page shows the current count (computed here with SQL), then the new
// count after an INSERT and NOTIFY (with an hour's staleness bound, so only the NOTIFY can have
// sent it), with the run button reading Stop all along; pressing it ends the stream on the
// service too (its open-streams gauge drops to 0), as the page aborts its request.
func TestGraphiQLStreamsSubscription(t *testing.T) {
	script := browserOrSkip(t)
	t.Parallel()
	db := servicetest.FixtureDB(t)
	env, target, _ := prometheusEnv(t, 0)
	env["CACHE__MAX_STALENESS"] = "3600"
	// The service sees a client gone only when it next writes to it: the heartbeat bounds that.
	env["APP__STREAM_HEARTBEAT"] = "1"
	svc := servicetest.Start(t, db, env)
	waitCacheLive(t, svc)

	// The pane pretty-prints the answer; the newline keeps "count": 4 from matching 42.
	countText := func(n int64) string { return fmt.Sprintf("\"count\": %d\n", n) }
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(),
		"GRAPHIQL_URL="+svc.URL+"/graphql",
		"API_KEY_HEADER="+svc.Header,
		"API_KEY="+svc.Key,
		"QUERY="+liveCount,
		"EXPECT="+countText(sqlCount(t, db)),
		"STEPS_ON_STDIN=1",
		"TIMEOUT_MS=110000",
		"SCREENSHOT="+filepath.Join(t.TempDir(), "graphiql-subscription.png"),
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen []string
	// fail ends the browser run and reports everything it printed.
	fail := func(format string, args ...any) {
		t.Helper()
		_ = stdin.Close()
		cancel()
		for l := range lines {
			seen = append(seen, l)
		}
		_ = cmd.Wait()
		out := strings.Join(seen, "\n") + "\n" + stderr.String()
		t.Fatalf("%s\nbrowser run:\n%s", fmt.Sprintf(format, args...), strings.ReplaceAll(out, svc.Key, "<key>"))
	}
	waitLine := func(prefix string) {
		t.Helper()
		timeout := time.After(40 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					fail("the browser run ended before %q", prefix)
				}
				seen = append(seen, l)
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-timeout:
				fail("no %q from the browser run", prefix)
			}
		}
	}
	step := func(s map[string]any) {
		t.Helper()
		b, _ := json.Marshal(s)
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			fail("writing a step: %v", err)
		}
	}

	waitLine("seen: ")
	if n := scrapeValue(t, target, "emsquery_streams_open"); n != 1 {
		t.Errorf("emsquery_streams_open %v while the page shows the first answer, want 1", n)
	}

	pool := db.Pool(t)
	if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (930201, '2024-03-10 12:00', 2, 'North Harbour')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
		t.Fatal(err)
	}
	step(map[string]any{"expect": countText(sqlCount(t, db))})
	waitLine("seen: ")

	step(map[string]any{"stop": true})
	waitLine("stopped")
	stopped := time.Now()
	servicetest.WaitFor(t, 10*time.Second, "the stream closed on the service after Stop", func() bool {
		return scrapeValue(t, target, "emsquery_streams_open") == 0
	})
	t.Logf("the stream closed on the service %s after Stop", time.Since(stopped).Round(10*time.Millisecond))

	_ = stdin.Close()
	for l := range lines {
		seen = append(seen, l)
	}
	if err := cmd.Wait(); err != nil || !slices.Contains(seen, "1 passed, 0 failed") {
		fail("browser run: %v", err)
	}
}
