//go:build wireinject

package main

import (
	"github.com/google/wire"

	"github.com/emsanalytics/emsquery/app"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/logging"
)

// initService assembles the service from the settings. The cleanup closes, in reverse order,
// what the providers opened (pool, log file).
func initService(cfg *config.Config) (*app.Server, func(), error) {
	wire.Build(
		logging.New,
		database.Open,
		auth.NewChecker,
		stats.ProviderSet,
		app.ProviderSet,
	)
	return nil, nil, nil
}
