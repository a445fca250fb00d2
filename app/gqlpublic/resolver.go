// Package gqlpublic is the /graphql endpoint: its gqlgen-generated executor and the root
// resolver that joins the modules' resolvers.
package gqlpublic

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/modules/measures"
	"github.com/emsanalytics/emsquery/modules/patients"
	"github.com/emsanalytics/emsquery/modules/resources"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
)

// Resolver is the endpoint's root; each module contributes the Query and Subscription fields
// of its fragments.
type Resolver struct {
	Stats         *stats.Resolver
	Resources     *resources.Resolver
	Patients      *patients.Resolver
	Measures      *measures.Resolver
	StatsLive     *stats.Subscriptions
	ResourcesLive *resources.Subscriptions
	MeasuresLive  *measures.Subscriptions
}

func (r *Resolver) Query() QueryResolver {
	return queryResolver{r.Stats, r.Resources, r.Patients, r.Measures}
}

func (r *Resolver) Subscription() SubscriptionResolver {
	return subscriptionResolver{r.StatsLive, r.ResourcesLive, r.MeasuresLive}
}

// subscriptionResolver embeds the modules' subscription resolvers, as queryResolver does.
type subscriptionResolver struct {
	*stats.Subscriptions
	*resourcesSubscriptions
	*measuresSubscriptions
}

type (
	resourcesSubscriptions = resources.Subscriptions
	measuresSubscriptions  = measures.Subscriptions
)

// queryResolver embeds every module's resolver so that their methods make up QueryResolver.
// Embedded fields are named after their type, so all but one module's Resolver go through an
// alias that names the field.
type queryResolver struct {
	*stats.Resolver
	*resourcesResolver
	*patientsResolver
	*measuresResolver
}

type (
	resourcesResolver = resources.Resolver
	patientsResolver  = patients.Resolver
	measuresResolver  = measures.Resolver
)

// Schema is this endpoint's executable schema, with the list fields its executor may resolve
// directly (gqlexec.DirectSchema); a named type so that wire tells the endpoints apart.
type Schema struct {
	graphql.ExecutableSchema
	direct gqlexec.DirectFields
}

// NewSchema builds the executable schema for the endpoint.
func NewSchema(r *Resolver) Schema { return Executable(Config{Resolvers: r}) }

// Executable is the endpoint's executable schema for cfg: gqlgen's, and its whole-table lists
// resolvable directly, each by the resolver method gqlgen's generated code calls for it.
func Executable(cfg Config) Schema {
	s := Schema{ExecutableSchema: NewExecutableSchema(cfg)}
	if cfg.Resolvers == nil {
		return s
	}
	q := cfg.Resolvers.Query()
	s.direct = gqlexec.DirectFields{
		"resources":         func(ctx context.Context) (any, error) { return q.Resources(ctx, nil, nil) },
		"station_resources": func(ctx context.Context) (any, error) { return q.StationResources(ctx) },
		"patients":          func(ctx context.Context) (any, error) { return q.Patients(ctx, nil, nil) },
		"oxygens":           func(ctx context.Context) (any, error) { return q.Oxygens(ctx, nil, nil, nil) },
	}
	return s
}

func (s Schema) DirectFields() gqlexec.DirectFields { return s.direct }
