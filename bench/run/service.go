package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

// buildService builds the service binary into dir, as `make build` does; with profiling, with
// the pprof build tag (pprof.go: a loopback profiling listener, off in normal builds).
func buildService(root, dir string, profiling bool) (string, error) {
	bin := filepath.Join(dir, "emsquery")
	args := []string{"build", "-trimpath", "-o", bin}
	if profiling {
		args = append(args, "-tags", "pprof")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// dbTarget is where the service and the baseline connect.
type dbTarget struct {
	Host     string
	Port     int
	Name     string
	User     string
	Password string
}

// service is one running service process.
type service struct {
	cmd   *exec.Cmd
	url   string
	host  string     // host:port of url
	rc    *rawClient // the measured requests' client (httpclient.go)
	pprof string     // the profiling listener's URL, with -profile
	key   string
	log   *bytes.Buffer
	done  chan struct{}
}

const apiKey = "bench-key-0123456789abcdef0123456789abcdef"

// startService runs the binary against db with the shipped defaults, except what a benchmark
// on one machine needs: loopback, a key, no TLS to the database, no metrics exporter (the
// default, OTLP, would push to a collector that is not there), logs in a temporary folder,
// above 1,000,000 records timeouts that grow with the data (scaledTimeouts), and the answer
// cache on or off as asked (cacheEnv).
func startService(bin, workDir string, db dbTarget, records int, cache, profiling bool) (*service, error) {
	port, err := pgtest.FreePort()
	if err != nil {
		return nil, err
	}
	extraEnv := append(scaledTimeouts(records), cacheEnv(cache)...)
	pprofURL := ""
	if profiling {
		pp, err := pgtest.FreePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(pp)
		extraEnv, pprofURL = append(extraEnv, "EMSQUERY_PPROF_ADDR="+addr), "http://"+addr
	}
	cmd := exec.Command(bin)
	cmd.Dir = workDir // no stray .env is read
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"APP__HOST=127.0.0.1", "APP__PORT=" + strconv.Itoa(port),
		"AUTHENTICATION__API_KEY=" + apiKey,
		"DATABASE__HOST=" + db.Host, "DATABASE__PORT=" + strconv.Itoa(db.Port),
		"DATABASE__NAME=" + db.Name, "DATABASE__USERNAME=" + db.User, "DATABASE__PASSWORD=" + db.Password,
		"DATABASE__ENCRYPT=no",
		"LOG__PATH=" + filepath.Join(workDir, "logs"), "LOG__CONSOLE__ENABLED=false",
		"OTEL_METRICS_EXPORTER=none",
		"OTEL_TRACES_EXPORTER=none",
	}, extraEnv...)
	var logBuf bytes.Buffer
	lw := &lockedWriter{w: &logBuf}
	cmd.Stdout, cmd.Stderr = lw, lw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	host := "127.0.0.1:" + strconv.Itoa(port)
	s := &service{cmd: cmd, url: "http://" + host, host: host, rc: &rawClient{addr: host}, pprof: pprofURL, key: apiKey, log: &logBuf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := http.Get(s.url + "/v1/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("the service exited at start:\n%s", lw.String())
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("the service did not become healthy:\n%s", lw.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// The shipped timeouts (platform/config) are sized for a database of about 1,000,000 records.
// With 10 times the records, sixteen concurrent requests of a year of data take minutes, not
// seconds: a benchmark measures how long they take instead of failing them. Up to 1,000,000
// records the service runs with the shipped values.
const (
	statementTimeout = 30 * time.Second  // LIMITS__STATEMENT_TIMEOUT
	requestTimeout   = 60 * time.Second  // LIMITS__REQUEST_TIMEOUT
	exportTimeout    = 600 * time.Second // LIMITS__EXPORT_TIMEOUT
	poolTimeout      = 30 * time.Second  // DATABASE__POOL_TIMEOUT
)

func scaledTimeouts(records int) []string {
	f := time.Duration((records + 999_999) / 1_000_000)
	if f <= 1 {
		return nil
	}
	secs := func(d time.Duration) string { return strconv.Itoa(int((d * f).Seconds())) }
	return []string{
		"LIMITS__STATEMENT_TIMEOUT=" + secs(statementTimeout), "LIMITS__REQUEST_TIMEOUT=" + secs(requestTimeout),
		"LIMITS__EXPORT_TIMEOUT=" + secs(exportTimeout), "DATABASE__POOL_TIMEOUT=" + secs(poolTimeout),
	}
}

// cacheMaxBytes is the answer cache's bound in the warm lines: the shipped default of
// CACHE__MAX_BYTES, set explicitly so that the memory target is computed from the value in force.
const cacheMaxBytes = 64 << 20

// cacheEnv turns the service's answer cache (contract 6.5) on or off. A build without the cache
// ignores the variables.
func cacheEnv(on bool) []string {
	if !on {
		return []string{"CACHE__ENABLED=false"}
	}
	return []string{"CACHE__ENABLED=true", "CACHE__MAX_BYTES=" + strconv.Itoa(cacheMaxBytes)}
}

// The Cache-Status values of the service's GraphQL responses (RFC 9211, contract 6.5).
const (
	headerCacheStatus = "Cache-Status"
	cacheHit          = "emsquery; hit"
	cacheMiss         = "emsquery; fwd=miss"
	cacheBypass       = "emsquery; fwd=bypass"
)

// cacheTally counts the Cache-Status of the service's responses in a line.
type cacheTally struct {
	hit, miss, bypass, other, none atomic.Int64
}

func (t *cacheTally) note(h http.Header) {
	_, ok := h[headerCacheStatus]
	t.noteValue([]byte(h.Get(headerCacheStatus)), ok)
}

// noteValue counts one response whose Cache-Status header was v (ok: it had one).
func (t *cacheTally) noteValue(v []byte, ok bool) {
	switch {
	case !ok:
		t.none.Add(1)
	case string(v) == cacheHit:
		t.hit.Add(1)
	case string(v) == cacheMiss:
		t.miss.Add(1)
	case string(v) == cacheBypass:
		t.bypass.Add(1)
	default:
		t.other.Add(1)
	}
}

func (t *cacheTally) total() int64 {
	return t.hit.Load() + t.miss.Load() + t.bypass.Load() + t.other.Load() + t.none.Load()
}

// headerless: no response carried a Cache-Status header: a build without the answer cache.
func (t *cacheTally) headerless() bool { return t.total() > 0 && t.none.Load() == t.total() }

// hitShare is the share of the responses that came from memory.
func (t *cacheTally) hitShare() float64 {
	if t.total() == 0 {
		return 0
	}
	return float64(t.hit.Load()) / float64(t.total())
}

func (s *service) pid() int { return s.cmd.Process.Pid }

// cpuProfile fetches a CPU profile of d from the service's profiling listener into path.
func (s *service) cpuProfile(d time.Duration, path string) error {
	resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", s.pprof, max(1, int(d.Round(time.Second).Seconds()))))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stop sends SIGINT (a graceful shutdown) and waits. The benchmark's idle keep-alive
// connections are closed first: a server may wait for them to finish (the cache branch's build
// waited its whole shutdown timeout), which would add that wait to every line.
func (s *service) stop() {
	s.rc.close()
	httpClient.CloseIdleConnections()
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// httpClient keeps enough idle connections for every worker: each worker reuses its own.
var httpClient = &http.Client{Transport: &http.Transport{
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     time.Minute,
	DisableCompression:  true,
}}

// rssSampler samples a process's resident set every 5 ms and keeps the highest value.
type rssSampler struct {
	stop chan struct{}
	done chan struct{}
	peak int64
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			s.peak = max(s.peak, statusBytes(pid, "VmRSS:"))
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the peak, also counting the kernel's own high-water mark
// (VmHWM) so that a spike between two samples is not missed.
func (s *rssSampler) Stop(pid int) int64 {
	close(s.stop)
	<-s.done
	return max(s.peak, statusBytes(pid, "VmRSS:"), statusBytes(pid, "VmHWM:"))
}

// statusBytes reads a "<field> <n> kB" line of /proc/<pid>/status, in bytes.
func statusBytes(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuTime is a process's user and system CPU time so far (/proc/<pid>/stat, in clock ticks of
// 1/100 s on Linux).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

var errNoStatement = errors.New("no statement captured")
