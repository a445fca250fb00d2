package app_test

// Graceful shutdown: SIGTERM refuses new connections and finishes the request in flight.

import (
	"net"
	"strconv"
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
