// Package resources answers resources and station_resources: the resource dimension, flat and
// grouped by station.
package resources

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewRepository, NewResolver, NewSubscriptions)

// FieldTables are the tables each root field of the module reads: with the replication change
// source (contract 6.13) their answers outlive loads of the fact tables.
var FieldTables = map[string][]string{
	"resources":         {"dim_resource"},
	"station_resources": {"dim_resource", "dim_station"},
}
