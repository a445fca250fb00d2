package systemtest

// Graceful shutdown: SIGTERM refuses new connections and finishes the request in flight.

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, nil)
	release := lockFactRecord(t, db)
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

// TestShutdownDelay: with APP__SHUTDOWN_DELAY, SIGTERM first takes the service out of a load
// balancer's rotation (healthz 503) while every route still serves, new connections included;
// the graceful shutdown follows the delay.
func TestShutdownDelay(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	const delay = 3 * time.Second
	svc := servicetest.Start(t, db, map[string]string{"APP__SHUTDOWN_DELAY": "3"})
	if resp, body := svc.Get(t, "/v1/healthz", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz before SIGTERM: %d %s", resp.StatusCode, body)
	}
	svc.Signal(syscall.SIGTERM)
	signalled := time.Now()
	servicetest.WaitFor(t, time.Second, "healthz 503 after SIGTERM", func() bool {
		resp, _ := svc.Get(t, "/v1/healthz", nil)
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	served := 0
	for time.Since(signalled) < delay-time.Second {
		// A new connection each time: the listener stays open while draining.
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		status, body, err := postGraphQLWith(client, svc.URL+"/graphql", map[string]string{svc.Header: svc.Key}, recordsCountQuery)
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s after SIGTERM: %d %v %.200s", time.Since(signalled).Round(time.Millisecond), status, err, body)
		}
		if got := countOf(t, &servicetest.GraphQLResponse{Status: status, Raw: body, Data: dataOf(t, body)}); got != want {
			t.Fatalf("records_count while draining = %d, want %d", got, want)
		}
		served++
		time.Sleep(100 * time.Millisecond)
	}
	code, err := svc.Wait(delay + 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Since(signalled)
	t.Logf("%d requests served while draining; stopped %s after SIGTERM", served, stopped.Round(time.Millisecond))
	if code != 0 || stopped < delay {
		t.Errorf("exit code %d after %s, want 0 after at least %s", code, stopped, delay)
	}
	if !strings.Contains(svc.Output(), "draining") {
		t.Error("no log line says the service is draining")
	}
}
