// Package otel builds the service's OpenTelemetry signals: the meter provider (NewMeterProvider:
// the exporters that OTEL_METRICS_EXPORTER names, OTLP push, a Prometheus scrape endpoint, both
// or none), the tracer provider (NewTracerProvider: OTLP or none, and Propagator, the W3C
// propagation the service continues), what both share (the resource that identifies the
// service, the quiet log of a collector that cannot be reached), and AttrSets, the attribute
// sets a measurement reuses so that recording it allocates nothing.
//
// The package knows nothing of what is measured or traced: the server, the GraphQL path and the
// database take the providers and create their own instruments and spans.
package otel

// Options are the OpenTelemetry settings the service acts on, for metrics and traces alike (the
// root fills them from the OTEL_* variables, read and checked once). The SDK's exporters and
// resource read the rest of the standard OTEL_* variables (headers, certificates, timeouts,
// temporality, the sampler, OTEL_BSP_*) on their own; the ones here that they also read are
// kept only to decide what to build and what to log.
type Options struct {
	// Disabled is OTEL_SDK_DISABLED=true: no exporter at all.
	Disabled bool
	// MetricsExporters are OTEL_METRICS_EXPORTER's names, checked and deduplicated: "otlp",
	// "prometheus"; none means no metrics export.
	MetricsExporters []string
	// TracesOTLP says that OTEL_TRACES_EXPORTER names otlp.
	TracesOTLP bool
	// PrometheusHost and PrometheusPort are where the scrape endpoint listens
	// (OTEL_EXPORTER_PROMETHEUS_HOST, _PORT); APIPort is APP__PORT, which it must not take.
	PrometheusHost string
	PrometheusPort int
	APIPort        int
	// ResourceAttributes is OTEL_RESOURCE_ATTRIBUTES, quoted in the error when the SDK cannot
	// parse it.
	ResourceAttributes string
	// Sampler is OTEL_TRACES_SAMPLER, for the start-up log.
	Sampler string
	OTLP    OTLP
}

// OTLP is what the start-up log says about the OTLP exporters: their protocol (which exporter
// to build), endpoint and interval. The signal-specific variable wins over the general one.
type OTLP struct {
	Protocol        string // OTEL_EXPORTER_OTLP_PROTOCOL
	MetricsProtocol string // OTEL_EXPORTER_OTLP_METRICS_PROTOCOL
	TracesProtocol  string // OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
	Endpoint        string // OTEL_EXPORTER_OTLP_ENDPOINT
	MetricsEndpoint string // OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
	TracesEndpoint  string // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	ExportInterval  string // OTEL_METRIC_EXPORT_INTERVAL
}
