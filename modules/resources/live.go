package resources

import (
	"context"

	"github.com/emsanalytics/emsquery/platform/gqlfield"
)

// Subscriptions answers station_resources on /graphql's Subscription (contract 6.11): its
// query, answered again by the GraphQL path whenever the data changes (gqlfield.Live).
type Subscriptions struct{ q *Resolver }

func NewSubscriptions(q *Resolver) *Subscriptions { return &Subscriptions{q: q} }

func (s *Subscriptions) StationResources(ctx context.Context) (<-chan []*StationResources, error) {
	return gqlfield.Live(s.q.StationResources(ctx))
}
