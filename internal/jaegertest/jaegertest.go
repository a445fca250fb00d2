// Package jaegertest runs a real Jaeger (v2, in-memory storage) for tests: the service sends its
// traces to Jaeger's OTLP/HTTP receiver, and tests read them back through Jaeger's query API, as
// an operator would find them.
//
// Jaeger is pinned (Version). `go install` refuses its module (its go.mod has replace
// directives), so scripts/jaeger.sh builds cmd/jaeger from the module's source, taken from the
// Go module proxy, into the user's cache folder (see Binary). That build takes about half an
// hour the first time, so it is `make test-traces`, not `make test`; the tests that use this
// package carry the build tag jaeger. JAEGER_BIN names another binary. Without one the test is
// skipped, unless CI is set: there it fails, as the database tests do.
package jaegertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// Version is the pinned module version of github.com/jaegertracing/jaeger (Jaeger v2.13.0: the
// module keeps v1 numbers for the v2 releases). scripts/jaeger.sh builds the same.
const Version = "v1.76.0"

// Binary returns the path of the Jaeger binary: JAEGER_BIN, or where scripts/jaeger.sh puts
// it (<user cache folder>/emsquery/jaeger-<Version>/jaeger).
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv("JAEGER_BIN")
	if path == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			missing(t, err.Error())
		}
		path = filepath.Join(cache, "emsquery", "jaeger-"+Version, "jaeger")
	}
	if _, err := os.Stat(path); err != nil {
		missing(t, "no Jaeger at "+path+" (make test-traces builds it)")
	}
	return path
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("jaegertest: %s; CI is set, so this fails instead of skipping", why)
	}
	t.Skipf("jaegertest: %s; skipping (with CI set this fails)", why)
}

// Jaeger is a running Jaeger.
type Jaeger struct {
	// OTLPEndpoint is the OTLP/HTTP receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
	OTLPEndpoint string
	query        string
	out          *servicetest.Buffer
}

// Start runs Jaeger on free loopback ports with in-memory storage until the test ends, and
// waits until its query API answers.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	return StartOn(t, 0)
}

// StartOn is Start with the OTLP/HTTP receiver on port otlp (0: a free one), for a test that
// points the service at a collector before the collector is up.
func StartOn(t testing.TB, otlp int) *Jaeger {
	t.Helper()
	bin := Binary(t)
	ports := make([]int, 3)
	for i := range ports {
		p, err := pgtest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	if otlp == 0 {
		otlp = ports[0]
	}
	queryHTTP, queryGRPC := ports[1], ports[2]
	dir := t.TempDir()
	config := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memory_store:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memory_store
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memory_store
`, queryHTTP, queryGRPC, otlp)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	j := &Jaeger{
		OTLPEndpoint: "http://127.0.0.1:" + strconv.Itoa(otlp),
		query:        "http://127.0.0.1:" + strconv.Itoa(queryHTTP),
		out:          &servicetest.Buffer{},
	}
	cmd := exec.Command(bin, "--config", path)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = j.out, j.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Jaeger: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("Jaeger output:\n%s", j.out)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(j.query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return j
			}
		}
		select {
		case <-done:
			t.Fatalf("Jaeger exited before it was ready:\n%s", j.out)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger not ready after 30s:\n%s", j.out)
		}
	}
}

// Span is a span as Jaeger's query API returns it: its parent (the CHILD_OF reference, empty for
// a root), its tags as text, and its process's (the resource's) service name.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	OperationName                 string
	Tags                          map[string]string
	Service                       string
}

// Trace returns the spans Jaeger holds of trace traceID (hex), or none when it does not know it.
func (j *Jaeger) Trace(t testing.TB, traceID string) []Span {
	t.Helper()
	return j.get(t, "/api/traces/"+traceID)
}

// Spans returns the spans of the latest traces (at most limit) of service, as Jaeger's search
// finds them.
func (j *Jaeger) Spans(t testing.TB, service string, limit int) []Span {
	t.Helper()
	return j.get(t, "/api/traces?"+url.Values{"service": {service}, "limit": {strconv.Itoa(limit)}, "lookback": {"1h"}}.Encode())
}

func (j *Jaeger) get(t testing.TB, path string) []Span {
	t.Helper()
	resp, err := http.Get(j.query + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("Jaeger's query API %s: %d %s", path, resp.StatusCode, b)
	}
	var body struct {
		Data []struct {
			Spans []struct {
				TraceID       string `json:"traceID"`
				SpanID        string `json:"spanID"`
				OperationName string `json:"operationName"`
				ProcessID     string `json:"processID"`
				References    []struct {
					RefType string `json:"refType"`
					SpanID  string `json:"spanID"`
				} `json:"references"`
				Tags []struct {
					Key   string `json:"key"`
					Value any    `json:"value"`
				} `json:"tags"`
			} `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("Jaeger's answer to %s: %v", path, err)
	}
	var out []Span
	for _, tr := range body.Data {
		for _, s := range tr.Spans {
			sp := Span{TraceID: s.TraceID, SpanID: s.SpanID, OperationName: s.OperationName, Tags: map[string]string{},
				Service: tr.Processes[s.ProcessID].ServiceName}
			for _, r := range s.References {
				if r.RefType == "CHILD_OF" {
					sp.ParentSpanID = r.SpanID
				}
			}
			for _, tag := range s.Tags {
				sp.Tags[tag.Key] = fmt.Sprint(tag.Value)
			}
			out = append(out, sp)
		}
	}
	return out
}
