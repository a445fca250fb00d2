// Package gqlserve is the /serve/graphql endpoint of the vendor reporting client: its
// gqlgen-generated executor and the root resolver.
package gqlserve

import (
	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/modules/reports"
)

// Resolver is the endpoint's root.
type Resolver struct {
	Reports     *reports.ServeResolver
	ReportsLive *reports.ServeSubscriptions
}

func (r *Resolver) Query() QueryResolver { return queryResolver{r.Reports} }

func (r *Resolver) Subscription() SubscriptionResolver { return subscriptionResolver{r.ReportsLive} }

type subscriptionResolver struct {
	*reports.ServeSubscriptions
}

type queryResolver struct {
	*reports.ServeResolver
}

// Schema is this endpoint's executable schema; a named type so that wire tells the endpoints
// apart.
type Schema struct{ graphql.ExecutableSchema }

// NewSchema builds the executable schema for the endpoint.
func NewSchema(r *Resolver) Schema { return Schema{NewExecutableSchema(Config{Resolvers: r})} }
