// Package resources answers resources and station_resources: the resource dimension, flat and
// grouped by station.
package resources

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewRepository, NewResolver, NewSubscriptions)
