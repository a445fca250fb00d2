// Package measures answers the EMS performance measures of /graphql (contract 6.12):
// interval_stats, demand_grid, period_comparison and unit_hour_utilization, with small-cell
// suppression, and /lookups/graphql's time_points.
package measures

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewExtensions, NewRepository, NewResolver, NewSubscriptions, NewLookupsResolver)

// FieldTables are the tables each root field of /graphql of the module reads (queries and
// subscriptions alike): with the replication change source (contract 6.13) their answers
// outlive changes to the other tables. The record query joins the resource and patient
// dimensions for its filters and groups; the first_oxygen time point reads fact_oxygen
// (points.go); unit hours read fact_unit_shift when the database has it.
var FieldTables = map[string][]string{
	"interval_stats":        {"fact_record", "dim_resource", "dim_patient", "fact_oxygen"},
	"period_comparison":     {"fact_record", "dim_resource", "dim_patient", "fact_oxygen"},
	"demand_grid":           {"fact_record", "dim_resource", "dim_patient"},
	"unit_hour_utilization": {"fact_unit_shift", "fact_record", "dim_resource"},
}

// LookupsFieldTables are the tables each root field of /lookups/graphql of the module reads:
// time_points is what the catalog said at start-up, and reads no table.
var LookupsFieldTables = map[string][]string{
	"time_points": {},
}
