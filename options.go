package main

import (
	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/reports"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/keyset"
	"github.com/emsanalytics/emsquery/platform/otel"
)

// The settings reach the packages one way: here, each section of config is translated into the
// options struct that the package using it declares; no package below the root reads config.

func recordLimits(l config.Limits) records.Limits {
	return records.Limits{Columns: int(l.Columns), Filters: int(l.Filters), FilterValues: int(l.FilterValues)}
}

func statsLimits(r records.Limits, l config.Limits) stats.Limits {
	return stats.Limits{Records: r, SeriesPoints: int(l.SeriesPoints), Rows: int(l.MaxRows)}
}

// reportLimits: the largest main_report page is LIMITS__MAX_PAGE_SIZE as platform/keyset reads
// it for the lists.
func reportLimits(r records.Limits, maxPage keyset.MaxPage) reports.Limits {
	return reports.Limits{Records: r, PageSize: int(maxPage)}
}

func exportOptions(l config.Limits, d config.Database) reports.ExportOptions {
	return reports.ExportOptions{MaxConcurrent: int(l.MaxConcurrentExports), PoolMax: int(d.PoolSize + d.MaxOverflow)}
}

// otelOptions: OTEL_* as config.Load read and checked them; app for APP__PORT, which the
// scrape endpoint must not take.
func otelOptions(o config.OTel, app config.App) otel.Options {
	metrics, _ := o.MetricsExporterList() // checked by config.Load
	traces, _ := o.TracesOTLP()
	return otel.Options{
		Disabled:           o.Disabled(),
		MetricsExporters:   metrics,
		TracesOTLP:         traces,
		PrometheusHost:     o.PrometheusHost,
		PrometheusPort:     int(o.PrometheusPort),
		APIPort:            int(app.Port),
		ResourceAttributes: o.ResourceAttributes,
		Sampler:            o.Sampler,
		OTLP: otel.OTLP{
			Protocol:        o.Protocol,
			MetricsProtocol: o.MetricsProtocol,
			TracesProtocol:  o.TracesProtocol,
			Endpoint:        o.Endpoint,
			MetricsEndpoint: o.MetricsEndpoint,
			TracesEndpoint:  o.TracesEndpoint,
			ExportInterval:  o.ExportInterval,
		},
	}
}
