package launcher

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The child gets its settings and, when asked, this process's environment without the
// service's own setting families and libpq's variables; its output is kept; a process that
// exits before it answers fails WaitReady with ErrExited.
func TestEnvironmentAndExit(t *testing.T) {
	t.Setenv("FOO", "foo")
	t.Setenv("PGHOST", "elsewhere")
	t.Setenv("DATABASE__HOST", "leaked")
	script := `echo "set=$APP__X foo=$FOO pg=$PGHOST db=$DATABASE__HOST"; exit 3`
	for _, inherit := range []bool{true, false} {
		p, err := Start(Options{Bin: "/bin/sh", Args: []string{"-c", script}, Dir: t.TempDir(),
			Settings: map[string]string{"APP__X": "x"}, InheritEnv: inherit})
		if err != nil {
			t.Fatal(err)
		}
		err = p.WaitReady(context.Background(), "http://127.0.0.1:1/", 10*time.Second)
		if !errors.Is(err, ErrExited) {
			t.Errorf("inherit %v: WaitReady = %v, want ErrExited", inherit, err)
		}
		code, err := p.Wait(time.Second)
		want := "set=x foo=foo pg= db=\n"
		if !inherit {
			want = "set=x foo= pg= db=\n"
		}
		if err != nil || code != 3 || p.Output() != want {
			t.Errorf("inherit %v: exit %d, %v, output %q, want %q", inherit, code, err, p.Output(), want)
		}
	}
}

// WaitReady returns once the URL answers 200; Stop ends the process with the signal, or kills
// it after the grace period and says so.
func TestReadyAndStop(t *testing.T) {
	var asked atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !asked.Swap(true) { // not ready the first time
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p, err := Start(Options{Bin: "/bin/sleep", Args: []string{"30"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(context.Background(), srv.URL, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Stop(syscall.SIGTERM, 5*time.Second); err != nil || code != -1 {
		t.Errorf("Stop = %d, %v (sleep dies of SIGTERM: no exit code)", code, err)
	}

	// A shell that ignores SIGTERM is killed after the grace period, and Stop returns although
	// its own child still holds the output pipe.
	p, err = Start(Options{Bin: "/bin/sh", Args: []string{"-c", `trap "" TERM; echo ready; sleep 30 & wait`}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.Output(), "ready") {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := p.Stop(syscall.SIGTERM, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop of a process that ignores SIGTERM = %v", err)
	}
	select {
	case <-p.Done():
	default:
		t.Error("the process runs after Stop")
	}
}
