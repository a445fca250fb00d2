package otel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/contrib/instrumentation/runtime"
	global "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// shutdownTimeout bounds the final flush, so an unreachable collector cannot hold up the exit.
const shutdownTimeout = 5 * time.Second

// cardinalityLimit caps the attribute sets kept per instrument; the rest are counted under
// otel.metric.overflow=true instead of growing memory without bound.
const cardinalityLimit = 2000

// NewMeterProvider returns the meter provider that OTEL_METRICS_EXPORTER asks for and a cleanup
// that stops the scrape endpoint and flushes what is left. With no exporter (none, or
// OTEL_SDK_DISABLED=true) it is a no-op provider: instruments cost nothing and nothing listens
// or is sent.
func NewMeterProvider(o Options, log *slog.Logger, svc Service) (metric.MeterProvider, func(), error) {
	names := o.MetricsExporters
	if o.Disabled {
		log.Info("metrics export off (OTEL_SDK_DISABLED=true)")
		return noop.NewMeterProvider(), func() {}, nil
	}
	if len(names) == 0 {
		log.Info("metrics export off (OTEL_METRICS_EXPORTER=none)")
		return noop.NewMeterProvider(), func() {}, nil
	}

	res, err := newResource(svc, o.ResourceAttributes)
	if err != nil {
		return nil, nil, err
	}
	elog := newExportLog(log, "metrics", reminderInterval)
	global.SetErrorHandler(elog)

	opts := []sdkmetric.Option{
		sdkmetric.WithResource(res),
		sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter),
		sdkmetric.WithCardinalityLimit(cardinalityLimit),
	}
	var scrape *http.Server
	var scrapeLn net.Listener
	for _, name := range names {
		switch name {
		case "otlp":
			exp, desc, err := newOTLPMetricExporter(o.OTLP)
			if err != nil {
				return nil, nil, err
			}
			opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(watchedMetricExporter{exp, elog})))
			log.Info("metrics export: OTLP", desc...)
		case "prometheus":
			reader, srv, ln, err := newPrometheus(o)
			if err != nil {
				return nil, nil, err
			}
			opts = append(opts, sdkmetric.WithReader(reader))
			scrape, scrapeLn = srv, ln
			log.Info("metrics export: Prometheus scrape endpoint", "address", "http://"+ln.Addr().String()+"/metrics")
		}
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	// The Go runtime's own metrics (go.goroutine.count, go.memory.used, ...): what a soak test
	// or an operator watches for leaks.
	if err := runtime.Start(runtime.WithMeterProvider(mp), runtime.WithMinimumReadMemStatsInterval(time.Second)); err != nil {
		return nil, nil, fmt.Errorf("runtime metrics: %w", err)
	}
	if scrape != nil {
		go func() {
			if err := scrape.Serve(scrapeLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics: Prometheus scrape endpoint stopped", "error", err.Error())
			}
		}()
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if scrape != nil {
			_ = scrape.Shutdown(ctx)
		}
		// Shutdown exports what was measured since the last export.
		if err := mp.Shutdown(ctx); err != nil {
			elog.Handle(fmt.Errorf("final flush: %w", err))
		}
	}
	return mp, cleanup, nil
}

// newOTLPMetricExporter builds the OTLP metric exporter. Endpoint, headers, timeout, compression,
// certificates and temporality come from the SDK's own OTEL_EXPORTER_OTLP_* variables; the
// export interval from OTEL_METRIC_EXPORT_INTERVAL (read by the periodic reader). It returns
// what to log about it (never the headers: they often carry a token). The protocol
// (http/protobuf by default) decides which exporter to build.
func newOTLPMetricExporter(o OTLP) (sdkmetric.Exporter, []any, error) {
	ctx := context.Background()
	key, proto := "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", strings.TrimSpace(o.MetricsProtocol)
	if proto == "" {
		key, proto = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(o.Protocol)
	}
	if proto == "" {
		proto = "http/protobuf"
	}
	endpoint := firstSet(o.MetricsEndpoint, o.Endpoint)
	interval := strings.TrimSpace(o.ExportInterval)
	var exp sdkmetric.Exporter
	var err error
	switch proto {
	case "http/protobuf":
		if endpoint == "" {
			endpoint = "http://localhost:4318"
		}
		exp, err = otlpmetrichttp.New(ctx)
	case "grpc":
		if endpoint == "" {
			endpoint = "http://localhost:4317"
		}
		exp, err = otlpmetricgrpc.New(ctx)
	default:
		return nil, nil, fmt.Errorf("%s: %q is not supported; use http/protobuf or grpc", key, proto)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_*: OTLP metric exporter: %w", err)
	}
	if interval == "" {
		interval = "60000"
	}
	return exp, []any{"protocol", proto, "endpoint", redactURL(endpoint), "interval_ms", interval}, nil
}

// newPrometheus builds the pull exporter on a registry of its own and the HTTP server for it,
// already listening: a port in use is a start-up error that names the settings.
func newPrometheus(o Options) (sdkmetric.Reader, *http.Server, net.Listener, error) {
	if o.PrometheusPort == o.APIPort {
		return nil, nil, nil, fmt.Errorf("OTEL_EXPORTER_PROMETHEUS_PORT: %d is the API port (APP__PORT); the scrape endpoint must be on a port of its own", o.PrometheusPort)
	}
	reg := prom.NewRegistry()
	// The process's resident memory, CPU and open files (process_resident_memory_bytes, ...),
	// which the OpenTelemetry runtime metrics lack and the operators' dashboard shows; on the
	// scrape endpoint only.
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, nil, fmt.Errorf("register process metrics: %w", err)
	}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		// Prometheus-style names (http_server_request_duration_seconds) whatever the scraper
		// negotiates, so dashboards and alerts keep working.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
	)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	addr := net.JoinHostPort(o.PrometheusHost, strconv.Itoa(o.PrometheusPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("OTEL_EXPORTER_PROMETHEUS_HOST, OTEL_EXPORTER_PROMETHEUS_PORT: cannot listen on %s for the Prometheus scrape endpoint: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      promErrorLog{},
	}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	return exp, srv, ln, nil
}

// promErrorLog hands promhttp's errors to the OpenTelemetry error handler, which rate-limits them.
type promErrorLog struct{}

func (promErrorLog) Println(v ...any) {
	global.Handle(errors.New(strings.TrimSpace(fmt.Sprintln(v...))))
}

// watchedMetricExporter tells the export log when an export succeeds, so that a recovery after
// failures is logged once.
type watchedMetricExporter struct {
	sdkmetric.Exporter
	log *exportLog
}

func (w watchedMetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := w.Exporter.Export(ctx, rm)
	if err == nil {
		w.log.Succeeded()
	}
	return err
}
