package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emsanalytics/emsquery/internal/launcher"
)

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
	proc  *launcher.Process
	url   string
	host  string     // host:port of url
	rc    *rawClient // the measured requests' client (httpclient.go)
	pprof string     // the profiling listener's URL, with -profile
	key   string
}

const apiKey = "bench-key-0123456789abcdef0123456789abcdef"

// startService runs the binary (internal/launcher) against db with the shipped defaults, except
// what a benchmark on one machine needs: loopback, a key, no TLS to the database, no metrics
// exporter (the default, OTLP, would push to a collector that is not there), logs in a
// temporary folder, above 1,000,000 records timeouts that grow with the data (scaledTimeouts),
// and the answer cache on or off as asked (cacheEnv). Nothing of this process's environment but
// PATH reaches it. It returns once /v1/healthz answers 200.
func startService(ctx context.Context, bin, workDir string, db dbTarget, records int, cache, profiling bool) (*service, error) {
	return startServiceWith(ctx, bin, workDir, db, records, cache, profiling, nil)
}

// startServiceWith is startService with more settings, applied last (the live answers' metrics
// exporter and bounds).
func startServiceWith(ctx context.Context, bin, workDir string, db dbTarget, records int, cache, profiling bool, extra map[string]string) (*service, error) {
	settings := map[string]string{
		"AUTHENTICATION__API_KEY": apiKey,
		"DATABASE__HOST":          db.Host, "DATABASE__PORT": strconv.Itoa(db.Port),
		"DATABASE__NAME": db.Name, "DATABASE__USERNAME": db.User, "DATABASE__PASSWORD": db.Password,
		"DATABASE__ENCRYPT": "no",
		"LOG__PATH":         filepath.Join(workDir, "logs"), "LOG__CONSOLE__ENABLED": "false",
		"OTEL_METRICS_EXPORTER": "none",
		"OTEL_TRACES_EXPORTER":  "none",
		// The export's lines measure its throughput at c=16 from one key, not
		// LIMITS__MAX_CONCURRENT_EXPORTS (2 by default, which refuses the 3rd:
		// app/callers_test.go tests that bound) nor one key's share of it (half, rounded up:
		// modules/reports tests that), so the total is twice 16.
		"LIMITS__MAX_CONCURRENT_EXPORTS": "32",
		// Likewise the whole-table lists' and exports' LIMITS__MAX_STREAMED_ANSWERS (half of the
		// pool by default, one key half of that: app/streamed_test.go tests that bound).
		"LIMITS__MAX_STREAMED_ANSWERS": "64",
	}
	url, err := launcher.Loopback(settings)
	if err != nil {
		return nil, err
	}
	scaledTimeouts(settings, records)
	cacheEnv(settings, cache)
	pprofURL := ""
	if profiling {
		pp, err := launcher.FreePort()
		if err != nil {
			return nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(pp)
		settings["EMSQUERY_PPROF_ADDR"], pprofURL = addr, "http://"+addr
	}
	for k, v := range extra {
		settings[k] = v
	}
	proc, err := launcher.Start(launcher.Options{Bin: bin, Dir: workDir, Settings: settings})
	if err != nil {
		return nil, err
	}
	host := strings.TrimPrefix(url, "http://")
	s := &service{proc: proc, url: url, host: host, rc: &rawClient{addr: host}, pprof: pprofURL, key: apiKey}
	if err := proc.WaitReady(ctx, url+"/v1/healthz", 20*time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
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

// timeoutFactor is what the shipped timeouts are multiplied by on this many records: 1 up to
// 1,000,000, then one more per million.
func timeoutFactor(records int) time.Duration {
	return max(1, time.Duration((records+999_999)/1_000_000))
}

func scaledTimeouts(settings map[string]string, records int) {
	f := timeoutFactor(records)
	if f <= 1 {
		return
	}
	secs := func(d time.Duration) string { return strconv.Itoa(int((d * f).Seconds())) }
	settings["LIMITS__STATEMENT_TIMEOUT"], settings["LIMITS__REQUEST_TIMEOUT"] = secs(statementTimeout), secs(requestTimeout)
	settings["LIMITS__EXPORT_TIMEOUT"], settings["DATABASE__POOL_TIMEOUT"] = secs(exportTimeout), secs(poolTimeout)
}

// cacheMaxBytes is the answer cache's bound in the warm lines: the shipped default of
// CACHE__MAX_BYTES, set explicitly so that the memory target is computed from the value in force.
const cacheMaxBytes = 64 << 20

// cacheEnv turns the service's answer cache (contract 6.5) on or off. A build without the cache
// ignores the variables.
func cacheEnv(settings map[string]string, on bool) {
	settings["CACHE__ENABLED"] = strconv.FormatBool(on)
	if on {
		settings["CACHE__MAX_BYTES"] = strconv.Itoa(cacheMaxBytes)
	}
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

func (s *service) pid() int { return s.proc.PID() }

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

// stop sends SIGINT (a graceful shutdown) and waits up to 15 s, then kills. The benchmark's
// idle keep-alive connections are closed first: a server may wait for them to finish (the cache
// branch's build waited its whole shutdown timeout), which would add that wait to every line.
func (s *service) stop() {
	s.rc.close()
	httpClient.CloseIdleConnections()
	_, _ = s.proc.Stop(os.Interrupt, 15*time.Second)
}

// httpClient keeps enough idle connections for every worker: each worker reuses its own.
var httpClient = &http.Client{Transport: &http.Transport{
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     time.Minute,
	DisableCompression:  true,
}}

var errNoStatement = errors.New("no statement captured")
