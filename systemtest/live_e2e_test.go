package systemtest

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// sseClientLine is one line of e2e/graphql-sse-client.mjs: one call of its subscribe sink.
type sseClientLine struct {
	Next *struct {
		Data struct {
			RecordsCount struct{ Count int64 } `json:"records_count"`
		}
		Errors []json.RawMessage
	}
	Complete bool
	Error    *string
	Status   *int
	raw      string
}

// sseClient runs e2e/graphql-sse-client.mjs (the graphql-sse package's client) against path
// and hands back its lines as they come; the channel closes when the script exits.
func sseClient(t *testing.T, script string, svc *servicetest.Service, path, key string) <-chan sseClientLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "GRAPHQL_URL="+svc.URL+path, "API_KEY_HEADER="+svc.Header, "API_KEY="+key, "QUERY="+liveCount)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan sseClientLine, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sseClientLine{raw: sc.Text()}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l.Error = new(string)
				*l.Error = "not a JSON line: " + sc.Text()
			}
			lines <- l
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
	})
	return lines
}

// nextLine waits up to d for the script's next line.
func nextLine(t *testing.T, lines <-chan sseClientLine, d time.Duration, what string) sseClientLine {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("%s: the client exited without a line", what)
		}
		return l
	case <-time.After(d):
		t.Fatalf("%s: no line from the client within %s", what, d)
	}
	return sseClientLine{}
}

// nextCount is the records_count of a next line.
func nextCount(t *testing.T, l sseClientLine, what string) int64 {
	t.Helper()
	if l.Next == nil || len(l.Next.Errors) > 0 {
		t.Fatalf("%s: want a next result with records_count, got %s", what, l.raw)
	}
	return l.Next.Data.RecordsCount.Count
}

// TestGraphQLSSEClient: the graphql-sse npm client (distinct connections mode) against the
// service. It gets the current count, then the new count after an INSERT and NOTIFY (with an
// hour's staleness bound, so only the NOTIFY can have sent it); a wrong key reaches its error
// callback as a 401; SIGTERM to the service reaches its complete callback, not error.
func TestGraphQLSSEClient(t *testing.T) {
	script := e2eScript(t, "graphql-sse-client.mjs", "graphql-sse")
	t.Parallel()
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": "3600"})
	waitCacheLive(t, svc)

	lines := sseClient(t, script, svc, "/graphql", svc.Key)
	if got, want := nextCount(t, nextLine(t, lines, 30*time.Second, "first answer"), "first answer"), sqlCount(t, db); got != want {
		t.Fatalf("first answer %d, SQL says %d", got, want)
	}

	pool := db.Pool(t)
	if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (930101, '2024-03-10 12:00', 2, 'North Harbour')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
		t.Fatal(err)
	}
	if got, want := nextCount(t, nextLine(t, lines, 10*time.Second, "answer after the NOTIFY"), "answer after the NOTIFY"), sqlCount(t, db); got != want {
		t.Fatalf("answer after the INSERT and NOTIFY %d, SQL says %d", got, want)
	}

	// A wrong key: refused with 401 before any stream, which the client reports as its error.
	refused := sseClient(t, script, svc, "/graphql", servicetest.RandomKey())
	l := nextLine(t, refused, 30*time.Second, "wrong key")
	t.Logf("wrong key: %s", l.raw)
	if l.Error == nil || !strings.Contains(*l.Error, "401") || l.Status == nil || *l.Status != 401 {
		t.Errorf("wrong key: want the client's error naming 401, got %s", l.raw)
	}

	svc.Signal(syscall.SIGTERM)
	l = nextLine(t, lines, 10*time.Second, "after SIGTERM")
	if !l.Complete {
		t.Fatalf("after SIGTERM: want the client's complete, got %s", l.raw)
	}
	if code, err := svc.Wait(15 * time.Second); err != nil || code != 0 {
		t.Errorf("service exit %d (%v); want 0", code, err)
	}
}
