package systemtest

// Traces (contract 6.9): a request is one trace of HTTP server span, GraphQL operation span and
// a span per database statement, continuing the caller's traceparent, with no filter value in
// any span; the access line carries the trace id; a collector that is down costs requests
// nothing and is logged once.
//
// The backend is internal/otlptest's OTLP/HTTP receiver, which decodes what the service sends
// with the official OTLP protobuf package, for every attribute of every span. The same against
// a real Jaeger is traces_jaeger_test.go (make test-traces): Jaeger cannot be installed with
// `go install` (its module has replace directives), and building it from its source takes about
// half an hour, too long for make test.

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/otlptest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func traceEnv(port int) map[string]string {
	return map[string]string{
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:" + strconv.Itoa(port),
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_EXPORTER_OTLP_TIMEOUT":  "1000",
		"OTEL_BSP_SCHEDULE_DELAY":     "100",
		"LOG__CONSOLE__FORMAT":        "json",
	}
}

// tracedRequest sends req with a traceparent of trace id traceID and parent span id parentID.
func tracedRequest(t *testing.T, svc *servicetest.Service, req *http.Request, traceID, parentID string) (*http.Response, []byte) {
	t.Helper()
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	return svc.Do(t, req)
}

func graphQLPost(t *testing.T, svc *servicetest.Service, path string, body map[string]any) *http.Request {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(svc.Header, svc.Key)
	return req
}

// spansOf waits until the trace has at least n spans and returns them.
func spansOf(t *testing.T, rc *otlptest.Receiver, traceID string, n int) []otlptest.Span {
	t.Helper()
	var out []otlptest.Span
	servicetest.WaitFor(t, 10*time.Second, strconv.Itoa(n)+" spans of trace "+traceID, func() bool {
		out = out[:0]
		for _, s := range rc.Spans() {
			if s.TraceID == traceID {
				out = append(out, s)
			}
		}
		return len(out) >= n
	})
	return out
}

