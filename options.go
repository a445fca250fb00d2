package main

import (
	"time"

	"github.com/emsanalytics/emsquery/app"
	"github.com/emsanalytics/emsquery/modules/measures"
	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/reports"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/changes"
	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/follow"
	"github.com/emsanalytics/emsquery/platform/gqllive"
	"github.com/emsanalytics/emsquery/platform/heapfloor"
	"github.com/emsanalytics/emsquery/platform/keyset"
	"github.com/emsanalytics/emsquery/platform/logging"
	"github.com/emsanalytics/emsquery/platform/otel"
)

// The settings reach the packages one way: here, each section of config is translated into the
// options struct that the package using it declares; no package below the root reads config.

// heapFloorOptions: APP__HEAP_FLOOR.
func heapFloorOptions(a config.App) heapfloor.Options {
	return heapfloor.Options{Floor: int64(a.HeapFloor)}
}

func recordLimits(l config.Limits) records.Limits {
	return records.Limits{Columns: int(l.Columns), Filters: int(l.Filters), FilterValues: int(l.FilterValues)}
}

// measuresLimits: the EMS measures' bounds, the record filter's and the rows' and series
// points' as the other grouped fields'.
func measuresLimits(r records.Limits, l config.Limits) measures.Limits {
	return measures.Limits{Records: r, SeriesPoints: int(l.SeriesPoints), Rows: int(l.MaxRows)}
}

// measuresPrivacy: PRIVACY__MIN_CELL, the service-wide small-cell threshold.
func measuresPrivacy(p config.Privacy) measures.Privacy {
	return measures.Privacy{MinCell: int(p.MinCell)}
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

// cacheOptions are the cache's settings; the replication change source hands its committed
// transactions to views, which keep the counting answers' counts up to date (contract 6.13).
func cacheOptions(c config.Cache, views *follow.Views) answercache.Options {
	return answercache.Options{Enabled: bool(c.Enabled), MaxStaleness: c.MaxStaleness.Duration(), MaxBytes: int64(c.MaxBytes), NotifyChannel: string(c.NotifyChannel),
		Changes: changes.Mode(c.Changes), Publication: string(c.Publication), Follower: views}
}

func logOptions(l config.Log) logging.Options {
	return logging.Options{
		Level:       l.Level.Level(),
		Path:        l.Path,
		Console:     bool(l.Console.Enabled),
		ConsoleJSON: l.Console.Format == config.FormatJSON,
		File:        bool(l.File.Enabled),
		Filename:    l.File.Filename,
		MaxSize:     int64(l.File.MaxSize),
		MaxFiles:    int(l.File.MaxFiles),
	}
}

// maxPage is LIMITS__MAX_PAGE_SIZE: the one place it is read.
func maxPage(l config.Limits) keyset.MaxPage { return keyset.MaxPage(l.PageSize) }

func authOptions(a config.Authentication) auth.Options {
	return auth.Options{
		Header:            a.APIKeyHeader.String(),
		APIKey:            a.APIKey.Reveal(),
		KeysFile:          a.APIKeysFile,
		PollInterval:      time.Duration(a.APIKeysPollInterval) * time.Second,
		FailuresPerMinute: int(a.FailuresPerMinute),
	}
}

func databaseOptions(d config.Database) database.Options {
	ports := make([]int, len(d.Ports))
	for i, p := range d.Ports {
		ports[i] = int(p)
	}
	return database.Options{
		Hosts:                  d.Hosts,
		Ports:                  ports,
		TargetSessionAttrs:     database.TargetSessionAttrs(d.TargetSessionAttrs),
		LoadBalanceHosts:       database.LoadBalanceHosts(d.LoadBalanceHosts),
		TransactionPooling:     bool(d.TransactionPooling),
		Name:                   d.Name,
		Username:               d.Username,
		Password:               d.Password.Reveal(),
		Schema:                 d.Schema,
		SSLMode:                database.SSLMode(d.SSLMode),
		Encrypt:                bool(d.Encrypt),
		TrustServerCertificate: bool(d.TrustServerCertificate),
		SSLRootCert:            d.SSLRootCert,
		SSLCert:                d.SSLCert,
		SSLKey:                 d.SSLKey,
		PoolSize:               int(d.PoolSize),
		MaxOverflow:            int(d.MaxOverflow),
		PoolTimeout:            d.PoolTimeout.Duration(),
		PoolRecycle:            d.PoolRecycle.Duration(),
		FromURL:                d.FromURL,
		Params:                 d.Params,
	}
}

func databaseTimeouts(l config.Limits) database.Timeouts {
	return database.Timeouts{StatementTimeout: l.StatementTimeout.Duration(), ExportTimeout: l.ExportTimeout.Duration()}
}

func serverOptions(a config.App, sec config.Security) app.Options {
	return app.Options{
		Host:                    a.Host,
		Port:                    int(a.Port),
		RootPath:                string(a.RootPath),
		HealthChecksEnabled:     bool(a.HealthChecksEnabled),
		MaxBodyBytes:            int64(a.MaxBodyBytes),
		ShutdownTimeout:         a.ShutdownTimeout.Duration(),
		ShutdownDelay:           a.ShutdownDelay.Duration(),
		TrustedProxies:          a.TrustedProxies,
		ReadTimeout:             a.ReadTimeout.Duration(),
		IdleTimeout:             a.IdleTimeout.Duration(),
		WriteTimeout:            a.WriteTimeout.Duration(),
		MaxConnections:          int(a.MaxConnections),
		MaxConnectionsPerClient: int(a.MaxConnectionsPerClient),
		CORSEnabled:             bool(sec.CORS.Enabled),
		CORSAllowOrigins:        sec.CORS.AllowOrigins,
	}
}

func graphQLLimits(l config.Limits) app.GraphQLLimits {
	return app.GraphQLLimits{
		QueryDepth:         int(l.QueryDepth),
		QueryComplexity:    int(l.QueryComplexity),
		MaxRootFields:      int(l.MaxRootFields),
		RequestParallelism: int(l.RequestParallelism),
		RequestTimeout:     l.RequestTimeout.Duration(),
	}
}

// streamsConfig: the live answers' bounds; their questions and answers share CACHE__MAX_BYTES.
func streamsConfig(a config.App, l config.Limits, c config.Cache) gqllive.StreamsConfig {
	return gqllive.StreamsConfig{
		Max:       int(l.MaxStreams),
		MaxPerKey: int(l.MaxStreamsPerKey),
		Heartbeat: a.StreamHeartbeat.Duration(),
		MaxBytes:  int64(c.MaxBytes),
	}
}
