// Package gqllookups is the /lookups/graphql endpoint of the vendor reporting client: its
// gqlgen-generated executor and the root resolver.
package gqllookups

import (
	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/modules/measures"
	"github.com/emsanalytics/emsquery/modules/reports"
)

// Resolver is the endpoint's root.
type Resolver struct {
	Lookups         *reports.LookupsResolver
	MeasuresLookups *measures.LookupsResolver
}

func (r *Resolver) Query() QueryResolver { return queryResolver{r.Lookups, r.MeasuresLookups} }

type queryResolver struct {
	*reports.LookupsResolver
	*measuresLookups
}

type measuresLookups = measures.LookupsResolver

// Schema is this endpoint's executable schema; a named type so that wire tells the endpoints
// apart.
type Schema struct{ graphql.ExecutableSchema }

// NewSchema builds the executable schema for the endpoint.
func NewSchema(r *Resolver) Schema { return Schema{NewExecutableSchema(Config{Resolvers: r})} }
