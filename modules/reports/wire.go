// Package reports serves the vendor reporting client: main_report and main_report_summary on
// /serve/graphql, the drop-down lists and queryable columns on /lookups/graphql, and the main
// report's CSV export on its REST route (route.go), which the server mounts behind the key. It
// selects records with the records module's filter and catalog.
package reports

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewRepository, NewServeResolver, NewServeSubscriptions, NewLookupsResolver, NewExporter, NewExportSlots, NewExportHandler)
