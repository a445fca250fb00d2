// Package stats answers distinct_values, unique_counts and records_count over mission records.
package stats

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewRepository, NewResolver, NewSubscriptions)

// recordTables are the tables of the record query (records.From): fact_record, and the
// dimensions its catalog's columns and filters may join.
var recordTables = []string{"fact_record", "dim_resource", "dim_patient"}

// FieldTables are the tables each root field of the module reads (queries and subscriptions
// alike): with the replication change source (contract 6.13) their answers outlive changes to
// the other tables.
var FieldTables = map[string][]string{
	"records_count":   {"fact_record"}, // countSQL: fact_record, station a column of its own
	"distinct_values": recordTables,
	"unique_counts":   recordTables,
	"record_series":   recordTables,
	"record_stats":    recordTables,
}
