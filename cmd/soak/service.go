// The service under soak: its start with every telemetry signal on, its stop, and what is
// sampled of it (RSS from /proc, goroutines and the cache counters from its metrics).

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/procstat"
)

// service is the running binary.
type service struct {
	proc    *launcher.Process
	url     string
	metrics string
	key     string
}

// startService starts the binary (internal/launcher) against the soak's database with every
// telemetry signal on: metrics on a Prometheus endpoint of its own and over OTLP to the
// collector, traces over OTLP, and a named key from a keys file. This process's environment is
// passed on but for the service's own settings and PG*. It returns once /v1/healthz answers.
func startService(ctx context.Context, bin, tmp string, c *pgtest.Cluster, collectorPort int) (*service, error) {
	promPort, err := launcher.FreePort()
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	// One named key with every scope and a rate limit well above the load's: every request
	// passes the scope and rate checks.
	digest := sha256.Sum256([]byte(hex.EncodeToString(key)))
	keysFile := filepath.Join(tmp, "keys.json")
	entry := fmt.Sprintf(`[{"name": "soak", "sha256": %q, "scopes": ["graphql", "serve", "lookups", "export"], "rate_per_second": 5000, "burst": 5000}]`, hex.EncodeToString(digest[:]))
	if err := os.WriteFile(keysFile, []byte(entry), 0o600); err != nil {
		return nil, err
	}
	settings := map[string]string{
		"AUTHENTICATION__API_KEYS_FILE": keysFile,
		"DATABASE__HOST":                c.Host(), "DATABASE__PORT": strconv.Itoa(c.Port()), "DATABASE__NAME": "soak",
		"DATABASE__USERNAME": "postgres", "DATABASE__PASSWORD": c.Password(), "DATABASE__ENCRYPT": "no",
		"LOG__PATH": filepath.Join(tmp, "logs"), "LOG__LEVEL": "WARNING",
		"OTEL_METRICS_EXPORTER": "prometheus,otlp", "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(promPort),
		"OTEL_METRIC_EXPORT_INTERVAL":   "10000",
		"OTEL_TRACES_EXPORTER":          "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT":   "http://127.0.0.1:" + strconv.Itoa(collectorPort),
		"OTEL_EXPORTER_OTLP_PROTOCOL":   "http/protobuf",
	}
	url, err := launcher.Loopback(settings)
	if err != nil {
		return nil, err
	}
	proc, err := launcher.Start(launcher.Options{Bin: bin, Dir: tmp, Settings: settings, InheritEnv: true})
	if err != nil {
		return nil, err
	}
	svc := &service{proc: proc, url: url, metrics: "http://127.0.0.1:" + strconv.Itoa(promPort) + "/metrics", key: hex.EncodeToString(key)}
	if err := proc.WaitReady(ctx, url+"/v1/healthz", 15*time.Second); err != nil {
		proc.Kill()
		return nil, err
	}
	return svc, nil
}

// tail is the end of the service's output.
func (s *service) tail() string { return s.proc.Tail(4000) }

// stop sends SIGTERM and waits 30 s for the exit, then kills.
func (s *service) stop() (int, error) { return s.proc.Stop(syscall.SIGTERM, 30*time.Second) }

func (s *service) kill() { s.proc.Kill() }

// sample is one measurement of the process.
type sample struct {
	at         time.Time
	phase      string
	rss        int64 // bytes
	goroutines int64
	requests   int64
	failures   int64
}

func (s *service) sample() (sample, error) {
	var sm sample
	rss, err := procstat.RSS(s.proc.PID())
	if err != nil {
		return sm, fmt.Errorf("read the service's RSS: %w", err)
	}
	sm.rss = rss
	resp, err := http.Get(s.metrics)
	if err != nil {
		return sm, fmt.Errorf("scrape the service's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "go_goroutine_count") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return sm, fmt.Errorf("go_goroutine_count %q: %w", line, err)
			}
			sm.goroutines, found = int64(v), true
		}
	}
	if !found {
		return sm, errors.New("the service's metrics have no go_goroutine_count")
	}
	return sm, nil
}

// cacheCounters reads the service's cache counters from its Prometheus endpoint, summed over
// endpoints: hits, misses, coalesced, bypasses, and "invalidations <reason>" per reason.
func (s *service) cacheCounters() (map[string]int64, error) {
	resp, err := http.Get(s.metrics)
	if err != nil {
		return nil, fmt.Errorf("scrape the service's metrics: %w", err)
	}
	defer resp.Body.Close()
	const prefix, reasonLabel = "emsquery_cache_", `emsquery_cache_invalidation_reason="`
	out := map[string]int64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(line, "_total")
		if !slices.Contains([]string{"hits", "misses", "coalesced", "bypasses", "invalidations"}, name) || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", prefix, line, err)
		}
		if name == "invalidations" {
			_, r, ok := strings.Cut(rest, reasonLabel)
			r, _, _ = strings.Cut(r, `"`)
			if !ok {
				r = "unknown"
			}
			name += " " + r
		}
		out[name] += int64(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the service's metrics: %w", err)
	}
	return out, nil
}

// metricSums reads the service's Prometheus endpoint and sums each of names (the whole metric
// name, as exposed) over its label sets.
func (s *service) metricSums(names ...string) (map[string]float64, error) {
	resp, err := http.Get(s.metrics)
	if err != nil {
		return nil, fmt.Errorf("scrape the service's metrics: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		end := strings.IndexAny(line, "{ ")
		if end < 0 || !slices.Contains(names, line[:end]) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", line, err)
		}
		out[line[:end]] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the service's metrics: %w", err)
	}
	return out, nil
}
