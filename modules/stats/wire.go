// Package stats answers distinct_values, unique_counts and records_count over mission records.
package stats

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewRepository, NewResolver, NewSubscriptions)
