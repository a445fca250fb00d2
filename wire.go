//go:build wireinject

package main

import (
	"github.com/google/wire"

	"github.com/emsanalytics/emsquery/app"
	"github.com/emsanalytics/emsquery/modules/measures"
	"github.com/emsanalytics/emsquery/modules/patients"
	"github.com/emsanalytics/emsquery/modules/reports"
	"github.com/emsanalytics/emsquery/modules/resources"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/follow"
	"github.com/emsanalytics/emsquery/platform/logging"
	"github.com/emsanalytics/emsquery/platform/otel"
)

// initService assembles the service from the settings. The cleanup closes, in reverse order,
// what the providers opened (keys file watch, cache watch, pool, traces and metrics: scrape
// endpoint and final flush, log file).
func initService(cfg *config.Config, svc otel.Service) (*app.Server, func(), error) {
	wire.Build(
		// The settings' sections, translated (options.go) into the options each package declares.
		wire.FieldsOf(new(*config.Config), "App", "Database", "Security", "Authentication", "Log", "OTel", "Limits", "Cache", "Privacy"),
		logOptions, logging.New,
		otelOptions,
		otel.NewMeterProvider,
		otel.NewTracerProvider,
		databaseOptions, databaseTimeouts, database.Open,
		follow.New,
		cacheOptions, answercache.New,
		authOptions, auth.NewChecker,
		maxPage,
		newStreamedAnswers,
		recordLimits, statsLimits, reportLimits, exportOptions,
		stats.ProviderSet,
		resources.ProviderSet,
		patients.ProviderSet,
		reports.ProviderSet,
		measuresLimits, measuresPrivacy,
		measures.ProviderSet,
		serverOptions, graphQLLimits, streamsConfig,
		app.ProviderSet,
	)
	return nil, nil, nil
}
