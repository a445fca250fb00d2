package stats

import (
	"context"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
)

// Subscriptions answers the stats fields of /graphql's Subscription (contract 6.11): each is
// its query, answered again by the GraphQL path whenever the data changes (gqlfield.Live).
type Subscriptions struct{ q *Resolver }

func NewSubscriptions(q *Resolver) *Subscriptions { return &Subscriptions{q: q} }

func (s *Subscriptions) RecordsCount(ctx context.Context, station *string) (<-chan *RecordsCount, error) {
	return gqlfield.Live(s.q.RecordsCount(ctx, station))
}

func (s *Subscriptions) DistinctValues(ctx context.Context, columns []string, startDate string, endDate string, useOr *bool, filters []*records.Filter) (<-chan []*DistinctValue, error) {
	return gqlfield.Live(s.q.DistinctValues(ctx, columns, startDate, endDate, useOr, filters))
}

func (s *Subscriptions) UniqueCounts(ctx context.Context, columns []string, startDate string, endDate string, useOr *bool, filters []*records.Filter) (<-chan []*UniqueCount, error) {
	return gqlfield.Live(s.q.UniqueCounts(ctx, columns, startDate, endDate, useOr, filters))
}

func (s *Subscriptions) RecordSeries(ctx context.Context, startDate string, endDate string, bucket TimeBucket, groupBy *string, useOr *bool, filters []*records.Filter) (<-chan []*SeriesPoint, error) {
	return gqlfield.Live(s.q.RecordSeries(ctx, startDate, endDate, bucket, groupBy, useOr, filters))
}

func (s *Subscriptions) RecordStats(ctx context.Context, startDate string, endDate string, measure string, groupBy []string, bucket *TimeBucket, percentiles []float64, target *float64, useOr *bool, filters []*records.Filter) (<-chan []*MeasureStats, error) {
	return gqlfield.Live(s.q.RecordStats(ctx, startDate, endDate, measure, groupBy, bucket, percentiles, target, useOr, filters))
}
