package deploytest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a process started with exactly the environment a deployment file gives it: nothing
// of the test's own environment is added.
type Proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	exit int
}

// Start runs argv in dir with env (KEY=VALUE) as cred's user (nil: the test's own), stopping it
// (SIGTERM, then SIGKILL after 15 s) at cleanup and logging its output when the test failed.
func Start(t testing.TB, argv, env []string, dir string, cred *syscall.Credential) *Proc {
	t.Helper()
	p := &Proc{done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = env
	p.cmd.Dir = dir
	p.cmd.Stdout = p
	p.cmd.Stderr = p
	if cred != nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exit = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", argv[0], p.Output())
		}
	})
	return p
}

func (p *Proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output is what the process wrote to stdout and stderr so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// WaitStatus waits until GET url answers status, failing the test when the process exits first
// or after timeout.
func (p *Proc) WaitStatus(t testing.TB, url string, status int, timeout time.Duration) {
	t.Helper()
	if err := p.Await(url, status, timeout); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, p.Output())
	}
}

// Await is WaitStatus returning the failure.
func (p *Proc) Await(url string, status int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("process exited with code %d before %s answered %d", p.exit, url, status)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == status {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer %d within %s (last: %s)", url, status, timeout, last)
}

// AddressInUse tells whether the process failed to listen on a port another process took
// between the test picking it and the process binding it.
func (p *Proc) AddressInUse() bool {
	return strings.Contains(p.Output(), "address already in use")
}
