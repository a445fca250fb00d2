package otel

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/emsanalytics/emsquery/internal/otlptest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// testOptions reads the OTLP settings from the environment, as the service does, with the
// exporters and scrape port given; the API port is 9090.
func testOptions(exporters string, port int) Options {
	var names []string
	for _, n := range strings.Split(exporters, ",") {
		if n != "none" && n != "" {
			names = append(names, n)
		}
	}
	return Options{
		MetricsExporters:   names,
		PrometheusHost:     "127.0.0.1",
		PrometheusPort:     port,
		APIPort:            9090,
		ResourceAttributes: os.Getenv("OTEL_RESOURCE_ATTRIBUTES"),
		OTLP: OTLP{
			Protocol:        os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"),
			MetricsProtocol: os.Getenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"),
			Endpoint:        os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"),
			MetricsEndpoint: os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
			ExportInterval:  os.Getenv("OTEL_METRIC_EXPORT_INTERVAL"),
		},
	}
}

// newProvider is NewMeterProvider with testOptions' settings.
func newProvider(t *testing.T, exporters string, port int, log *slog.Logger, svc Service) (metric.MeterProvider, func(), error) {
	t.Helper()
	return NewMeterProvider(testOptions(exporters, port), log, svc)
}

func listening(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestNoneIsNoop(t *testing.T) {
	log, _ := newLogger()
	port := servicetest.FreePort(t)
	mp, cleanup, err := newProvider(t, "none", port, log, Service{Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if _, ok := mp.(noop.MeterProvider); !ok {
		t.Errorf("provider is %T, want the no-op provider", mp)
	}
	if listening(port) {
		t.Errorf("something listens on %d with OTEL_METRICS_EXPORTER=none", port)
	}
}

func TestPrometheusPortInUse(t *testing.T) {
	log, _ := newLogger()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, _, err = newProvider(t, "prometheus", port, log, Service{})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_PROMETHEUS_PORT") {
		t.Fatalf("port in use: error %v, want one naming OTEL_EXPORTER_PROMETHEUS_PORT", err)
	}

	_, _, err = NewMeterProvider(testOptions("prometheus", 9090), log, Service{})
	if err == nil || !strings.Contains(err.Error(), "APP__PORT") {
		t.Fatalf("API port: error %v, want one naming APP__PORT", err)
	}
}

func TestPrometheusEndpoint(t *testing.T) {
	log, _ := newLogger()
	port := servicetest.FreePort(t)
	mp, cleanup, err := newProvider(t, "prometheus", port, log, Service{Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := mp.Meter("test").Int64Counter("test.requests", metric.WithUnit("{request}"))
	c.Add(context.Background(), 3)
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, want := range []string{"test_requests_total", `service_name="emsquery"`, `service_version="1.2.3"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	cleanup()
	if listening(port) {
		t.Errorf("scrape endpoint still listening after cleanup")
	}
}

func TestOTLPExportAndOutage(t *testing.T) {
	port := servicetest.FreePort(t) // nothing listens yet: the collector is down
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:"+strconv.Itoa(port))
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "50")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test,site=north")
	log, buf := newLogger()
	mp, cleanup, err := newProvider(t, "otlp", servicetest.FreePort(t), log, Service{Name: "emsquery", Version: "9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	c, _ := mp.Meter("test").Int64Counter("test.requests")
	c.Add(context.Background(), 1)

	servicetest.WaitFor(t, 10*time.Second, "an export failure", func() bool { return strings.Contains(buf.String(), "metrics export failed") })
	time.Sleep(500 * time.Millisecond) // about ten more failed exports
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings while the collector is down, want 1:\n%s", n, buf)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Skipf("cannot take back port %d for the receiver: %v", port, err)
	}
	rc := otlptest.Serve(t, ln)
	servicetest.WaitFor(t, 10*time.Second, "the recovery line", func() bool { return strings.Contains(buf.String(), "metrics export recovered") })
	if n := strings.Count(buf.String(), "recovered"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, buf)
	}
	got := rc.Snapshot()
	if _, ok := got.Units["test.requests"]; !ok {
		t.Errorf("test.requests not among the exported metrics %v", got.Units)
	}
	res := got.Resource
	want := map[string]string{"service.name": "emsquery", "service.version": "9.9.9", "deployment.environment.name": "test", "site": "north", "telemetry.sdk.language": "go"}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("resource attribute %s = %q, want %q (all: %v)", k, res[k], v, res)
		}
	}
}

func TestOTLPUnsupportedProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json")
	log, _ := newLogger()
	_, _, err := newProvider(t, "otlp", servicetest.FreePort(t), log, Service{})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") {
		t.Fatalf("error %v, want one naming OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", err)
	}
}

func TestOTLPgRPC(t *testing.T) {
	// The gRPC exporter is built and shut down cleanly even with no collector: nothing blocks.
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:"+strconv.Itoa(servicetest.FreePort(t)))
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
	log, _ := newLogger()
	_, cleanup, err := newProvider(t, "otlp", servicetest.FreePort(t), log, Service{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cleanup()
	if d := time.Since(start); d > shutdownTimeout+time.Second {
		t.Errorf("shutdown took %s", d)
	}
}
