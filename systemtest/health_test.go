package systemtest

// Health: healthz follows the database (down, back, hanging), and can be turned off.

import (
	"context"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestHealthFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{})
	db := servicetest.NewDBOn(t, c)
	svc := servicetest.Start(t, db, nil)

	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // healthz checks at most once a second: past the last check
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
	time.Sleep(1100 * time.Millisecond) // past the last check, from when the database was down
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
	pid := c.PostmasterPID()
	if pid == 0 {
		t.Fatal("no running postmaster")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume := sync.OnceFunc(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	t.Cleanup(resume)
	// Again a moment later: a session whose start-up the postmaster had forked before the stop
	// finishes it meanwhile and only then shows its application_name (seen under a busy make test).
	for range 3 {
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'emsquery'`); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
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

func TestHealthChecksDisabled(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, servicetest.NewDB(t), map[string]string{"APP__HEALTH_CHECKS_ENABLED": "false"})
	resp, body := svc.Get(t, "/v1/healthz", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("healthz status %d, want 404: %s", resp.StatusCode, body)
	}
	wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
}
