package app_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
