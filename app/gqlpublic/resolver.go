// Package gqlpublic is the /graphql endpoint: its gqlgen-generated executor and the root
// resolver that joins the modules' resolvers.
package gqlpublic

import (
	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/modules/stats"
)

// Resolver is the endpoint's root; each module contributes the Query fields of its fragment.
type Resolver struct {
	Stats *stats.Resolver
}

func (r *Resolver) Query() QueryResolver { return queryResolver{r.Stats} }

type queryResolver struct {
	*stats.Resolver
}

// Schema is this endpoint's executable schema; a named type so that wire tells the endpoints
// apart.
type Schema struct{ graphql.ExecutableSchema }

// NewSchema builds the executable schema for the endpoint.
func NewSchema(r *Resolver) Schema { return Schema{NewExecutableSchema(Config{Resolvers: r})} }
