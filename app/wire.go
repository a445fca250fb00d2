package app

import (
	"github.com/google/wire"

	"github.com/emsanalytics/emsquery/app/gqllookups"
	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/app/gqlserve"
)

var ProviderSet = wire.NewSet(
	NewServer,
	NewStreams,
	wire.Struct(new(GraphQLEndpoints), "*"),
	gqlpublic.NewSchema, wire.Struct(new(gqlpublic.Resolver), "*"),
	gqlserve.NewSchema, wire.Struct(new(gqlserve.Resolver), "*"),
	gqllookups.NewSchema, wire.Struct(new(gqllookups.Resolver), "*"),
)