// answeredSpans sends the GraphQL request req in trace traceID under the caller's span
// parentID, requires an answer without errors, and returns the trace's spans once there are n,
// and the same by name.
func answeredSpans(t *testing.T, svc *servicetest.Service, rc *otlptest.Receiver, req *http.Request, traceID, parentID string, n int) ([]otlptest.Span, map[string][]otlptest.Span) {
	t.Helper()
	resp, body := tracedRequest(t, svc, req, traceID, parentID)
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"errors"`)) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	spans := spansOf(t, rc, traceID, n)
	byName := map[string][]otlptest.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	return spans, byName
}

func TestTraces(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := otlptest.Serve(t, ln)
	svc := servicetest.Start(t, db, traceEnv(ln.Addr().(*net.TCPAddr).Port))

	// Filter values, which no span may hold: inline in the document, in variables, in the
	// export's query string and in a GraphQL GET's.
	values := []string{"Inline-Value-4471", "Variable-Value-5523", "Export-Value-9917", "Get-Value-3308"}
	const dates = `start_date: "2000-01-01", end_date: "2100-12-31"`

	t.Run("GraphQL: HTTP, operation and statement spans under the caller's span", func(t *testing.T) {
		const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		req := graphQLPost(t, svc, "/graphql", map[string]any{
			"query": `query Counts($v: String!) {
				unique_counts(columns: ["station"], ` + dates + `, use_or: true, filters: [
					{column: "station", operator: EQUALS, value: "` + values[0] + `"},
					{column: "callsign", operator: EQUALS, value: $v}]) { column value count }
				records_count { count } }`,
			"operationName": "Counts",
			"variables":     map[string]any{"v": values[1]},
		})
		spans, byName := answeredSpans(t, svc, rc, req, traceID, parentID, 4)
		server := byName["POST /graphql"]
		if len(server) != 1 {
			t.Fatalf("want one server span POST /graphql, got spans %v", names(spans))
		}
		hs := server[0]
		if hs.ParentSpanID != parentID || hs.Kind.String() != "SPAN_KIND_SERVER" {
			t.Errorf("server span: parent %s kind %s, want the caller's %s and SERVER", hs.ParentSpanID, hs.Kind, parentID)
		}
		for k, v := range map[string]string{
			"http.request.method": "POST", "http.route": "/graphql", "http.response.status_code": "200",
			"url.path": "/graphql", "url.scheme": "http", "api_key.name": "default", "network.protocol.version": "1.1",
		} {
			if hs.Attributes[k] != v {
				t.Errorf("server span %s = %q, want %q", k, hs.Attributes[k], v)
			}
		}
		if hs.Resource["service.name"] != "emsquery" {
			t.Errorf("resource service.name = %q", hs.Resource["service.name"])
		}
		op := byName["query Counts"]
		if len(op) != 1 {
			t.Fatalf("want one GraphQL span 'query Counts', got spans %v", names(spans))
		}
		if op[0].ParentSpanID != hs.SpanID {
			t.Errorf("GraphQL span's parent %s, want the server span %s", op[0].ParentSpanID, hs.SpanID)
		}
		for k, v := range map[string]string{
			"graphql.operation.type": "query", "graphql.operation.name": "Counts", "graphql.root_field": "records_count,unique_counts",
		} {
			if op[0].Attributes[k] != v {
				t.Errorf("GraphQL span %s = %q, want %q", k, op[0].Attributes[k], v)
			}
		}
		var statements []otlptest.Span
		for _, s := range spans {
			if s.Attributes["db.system.name"] != "" {
				statements = append(statements, s)
			}
		}
		if len(statements) < 2 {
			t.Fatalf("want a span per statement (unique_counts, records_count), got %v", names(spans))
		}
		sawPlaceholder := false
		for _, s := range statements {
			if s.ParentSpanID != op[0].SpanID {
				t.Errorf("statement span %q: parent %s, want the GraphQL span %s", s.Name, s.ParentSpanID, op[0].SpanID)
			}
			if s.Kind.String() != "SPAN_KIND_CLIENT" || s.Attributes["db.system.name"] != "postgresql" ||
				s.Attributes["db.namespace"] != db.Name || s.Attributes["db.operation.name"] != s.Name || s.Attributes["db.query.text"] == "" {
				t.Errorf("statement span %q: kind %s, attributes %v", s.Name, s.Kind, s.Attributes)
			}
			sawPlaceholder = sawPlaceholder || strings.Contains(s.Attributes["db.query.text"], "$1")
		}
		if !sawPlaceholder {
			t.Error("no statement text with a $1 placeholder: the filters' statement is missing")
		}
		// The access line carries the trace id (log lines reach the output within 100 ms).
		servicetest.WaitFor(t, 5*time.Second, "the access line for /graphql with trace_id "+traceID, func() bool {
			for _, line := range strings.Split(svc.Output(), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "request" && m["path"] == "/graphql" && m["trace_id"] == traceID {
					return true
				}
			}
			return false
		})
	})

	t.Run("GraphQL: a list asked alone, resolved without gqlgen's executor, has the same spans", func(t *testing.T) {
		const traceID, parentID = "5cf92f3577b34da6a3ce929d0e0e4737", "01f067aa0ba902b8"
		req := graphQLPost(t, svc, "/graphql", map[string]any{"query": `query Stations { station_resources { station_id resources { resource_id } } }`})
		spans, byName := answeredSpans(t, svc, rc, req, traceID, parentID, 3)
		server, op, statement := byName["POST /graphql"], byName["query Stations"], byName["station resources"]
		if len(server) != 1 || len(op) != 1 || len(statement) != 1 {
			t.Fatalf("want the server span, one GraphQL span 'query Stations' and one statement span 'station resources', got %v", names(spans))
		}
		if op[0].ParentSpanID != server[0].SpanID || statement[0].ParentSpanID != op[0].SpanID {
			t.Errorf("GraphQL span's parent %s (want the server span %s), statement's %s (want the GraphQL span %s)",
				op[0].ParentSpanID, server[0].SpanID, statement[0].ParentSpanID, op[0].SpanID)
		}
		if op[0].Attributes["graphql.root_field"] != "station_resources" || op[0].Attributes["graphql.operation.name"] != "Stations" {
			t.Errorf("GraphQL span attributes %v", op[0].Attributes)
		}
	})

	t.Run("export: the COPY's span without its text", func(t *testing.T) {
		const traceID, parentID = "5af92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
		req, _ := http.NewRequest(http.MethodGet, exportTestQuery+"&filter=station:EQUALS:"+url.QueryEscape(values[2]), nil)
		req.Header.Set(svc.Header, svc.Key)
		req.Header.Set("SERVICE-X-API-KEY", svc.Key)
		if resp, body := tracedRequest(t, svc, req, traceID, parentID); resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		spans := spansOf(t, rc, traceID, 2)
		var server, copySpan *otlptest.Span
		for i, s := range spans {
			switch {
			case s.Name == "GET /v1/reports/main-report/export":
				server = &spans[i]
			case s.Attributes["db.system.name"] == "postgresql":
				copySpan = &spans[i]
			}
		}
		if server == nil || copySpan == nil {
			t.Fatalf("want the server span and the COPY's span, got %v", names(spans))
		}
		if copySpan.ParentSpanID != server.SpanID || copySpan.Attributes["db.operation.name"] == "" {
			t.Errorf("COPY span: parent %s (server %s), attributes %v", copySpan.ParentSpanID, server.SpanID, copySpan.Attributes)
		}
		if _, ok := copySpan.Attributes["db.query.text"]; ok {
			t.Errorf("the COPY's span has its text, which holds the values as literals")
		}
	})

	t.Run("GraphQL GET: the path without its query string", func(t *testing.T) {
		const traceID, parentID = "6af92f3577b34da6a3ce929d0e0e4738", "20f067aa0ba902b9"
		q := `{ distinct_values(columns: ["station"], ` + dates + `, filters: [{column: "station", operator: EQUALS, value: "` + values[3] + `"}]) { value } }`
		req, _ := http.NewRequest(http.MethodGet, "/lookups/graphql?query="+url.QueryEscape(`{ urgencies }`)+"&x="+url.QueryEscape(values[3]), nil)
		req.Header.Set(svc.Header, svc.Key)
		if resp, body := tracedRequest(t, svc, req, traceID, parentID); resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		req, _ = http.NewRequest(http.MethodGet, "/graphql?query="+url.QueryEscape(q), nil)
		req.Header.Set(svc.Header, svc.Key)
		if resp, body := tracedRequest(t, svc, req, traceID, parentID); resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		spans := spansOf(t, rc, traceID, 5)
		for _, s := range spans {
			if p, ok := s.Attributes["url.path"]; ok && p != "/graphql" && p != "/lookups/graphql" {
				t.Errorf("url.path %q", p)
			}
		}
	})

	// Traces end up at the collector without a filter value anywhere.
	stop(t, svc)
	spans := rc.Spans()
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	for _, s := range spans {
		for _, v := range values {
			if strings.Contains(s.Name, v) {
				t.Errorf("span name %q holds a filter value", s.Name)
			}
			for k, a := range s.Attributes {
				if strings.Contains(a, v) || strings.Contains(a, url.QueryEscape(v)) {
					t.Errorf("span %q attribute %s = %q holds a filter value", s.Name, k, a)
				}
			}
		}
	}
	if bad := rc.Refused(); len(bad) > 0 {
		t.Errorf("the receiver refused exports: %v", bad)
	}
	if strings.Contains(svc.Output(), "export failed") {
		t.Errorf("export warnings with a working collector:\n%s", svc.Output())
	}
}

func names(spans []otlptest.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name + " (" + s.Scope + ")"
	}
	return out
}

func TestTracesCollectorDown(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	port := servicetest.FreePort(t) // nothing listens there: the collector is down
	env := traceEnv(port)
	env["LOG__CONSOLE__FORMAT"] = "plain"
	svc := servicetest.Start(t, db, env)
	const warning = "traces export failed"
	deadline := time.Now().Add(3 * time.Second) // about 30 batches
	for n := 0; time.Now().Before(deadline); n++ {
		start := time.Now()
		if resp, body := svc.Get(t, "/v1/ping", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("ping %d with the collector down: %d %s", n, resp.StatusCode, body)
		}
		if r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil); r.Status != http.StatusOK || len(r.Errors) > 0 {
			t.Fatalf("records_count with the collector down: %d %s", r.Status, r.Raw)
		}
		// Not a measure of speed: a request that waited for the collector would take its
		// OTEL_EXPORTER_OTLP_TIMEOUT (1 s) at least.
		if d := time.Since(start); d > time.Second {
			t.Errorf("requests %d took %s with the collector down", n, d)
		}
		time.Sleep(20 * time.Millisecond)
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

	// The collector comes up: one INFO line says so, and spans arrive.
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("cannot take port %d back for the receiver: %v", port, err)
	}
	rc := otlptest.Serve(t, ln)
	servicetest.WaitFor(t, 20*time.Second, "the recovery line and spans", func() bool {
		svc.Get(t, "/v1/ping", nil)
		return strings.Contains(svc.Output(), "traces export recovered") && len(rc.Spans()) > 0
	})
	if n := strings.Count(svc.Output(), warning); n != 1 {
		t.Errorf("the warning appears %d times after recovery, want once", n)
	}
}
