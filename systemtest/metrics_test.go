package systemtest

// Outside-in tests of the metrics: the real binary scraped by a real Prometheus, pushing to an
// OTLP/HTTP receiver that decodes the protobuf, and quiet with OTEL_METRICS_EXPORTER=none.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/otlptest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

const metricsCountQuery = `query CountAll { records_count { count } }`

// metricsTraffic sends a few requests of each kind the assertions look for.
func metricsTraffic(t *testing.T, svc *servicetest.Service) {
	t.Helper()
	for range 3 {
		if resp, body := svc.Get(t, "/v1/ping", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("ping: %d %s", resp.StatusCode, body)
		}
	}
	if resp, body := svc.Get(t, "/v1/healthz", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	if r := svc.GraphQL(t, "/graphql", metricsCountQuery, nil); r.Status != http.StatusOK || len(r.Errors) > 0 {
		t.Fatalf("records_count: %d %s", r.Status, r.Raw)
	}
	if r := svc.GraphQL(t, "/graphql", `{ no_such_field }`, nil); len(r.Errors) == 0 {
		t.Fatalf("unknown field answered without errors: %s", r.Raw)
	}
	// A raw path that must never become a label.
	if resp, _ := svc.Get(t, "/no/such/route/12345", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown route: %d, want 404", resp.StatusCode)
	}
}

// prometheusBinary finds Debian's prometheus; without it the test skips, or fails under CI.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"prometheus", "/usr/bin/prometheus"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("prometheus not installed (CI is set, so this fails instead of skipping): apt-get install prometheus, or run make test-deps")
	}
	t.Skip("prometheus not installed (apt-get install prometheus, or make test-deps); with CI set this fails")
	return ""
}

// startPrometheus runs a Prometheus on loopback that scrapes target every second; it returns
// the base URL of its HTTP API.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin := prometheusBinary(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: emsquery
    metrics_path: /metrics
    static_configs:
      - targets: [%q]
`, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(servicetest.FreePort(t))
	var out servicetest.Buffer
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	base := "http://" + addr
	servicetest.WaitFor(t, 30*time.Second, "prometheus ready", func() bool {
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", out.String())
		default:
		}
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

// promQuery runs an instant query against Prometheus's HTTP API.
func promQuery(t *testing.T, base, q string) []promSeries {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("prometheus query %s: %v", q, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSeries `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("prometheus query %s: %v", q, err)
	}
	if body.Status != "success" {
		t.Fatalf("prometheus query %s: %s", q, body.Error)
	}
	return body.Data.Result
}

func (s promSeries) value(t *testing.T) float64 {
	t.Helper()
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatalf("series value %v: %v", s.Value, err)
	}
	return v
}

