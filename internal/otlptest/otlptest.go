// Package otlptest is an OTLP/HTTP metrics receiver for tests: a stand-in collector that decodes
// every protobuf export the OpenTelemetry SDK pushes (the service's, or a meter provider's in
// process), so that tests can check metric names, units and attributes as they arrive.
package otlptest

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver keeps every export it decodes and every request it refused. Its methods are safe
// for concurrent use.
type Receiver struct {
	mu      sync.Mutex
	exports []*colmetricpb.ExportMetricsServiceRequest
	refused []string
}

// Serve serves a new Receiver on ln until the test ends.
func Serve(t testing.TB, ln net.Listener) *Receiver {
	t.Helper()
	rc := &Receiver{}
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return rc
}

// ServeHTTP accepts only what an OTLP/HTTP exporter sends: POST /v1/metrics, protobuf, gzip
// or not. Anything else is a 400, and remembered (see Refused).
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	refuse := func(msg string) {
		rc.mu.Lock()
		rc.refused = append(rc.refused, msg)
		rc.mu.Unlock()
		http.Error(w, msg, http.StatusBadRequest)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/metrics" {
		refuse("unexpected " + r.Method + " " + r.URL.Path)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		refuse("content type " + ct)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			refuse(err.Error())
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		refuse(err.Error())
		return
	}
	req := &colmetricpb.ExportMetricsServiceRequest{}
	if err := proto.Unmarshal(raw, req); err != nil {
		refuse("protobuf: " + err.Error())
		return
	}
	rc.mu.Lock()
	rc.exports = append(rc.exports, req)
	rc.mu.Unlock()
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Count is the number of exports received so far.
func (rc *Receiver) Count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.exports)
}

// Refused says why each refused request was refused.
func (rc *Receiver) Refused() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.refused...)
}

// Received is what the exports so far hold: resource attributes, metric names with their units,
// and the attribute sets of each metric's data points.
type Received struct {
	Resource map[string]string
	Units    map[string]string
	Points   map[string][]map[string]string
}

// Snapshot merges the exports received so far.
func (rc *Receiver) Snapshot() Received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := Received{Resource: map[string]string{}, Units: map[string]string{}, Points: map[string][]map[string]string{}}
	for _, req := range rc.exports {
		for _, rm := range req.ResourceMetrics {
			for k, v := range attrs(rm.GetResource().GetAttributes()) {
				out.Resource[k] = v
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					out.Units[m.Name] = m.Unit
					out.Points[m.Name] = append(out.Points[m.Name], pointAttrs(m)...)
				}
			}
		}
	}
	return out
}

// HasPoint tells whether one of points has every attribute of want.
func HasPoint(points []map[string]string, want map[string]string) bool {
	for _, p := range points {
		match := true
		for k, v := range want {
			if p[k] != v {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func pointAttrs(m *metricpb.Metric) []map[string]string {
	var out []map[string]string
	switch d := m.Data.(type) {
	case *metricpb.Metric_Histogram:
		for _, p := range d.Histogram.DataPoints {
			out = append(out, attrs(p.Attributes))
		}
	case *metricpb.Metric_Sum:
		for _, p := range d.Sum.DataPoints {
			out = append(out, attrs(p.Attributes))
		}
	case *metricpb.Metric_Gauge:
		for _, p := range d.Gauge.DataPoints {
			out = append(out, attrs(p.Attributes))
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		default:
			out[kv.Key] = kv.Value.String()
		}
	}
	return out
}
