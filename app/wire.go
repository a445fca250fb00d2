package app

import (
	"github.com/google/wire"

	"github.com/emsanalytics/emsquery/app/gqlpublic"
)

var ProviderSet = wire.NewSet(
	NewServer,
	wire.Struct(new(GraphQLEndpoints), "*"),
	gqlpublic.NewSchema, wire.Struct(new(gqlpublic.Resolver), "*"),
)