func TestMetricsPrometheusScrape(t *testing.T) {
	prometheusBinary(t)
	db := servicetest.FixtureDB(t)
	metricsPort := servicetest.FreePort(t)
	svc := servicetest.Start(t, db, map[string]string{
		"OTEL_METRICS_EXPORTER":         "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(metricsPort),
		"DATABASE__POOL_SIZE":           "2",
		"DATABASE__MAX_OVERFLOW":        "3",
	})
	target := "127.0.0.1:" + strconv.Itoa(metricsPort)

	// The scrape endpoint needs no key and is not on the API port.
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("scrape endpoint without a key: %d %s, want 200 text/plain", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := svc.Get(t, "/metrics", map[string]string{svc.Header: svc.Key}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("API port /metrics: %d, want 404", resp.StatusCode)
	}

	metricsTraffic(t, svc)
	prom := startPrometheus(t, target)

	var ping []promSeries
	servicetest.WaitFor(t, 30*time.Second, "request-duration series for /v1/ping in Prometheus", func() bool {
		ping = promQuery(t, prom, `http_server_request_duration_seconds_count{job="emsquery",http_route="/v1/ping"}`)
		return len(ping) > 0
	})
	got := ping[0].Metric
	for k, v := range map[string]string{"http_request_method": "GET", "http_response_status_code": "200", "url_scheme": "http"} {
		if got[k] != v {
			t.Errorf("ping series label %s = %q, want %q (%v)", k, got[k], v, got)
		}
	}
	if n := ping[0].value(t); n < 3 {
		t.Errorf("ping count %v, want at least 3", n)
	}

	// The histogram has buckets, and GraphQL requests carry their route.
	if s := promQuery(t, prom, `http_server_request_duration_seconds_bucket{http_route="/graphql",http_request_method="POST",le="+Inf"}`); len(s) == 0 {
		t.Errorf("no bucket series for POST /graphql")
	}
	// The 404 has no route label, and no label anywhere holds the raw path.
	if s := promQuery(t, prom, `http_server_request_duration_seconds_count{http_response_status_code="404"}`); len(s) != 1 || s[0].Metric["http_route"] != "" {
		t.Errorf("404 series: %v, want one without http_route", s)
	}
	for _, s := range promQuery(t, prom, `{job="emsquery"}`) {
		for k, v := range s.Metric {
			if strings.Contains(v, "12345") {
				t.Errorf("series %s has the raw path in label %s=%q", s.Metric["__name__"], k, v)
			}
		}
	}

	// Pool: states, maximum, waiting, wait time; query duration per repository operation.
	states := map[string]bool{}
	for _, s := range promQuery(t, prom, `db_client_connection_count`) {
		states[s.Metric["db_client_connection_state"]] = true
		if s.Metric["db_client_connection_pool_name"] == "" {
			t.Errorf("pool series without pool name: %v", s.Metric)
		}
	}
	if !states["idle"] || !states["used"] {
		t.Errorf("db_client_connection_count states %v, want idle and used", states)
	}
	if s := promQuery(t, prom, `db_client_connection_max`); len(s) != 1 || s[0].value(t) != 5 {
		t.Errorf("db_client_connection_max: %v, want 5 (POOL_SIZE 2 + MAX_OVERFLOW 3)", s)
	}
	if s := promQuery(t, prom, `db_client_connection_pending_requests`); len(s) != 1 {
		t.Errorf("db_client_connection_pending_requests: %v, want one series", s)
	}
	if s := promQuery(t, prom, `db_client_connection_wait_time_seconds_count`); len(s) != 1 || s[0].value(t) < 2 {
		t.Errorf("db_client_connection_wait_time_seconds_count: %v, want one series counting at least 2 waits", s)
	}
	if s := promQuery(t, prom, `db_client_operation_duration_seconds_count{db_operation_name="ping",db_system_name="postgresql"}`); len(s) != 1 {
		t.Errorf("db_client_operation_duration_seconds_count for the health check: %v", s)
	}

	// GraphQL operations: endpoint, operation name, root field, error code.
	ok := promQuery(t, prom, `graphql_server_operation_duration_seconds_count{http_route="/graphql",graphql_operation_name="CountAll",graphql_root_field="records_count",graphql_operation_type="query"}`)
	if len(ok) != 1 || ok[0].Metric["error_type"] != "" {
		t.Errorf("GraphQL operation series: %v, want one without error_type", ok)
	}
	if s := promQuery(t, prom, `graphql_server_operation_duration_seconds_count{http_route="/graphql",error_type="GRAPHQL_VALIDATION_FAILED"}`); len(s) != 1 {
		t.Errorf("GraphQL validation failure series: %v", s)
	}

	// Resource attributes reach Prometheus as target_info.
	if s := promQuery(t, prom, `target_info{service_name="emsquery"}`); len(s) != 1 || s[0].Metric["service_version"] == "" {
		t.Errorf("target_info: %v, want service_name and service_version", s)
	}
}

func otlpEnv(port int) map[string]string {
	return map[string]string{
		"OTEL_METRICS_EXPORTER":       "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:" + strconv.Itoa(port),
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_EXPORTER_OTLP_TIMEOUT":  "1000",
		"OTEL_METRIC_EXPORT_INTERVAL": "200",
		"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment.name=metrics-test,site.region=north",
	}
}

func TestMetricsOTLP(t *testing.T) {
	db := servicetest.FixtureDB(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := otlptest.Serve(t, ln)
	svc := servicetest.Start(t, db, otlpEnv(ln.Addr().(*net.TCPAddr).Port))
	metricsTraffic(t, svc)

	want := map[string]string{
		"http.server.request.duration":          "s",
		"http.server.active_requests":           "{request}",
		"graphql.server.operation.duration":     "s",
		"db.client.connection.count":            "{connection}",
		"db.client.connection.max":              "{connection}",
		"db.client.connection.pending_requests": "{request}",
		"db.client.connection.wait_time":        "s",
		"db.client.operation.duration":          "s",
	}
	var got otlptest.Received
	servicetest.WaitFor(t, 20*time.Second, "every instrument at the OTLP receiver", func() bool {
		got = rc.Snapshot()
		if !otlptest.HasPoint(got.Points["http.server.request.duration"], map[string]string{"http.route": "/v1/healthz"}) ||
			!otlptest.HasPoint(got.Points["graphql.server.operation.duration"], map[string]string{"graphql.root_field": "records_count"}) {
			return false
		}
		for name := range want {
			if _, ok := got.Units[name]; !ok {
				return false
			}
		}
		return true
	})
	for name, unit := range want {
		if got.Units[name] != unit {
			t.Errorf("%s unit %q, want %q", name, got.Units[name], unit)
		}
	}
	for k, v := range map[string]string{
		"service.name":                "emsquery",
		"service.version":             "dev", // servicetest builds without -ldflags
		"deployment.environment.name": "metrics-test",
		"site.region":                 "north",
		"telemetry.sdk.language":      "go",
	} {
		if got.Resource[k] != v {
			t.Errorf("resource attribute %s = %q, want %q (all: %v)", k, got.Resource[k], v, got.Resource)
		}
	}
	if !otlptest.HasPoint(got.Points["http.server.request.duration"], map[string]string{
		"http.route": "/v1/ping", "http.request.method": "GET", "http.response.status_code": "200",
	}) {
		t.Errorf("no request-duration point for GET /v1/ping 200: %v", got.Points["http.server.request.duration"])
	}
	if !otlptest.HasPoint(got.Points["graphql.server.operation.duration"], map[string]string{
		"http.route": "/graphql", "graphql.operation.name": "CountAll", "graphql.root_field": "records_count", "graphql.operation.type": "query",
	}) {
		t.Errorf("no GraphQL point for CountAll: %v", got.Points["graphql.server.operation.duration"])
	}
	if !otlptest.HasPoint(got.Points["db.client.connection.count"], map[string]string{"db.client.connection.state": "idle"}) {
		t.Errorf("no idle connection count: %v", got.Points["db.client.connection.count"])
	}
	if bad := rc.Refused(); len(bad) > 0 {
		t.Errorf("receiver refused exports: %v", bad)
	}
	for _, line := range strings.Split(svc.Output(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "metrics") {
			t.Errorf("warning with a working collector: %s", line)
		}
	}
}

func TestMetricsOTLPCollectorDown(t *testing.T) {
	db := servicetest.FixtureDB(t)
	port := servicetest.FreePort(t) // nothing listens there: the collector is down
	svc := servicetest.Start(t, db, otlpEnv(port))
	const warning = "metrics export failed"
	deadline := time.Now().Add(3 * time.Second) // about 15 export intervals
	for n := 0; time.Now().Before(deadline); n++ {
		start := time.Now()
		if resp, body := svc.Get(t, "/v1/ping", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("ping %d with the collector down: %d %s", n, resp.StatusCode, body)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("ping %d took %s with the collector down", n, d)
		}
		if r := svc.GraphQL(t, "/graphql", metricsCountQuery, nil); r.Status != http.StatusOK || len(r.Errors) > 0 {
			t.Fatalf("records_count with the collector down: %d %s", r.Status, r.Raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	servicetest.WaitFor(t, 10*time.Second, "the unreachable-collector warning", func() bool {
		return strings.Contains(svc.Output(), warning)
	})
	out := svc.Output()
	if n := strings.Count(out, warning); n != 1 {
		t.Fatalf("the warning appears %d times, want once:\n%s", n, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, warning) && !strings.Contains(line, "level=WARNING") {
			t.Errorf("warning not at level WARNING: %s", line)
		}
	}

	// The collector comes up: one INFO line says so, and the data arrives.
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Skipf("cannot take port %d back for the receiver: %v", port, err)
	}
	rc := otlptest.Serve(t, ln)
	servicetest.WaitFor(t, 20*time.Second, "the recovery line", func() bool {
		return strings.Contains(svc.Output(), "metrics export recovered") && rc.Count() > 0
	})
	if n := strings.Count(svc.Output(), warning); n != 1 {
		t.Errorf("the warning appears %d times after recovery, want once", n)
	}
}

func TestMetricsNone(t *testing.T) {
	db := servicetest.FixtureDB(t)
	const defaultPort = 9464
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(defaultPort), time.Second); err == nil {
		c.Close()
		t.Skipf("something else already listens on %d; cannot tell the service's absence", defaultPort)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := otlptest.Serve(t, ln)
	env := otlpEnv(ln.Addr().(*net.TCPAddr).Port)
	env["OTEL_METRICS_EXPORTER"] = "none"
	env["OTEL_EXPORTER_PROMETHEUS_HOST"] = "127.0.0.1"
	env["OTEL_EXPORTER_PROMETHEUS_PORT"] = "" // the default, 9464
	svc := servicetest.Start(t, db, env)
	metricsTraffic(t, svc)
	time.Sleep(time.Second) // five export intervals, were there an exporter

	for _, host := range []string{"127.0.0.1", "localhost"} {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(defaultPort)), time.Second); err == nil {
			c.Close()
			t.Errorf("something listens on %s:%d with OTEL_METRICS_EXPORTER=none", host, defaultPort)
		}
	}
	// Shutting down would flush an exporter: still nothing arrives.
	svc.Signal(syscall.SIGTERM)
	if code, err := svc.Wait(15 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if n := rc.Count(); n != 0 {
		t.Errorf("%d exports with OTEL_METRICS_EXPORTER=none, want 0", n)
	}
	servicetest.WaitFor(t, 5*time.Second, "the start-up line that says metrics are off", func() bool {
		return strings.Contains(svc.Output(), "metrics export off")
	})
}
