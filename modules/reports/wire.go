// Package reports serves the vendor reporting client: main_report and main_report_summary on
// /serve/graphql, the drop-down lists and queryable columns on /lookups/graphql, and the main
// report's CSV export on its REST route (route.go), which the server mounts behind the key. It
// selects records with the records module's filter and catalog.
package reports

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewRepository, NewServeResolver, NewServeSubscriptions, NewLookupsResolver, NewExporter, NewExportSlots, NewExportHandler)

// ServeFieldTables are the tables each root field of /serve/graphql reads (queries and
// subscriptions alike): with the replication change source (contract 6.13) their answers
// outlive changes to the other tables. The report's rows join the resource and patient
// dimensions and aggregate fact_oxygen's routes (sql.go); the summary's resources and filters
// join the dimensions.
var ServeFieldTables = map[string][]string{
	"main_report":         {"fact_record", "dim_resource", "dim_patient", "fact_oxygen"},
	"main_report_summary": {"fact_record", "dim_resource", "dim_patient"},
}

// LookupsFieldTables are the tables each root field of /lookups/graphql reads (repository.go's
// lists); columns is the catalog, which reads none.
var LookupsFieldTables = map[string][]string{
	"stations":       {"dim_station"},
	"callsigns":      {"dim_resource"},
	"urgencies":      {"fact_record"},
	"municipalities": {"fact_record"},
	"oxygen_routes":  {"fact_oxygen"},
	"genders":        {"dim_patient"},
	"columns":        {},
}
