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
	"github.com/emsanalytics/emsquery/platform/keyset"
	"github.com/emsanalytics/emsquery/platform/logging"
	"github.com/emsanalytics/emsquery/platform/metrics"
	"github.com/emsanalytics/emsquery/platform/telemetry"
	"github.com/emsanalytics/emsquery/platform/tracing"
)

// initService assembles the service from the settings. The cleanup closes, in reverse order,
// what the providers opened (keys file watch, cache watch, pool, traces and metrics: scrape
// endpoint and final flush, log file).
func initService(cfg *config.Config, svc telemetry.Service) (*app.Server, func(), error) {
	wire.Build(
		// Each provider takes the part of the settings it uses.
		wire.FieldsOf(new(*config.Config), "App", "Database", "Security", "Authentication", "Log", "Metrics", "Traces", "Limits", "Cache", "Privacy"),
		logging.New,
		metrics.New,
		tracing.New,
		database.Open,
		answercache.New,
		auth.NewChecker,
		keyset.NewMaxPage,
		newStreamedAnswers,
		stats.ProviderSet,
		resources.ProviderSet,
		patients.ProviderSet,
		reports.ProviderSet,
		measures.ProviderSet,
		app.ProviderSet,
	)
	return nil, nil, nil
}
