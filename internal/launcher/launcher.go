// Package launcher builds the service binary and runs it as a child process: the real thing,
// with its settings in the environment, for the tools and tests that drive it from outside
// (bench/run, bench/exportbench, bench/scale, cmd/soak, internal/servicetest). It starts the
// process, waits until it answers, collects what it prints, and stops it. It does not import
// testing, so that commands can use it; internal/servicetest wraps it for tests.
package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ModuleRoot is the folder of the module's go.mod, where the service's main package is. It is
// found from this file's place in the source tree: the tools run from the source (go run, go
// test), not as installed binaries.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Build builds the service as `make build` does (go build -trimpath), with the given build tags
// (pprof for the profiling listener), into dir, and returns the binary's path.
func Build(ctx context.Context, dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "emsquery")
	args := []string{"build", "-trimpath", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, ".")...)
	cmd.Dir = ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the service: %w\n%s", err, out)
	}
	return bin, nil
}

// FreePort returns a TCP port on the loopback interface that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Loopback gives the service a free port on 127.0.0.1 (APP__HOST, APP__PORT in settings) and
// returns its base URL, http://127.0.0.1:<port>.
func Loopback(settings map[string]string) (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	settings["APP__HOST"], settings["APP__PORT"] = "127.0.0.1", strconv.Itoa(port)
	return "http://127.0.0.1:" + strconv.Itoa(port), nil
}

// Options say how to run the binary.
type Options struct {
	Bin  string
	Args []string
	// Dir is the working folder: one of the caller's own, so that no stray .env is read.
	Dir string
	// Settings are the service's environment variables (APP__PORT, DATABASE__HOST, ...).
	Settings map[string]string
	// InheritEnv passes this process's environment on, except the service's own setting
	// families and libpq's PG* variables (settingPrefixes), so that a developer's shell does
	// not change what the child is told. Without it the child gets PATH and Settings only: a
	// benchmark runs the shipped defaults, not whatever GOGC or GOMAXPROCS the shell has.
	InheritEnv bool
}

// settingPrefixes are the variable families of the service (platform/config, OpenTelemetry's,
// the pprof build's listener) and libpq's.
var settingPrefixes = []string{"APP__", "DATABASE__", "SECURITY__", "AUTHENTICATION__", "LOG__", "OTEL_", "LIMITS__", "CACHE__", "EMSQUERY_", "PG"}

// Process is a running service.
type Process struct {
	cmd  *exec.Cmd
	out  *Buffer
	done chan struct{}
	exit int // valid once done is closed
}

// Start starts the binary; it does not wait for the service to be ready (WaitReady).
func Start(o Options) (*Process, error) {
	cmd := exec.Command(o.Bin, o.Args...)
	cmd.Dir = o.Dir
	cmd.Env = environment(o)
	p := &Process{cmd: cmd, out: &Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	// Once the process has exited, Wait gives what it left behind (a child of its own holding
	// the output pipe) this long before it closes the pipe: Kill must not hang on it.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the service: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		p.exit = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	return p, nil
}

func environment(o Options) []string {
	var env []string
	if o.InheritEnv {
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			own := false
			for _, p := range settingPrefixes {
				own = own || strings.HasPrefix(k, p)
			}
			if !own {
				env = append(env, kv)
			}
		}
	} else {
		env = append(env, "PATH="+os.Getenv("PATH"))
	}
	for k, v := range o.Settings {
		env = append(env, k+"="+v)
	}
	return env
}

// ErrExited is returned by WaitReady when the process ended before it answered.
var ErrExited = errors.New("the service exited")

// WaitReady polls url (a GET, e.g. <base>/v1/healthz) until it answers 200. It fails when the
// process exits first (ErrExited), when timeout passes, or when ctx ends; the error carries the
// end of what the service printed.
func (p *Process) WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%w with code %d before it answered at %s:\n%s", ErrExited, p.exit, url, p.Tail(4000))
		case <-ctx.Done():
			return fmt.Errorf("wait for the service: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the service did not answer 200 at %s within %s:\n%s", url, timeout, p.Tail(4000))
		}
	}
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the process (nothing once it has exited).
func (p *Process) Signal(sig os.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// Wait waits at most timeout for the process to exit and returns its exit code.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.exit, nil
	case <-time.After(timeout):
		return -1, fmt.Errorf("the service still runs after %s", timeout)
	}
}

// Stop sends sig (SIGTERM or SIGINT: a graceful shutdown) and waits up to grace for the exit;
// then it kills the process and says so in the error. It returns the exit code.
func (p *Process) Stop(sig os.Signal, grace time.Duration) (int, error) {
	p.Signal(sig)
	code, err := p.Wait(grace)
	if err != nil {
		p.Kill()
		return -1, fmt.Errorf("the service did not exit within %s of %v: killed", grace, sig)
	}
	return code, nil
}

// Kill kills the process, if it still runs, and waits for it.
func (p *Process) Kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Output is everything the process has written to its standard output and error so far.
func (p *Process) Output() string { return p.out.String() }

// Tail is the last n bytes of Output.
func (p *Process) Tail(n int) string {
	s := p.out.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// Buffer collects a process's or a logger's output while another goroutine reads it; safe for
// concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
