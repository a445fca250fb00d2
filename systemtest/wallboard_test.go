package systemtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// TestWallboardExample runs the README's wall-board example (docs/examples/wallboard.html) as
// its reader would: served from an origin of its own that the service allows, in headless
// Chromium. The page shows the current answers (checked against SQL), and the new count after
// a load and its NOTIFY, without reloading.
func TestWallboardExample(t *testing.T) {
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("browser test needs /usr/bin/chromium (Debian package chromium)")
		}
		t.Skip("browser test needs /usr/bin/chromium (Debian package chromium)")
	}
	script := e2eScript(t, "wallboard.mjs", "playwright-core")
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pages := &http.Server{Handler: http.FileServer(http.Dir("../docs/examples")), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = pages.Serve(ln) }()
	t.Cleanup(func() { _ = pages.Close() })
	origin := "http://" + ln.Addr().String()
	svc := servicetest.Start(t, db, map[string]string{
		"SECURITY__CORS__ALLOW_ORIGINS": `["` + origin + `"]`,
		"CACHE__MAX_STALENESS":          "3600",
	})
	waitCacheLive(t, svc)

	want := sqlCount(t, db)
	rows, err := pool.Query(context.Background(), `SELECT degree_of_urgency, count(*) FROM fact_record GROUP BY 1 ORDER BY 2 DESC, 1 NULLS LAST`)
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	for rows.Next() {
		var value *string
		var n int64
		if err := rows.Scan(&value, &n); err != nil {
			t.Fatal(err)
		}
		label := "unknown"
		if value != nil {
			label = *value
		}
		table = append(table, fmt.Sprintf("Urgency %s\t%d", label, n))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(),
		"PAGE_URL="+origin+"/wallboard.html#"+url.Values{"api": {svc.URL}, "key": {svc.Key}}.Encode(),
		fmt.Sprintf("EXPECT=%d", want),
		"EXPECT_ROWS="+strings.Join(table, "\n"),
		fmt.Sprintf("EXPECT_NEXT=%d", want+1),
	)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(out)
	var seen strings.Builder
	for !strings.Contains(seen.String(), "first shown") {
		line, err := lines.ReadString('\n')
		seen.WriteString(line)
		if err != nil {
			_ = cmd.Wait()
			t.Fatalf("the page did not show the first answers:\n%s", strings.ReplaceAll(seen.String(), svc.Key, "<key>"))
		}
	}
	// A load, then its NOTIFY: the page shows the new count without reloading.
	if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (940001, '2024-03-10 12:00', 2, 'North Harbour')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
		t.Fatal(err)
	}
	if got := sqlCount(t, db); got != want+1 {
		t.Fatalf("SQL count after the INSERT %d, want %d", got, want+1)
	}
	rest, _ := io.ReadAll(lines)
	seen.Write(rest)
	if err := cmd.Wait(); err != nil || !strings.Contains(seen.String(), "1 passed, 0 failed") {
		t.Fatalf("browser run failed: %v\n%s", err, strings.ReplaceAll(seen.String(), svc.Key, "<key>"))
	}
}
