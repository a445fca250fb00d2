//go:build jaeger

package systemtest

// Traces (contract 6.9) against a real Jaeger (internal/jaegertest), queried over its HTTP API as
// an operator would: the request's trace as a whole, and the collector's outage. Jaeger is built
// from source the first time (about half an hour), so these tests carry the build tag jaeger and
// run with `make test-traces`, not `make test`; traces_test.go checks the same against
// internal/otlptest's receiver, attribute by attribute, in every `make test`.

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/jaegertest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// jaegerRequest sends a main_report with one filter value inline and one in a variable under
// the caller's traceparent, and returns the trace Jaeger holds once its statement span is in.
func jaegerRequest(t *testing.T, svc *servicetest.Service, jaeger *jaegertest.Jaeger, traceID, parentID, inline, variable string) []jaegertest.Span {
	t.Helper()
	req := graphQLPost(t, svc, "/serve/graphql", map[string]any{
		"query": `query Report($v: String!) { main_report(start_date: "2000-01-01", end_date: "2100-12-31", use_or: true, filters: [
			{column: "station", operator: EQUALS, value: "` + inline + `"},
			{column: "callsign", operator: IN, values: [$v]}]) { total rows { record_id } } }`,
		"variables": map[string]any{"v": variable},
	})
	if resp, body := tracedRequest(t, svc, req, traceID, parentID); resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"errors"`)) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// The spans reach Jaeger in the batches they ended in: the statement's while the answer is
	// made, the HTTP server span's once the answer was written. The whole trace is waited for.
	var spans []jaegertest.Span
	servicetest.WaitFor(t, 15*time.Second, "the trace in Jaeger with its server, operation and statement spans", func() bool {
		spans = jaeger.Trace(t, traceID)
		var server, op, stmt bool
		for _, s := range spans {
			server = server || s.OperationName == "POST /serve/graphql"
			op = op || s.OperationName == "query Report"
			stmt = stmt || s.Tags["db.system.name"] == "postgresql"
		}
		return server && op && stmt
	})
	return spans
}

// checkJaegerTrace checks one request's trace: the HTTP server span under the caller's span, the
// GraphQL operation span under it, the statement span under that.
func checkJaegerTrace(t *testing.T, spans []jaegertest.Span, parentID string) {
	t.Helper()
	var server, op, stmt *jaegertest.Span
	for i, s := range spans {
		switch {
		case s.OperationName == "POST /serve/graphql":
			server = &spans[i]
		case s.OperationName == "query Report":
			op = &spans[i]
		case s.Tags["db.system.name"] == "postgresql":
			stmt = &spans[i]
		}
	}
	if server == nil || op == nil || stmt == nil {
		t.Fatalf("want the HTTP, GraphQL and statement spans in one trace, Jaeger has %+v", spans)
	}
	if server.ParentSpanID != parentID || op.ParentSpanID != server.SpanID || stmt.ParentSpanID != op.SpanID {
		t.Errorf("parents: server %s (want the caller's %s), GraphQL %s (want %s), statement %s (want %s)",
			server.ParentSpanID, parentID, op.ParentSpanID, server.SpanID, stmt.ParentSpanID, op.SpanID)
	}
	if server.Service != "emsquery" || server.Tags["http.route"] != "/serve/graphql" || server.Tags["span.kind"] != "server" {
		t.Errorf("server span: service %q, tags %v", server.Service, server.Tags)
	}
	if op.Tags["graphql.operation.name"] != "Report" {
		t.Errorf("GraphQL span tags %v", op.Tags)
	}
	if !strings.Contains(stmt.Tags["db.query.text"], "$1") || stmt.Tags["span.kind"] != "client" {
		t.Errorf("statement span tags %v, want the text with placeholders", stmt.Tags)
	}
}

// noValues fails when any span Jaeger holds of the service, its name or a tag, holds one of
// values.
func noValues(t *testing.T, jaeger *jaegertest.Jaeger, values ...string) {
	t.Helper()
	spans := jaeger.Spans(t, "emsquery", 1000)
	if len(spans) == 0 {
		t.Fatal("Jaeger's search finds no span of service emsquery")
	}
	for _, s := range spans {
		for _, v := range values {
			if strings.Contains(s.OperationName, v) {
				t.Errorf("span name %q holds a filter value", s.OperationName)
			}
			for k, tag := range s.Tags {
				if strings.Contains(tag, v) {
					t.Errorf("span %q tag %s = %q holds a filter value", s.OperationName, k, tag)
				}
			}
		}
	}
}

func TestTracesJaeger(t *testing.T) {
	t.Parallel()
	jaeger := jaegertest.Start(t)
	db := servicetest.FixtureDB(t)
	env := traceEnv(0)
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = jaeger.OTLPEndpoint
	svc := servicetest.Start(t, db, env)

	const traceID, parentID = "7bf92f3577b34da6a3ce929d0e0e4739", "a1f067aa0ba902c1"
	const inline, variable = "Inline-Value-6612", "Variable-Value-7723"
	checkJaegerTrace(t, jaegerRequest(t, svc, jaeger, traceID, parentID, inline, variable), parentID)
	noValues(t, jaeger, inline, variable)
	if strings.Contains(svc.Output(), "export failed") {
		t.Errorf("export warnings with Jaeger up:\n%s", svc.Output())
	}
}

// TestTracesJaegerCollectorDown: with Jaeger not yet up, requests are as fast as ever and the
// log warns once; when Jaeger comes up on the configured port, one line says so and the next
// request's trace is there, whole.
func TestTracesJaegerCollectorDown(t *testing.T) {
	t.Parallel()
	jaegertest.Binary(t) // skip or fail before the service starts when there is no Jaeger
	db := servicetest.FixtureDB(t)
	port := servicetest.FreePort(t) // nothing listens there yet: the collector is down
	env := traceEnv(port)
	env["LOG__CONSOLE__FORMAT"] = "plain"
	svc := servicetest.Start(t, db, env)
	const warning = "traces export failed"
	deadline := time.Now().Add(3 * time.Second) // about 30 batches
	for n := 0; time.Now().Before(deadline); n++ {
		start := time.Now()
		if r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil); r.Status != http.StatusOK || len(r.Errors) > 0 {
			t.Fatalf("records_count with the collector down: %d %s", r.Status, r.Raw)
		}
		// Not a measure of speed: a request that waited for the collector would take its
		// OTEL_EXPORTER_OTLP_TIMEOUT (1 s) at least.
		if d := time.Since(start); d > time.Second {
			t.Errorf("request %d took %s with the collector down", n, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	servicetest.WaitFor(t, 10*time.Second, "the unreachable-collector warning", func() bool {
		return strings.Contains(svc.Output(), warning)
	})
	if n := strings.Count(svc.Output(), warning); n != 1 {
		t.Fatalf("the warning appears %d times, want once:\n%s", n, svc.Output())
	}

	jaeger := jaegertest.StartOn(t, port)
	servicetest.WaitFor(t, 20*time.Second, "the recovery line", func() bool {
		svc.Get(t, "/v1/ping", nil)
		return strings.Contains(svc.Output(), "traces export recovered")
	})
	const traceID, parentID = "8cf92f3577b34da6a3ce929d0e0e4740", "b2f067aa0ba902c2"
	const inline, variable = "Inline-Value-8813", "Variable-Value-9924"
	checkJaegerTrace(t, jaegerRequest(t, svc, jaeger, traceID, parentID, inline, variable), parentID)
	noValues(t, jaeger, inline, variable)
	if n := strings.Count(svc.Output(), warning); n != 1 {
		t.Errorf("the warning appears %d times after recovery, want once", n)
	}
}
