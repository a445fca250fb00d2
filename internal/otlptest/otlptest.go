// Package otlptest is an OTLP/HTTP receiver for tests: a stand-in collector that decodes every
// protobuf export of metrics and traces the OpenTelemetry SDK pushes (the service's, or a
// provider's in process) with the official OTLP protobuf package, so that tests can check
// metric names, units and attributes, and spans with their parents and attributes, as they
// arrive.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver keeps every export it decodes and every request it refused. Its methods are safe
// for concurrent use.
type Receiver struct {
	mu        sync.Mutex
	countOnly bool // keep counts, not what was received (a long soak)
	exports   []*colmetricpb.ExportMetricsServiceRequest
	metrics   int // metric exports received
	spans     []Span
	spanCount int
	refused   []string
}

// Serve serves a new Receiver on ln until the test ends.
func Serve(t testing.TB, ln net.Listener) *Receiver {
	t.Helper()
	rc, stop := start(ln, false)
	t.Cleanup(stop)
	return rc
}

// Start serves a new Receiver on ln until stop is called, for programs that are not tests; it
// counts what it receives (SpanCount, Count) without keeping it, so that a long run does not
// fill its memory.
func Start(ln net.Listener) (*Receiver, func()) {
	return start(ln, true)
}

func start(ln net.Listener, countOnly bool) (*Receiver, func()) {
	rc := &Receiver{countOnly: countOnly}
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return rc, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}

// ServeHTTP accepts only what an OTLP/HTTP exporter sends: POST /v1/metrics or /v1/traces,
// protobuf, gzip or not. Anything else is a 400, and remembered (see Refused).
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	refuse := func(msg string) {
		rc.mu.Lock()
		rc.refused = append(rc.refused, msg)
		rc.mu.Unlock()
		http.Error(w, msg, http.StatusBadRequest)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/metrics" && r.URL.Path != "/v1/traces" {
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
	if r.URL.Path == "/v1/traces" {
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(raw, req); err != nil {
			refuse("protobuf: " + err.Error())
			return
		}
		spans := flatten(req)
		rc.mu.Lock()
		rc.spanCount += len(spans)
		if !rc.countOnly {
			rc.spans = append(rc.spans, spans...)
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
		return
	}
	req := &colmetricpb.ExportMetricsServiceRequest{}
	if err := proto.Unmarshal(raw, req); err != nil {
		refuse("protobuf: " + err.Error())
		return
	}
	rc.mu.Lock()
	rc.metrics++
	if !rc.countOnly {
		rc.exports = append(rc.exports, req)
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Span is one span received: ids in hex (ParentSpanID empty for a root), its instrumentation
// scope, its attributes and its resource's, as text.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name, Scope                   string
	Kind                          tracepb.Span_SpanKind
	Status                        tracepb.Status_StatusCode
	Start, End                    time.Time
	Attributes, Resource          map[string]string
}

func flatten(req *coltracepb.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range req.ResourceSpans {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				out = append(out, Span{
					TraceID: hex.EncodeToString(sp.TraceId), SpanID: hex.EncodeToString(sp.SpanId),
					ParentSpanID: hex.EncodeToString(sp.ParentSpanId),
					Name:         sp.Name, Scope: ss.GetScope().GetName(), Kind: sp.Kind, Status: sp.GetStatus().GetCode(),
					Start: time.Unix(0, int64(sp.StartTimeUnixNano)), End: time.Unix(0, int64(sp.EndTimeUnixNano)),
					Attributes: attrs(sp.Attributes), Resource: res,
				})
			}
		}
	}
	return out
}

// SpanCount is the number of spans received so far.
func (rc *Receiver) SpanCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.spanCount
}

// Spans returns the spans received so far.
func (rc *Receiver) Spans() []Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Span(nil), rc.spans...)
}

// Count is the number of metric exports received so far.
func (rc *Receiver) Count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.metrics
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
