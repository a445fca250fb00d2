// Package measures answers the EMS performance measures of /graphql (contract 6.12):
// interval_stats, demand_grid, period_comparison and unit_hour_utilization, with small-cell
// suppression, and /lookups/graphql's time_points.
package measures

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewExtensions, NewRepository, NewResolver, NewSubscriptions, NewLookupsResolver)
