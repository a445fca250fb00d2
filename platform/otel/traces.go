package otel

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Propagator reads an incoming W3C traceparent (and tracestate), so that a request continues
// its caller's trace.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// NewTracerProvider returns the tracer provider that OTEL_TRACES_EXPORTER asks for and a cleanup that
// exports the spans still queued. With none (or OTEL_SDK_DISABLED=true) it is a no-op provider:
// spans cost nothing and nothing is sent (an incoming traceparent is still continued, so the
// log lines carry the caller's trace id).
//
// Spans are exported in batches in the background (the SDK's batch span processor, tuned by
// OTEL_BSP_*): a request never waits for the collector, and while the collector cannot be
// reached the queue drops the newest spans rather than grow.
func NewTracerProvider(o Options, log *slog.Logger, svc Service) (trace.TracerProvider, func(), error) {
	if o.Disabled {
		log.Info("traces off (OTEL_SDK_DISABLED=true)")
		return noop.NewTracerProvider(), func() {}, nil
	}
	if !o.TracesOTLP {
		log.Info("traces off (OTEL_TRACES_EXPORTER=none)")
		return noop.NewTracerProvider(), func() {}, nil
	}
	res, err := newResource(svc, o.ResourceAttributes)
	if err != nil {
		return nil, nil, err
	}
	exp, desc, err := newOTLPSpanExporter(o.OTLP)
	if err != nil {
		return nil, nil, err
	}
	elog := newExportLog(log, "traces", reminderInterval)
	// The sampler comes from OTEL_TRACES_SAMPLER and _ARG, which the SDK reads (and
	// the settings have checked); the default samples every request that has no sampled parent
	// and follows the caller's decision otherwise.
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(watchedSpanExporter{exp, elog}),
	)
	sampler := strings.TrimSpace(o.Sampler)
	if sampler == "" {
		sampler = "parentbased_always_on"
	}
	log.Info("traces export: OTLP", append(desc, "sampler", sampler)...)
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			elog.Handle(fmt.Errorf("final flush: %w", err))
		}
	}
	return tp, cleanup, nil
}

// newOTLPSpanExporter builds the OTLP span exporter. Endpoint, headers, timeout, compression and
// certificates come from the SDK's own OTEL_EXPORTER_OTLP_* variables (and their _TRACES_
// variants); the protocol (http/protobuf by default) decides which exporter to build. It
// returns what to log about it (never the headers: they often carry a token).
func newOTLPSpanExporter(o OTLP) (sdktrace.SpanExporter, []any, error) {
	ctx := context.Background()
	key, proto := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", strings.TrimSpace(o.TracesProtocol)
	if proto == "" {
		key, proto = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(o.Protocol)
	}
	if proto == "" {
		proto = "http/protobuf"
	}
	endpoint := firstSet(o.TracesEndpoint, o.Endpoint)
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "http/protobuf":
		if endpoint == "" {
			endpoint = "http://localhost:4318"
		}
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		if endpoint == "" {
			endpoint = "http://localhost:4317"
		}
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, nil, fmt.Errorf("%s: %q is not supported; use http/protobuf or grpc", key, proto)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_*: OTLP span exporter: %w", err)
	}
	return exp, []any{"protocol", proto, "endpoint", redactURL(endpoint)}, nil
}

// watchedSpanExporter reports each export's outcome to the export log: a failure is logged there
// (once, then at most every few minutes) instead of by the SDK's global error handler, which
// would log it once per batch, and a success after failures is logged once.
type watchedSpanExporter struct {
	sdktrace.SpanExporter
	log *exportLog
}

func (w watchedSpanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := w.SpanExporter.ExportSpans(ctx, spans); err != nil {
		w.log.Handle(err)
		return nil // handled: the batch processor would hand it to the global error handler
	}
	w.log.Succeeded()
	return nil
}
