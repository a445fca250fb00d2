package measures

import (
	"context"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
)

// Subscriptions answers the measures' fields of /graphql's Subscription (contract 6.11, 6.12):
// each is its query, answered again whenever the data changes (gqlfield.Live).
type Subscriptions struct{ q *Resolver }

func NewSubscriptions(q *Resolver) *Subscriptions { return &Subscriptions{q: q} }

func (s *Subscriptions) IntervalStats(ctx context.Context, startDate string, endDate string, from TimePoint, to TimePoint, groupBy []string, bucket *stats.TimeBucket, fractiles []float64, fractileMethod *FractileMethod, targets []float64, confidence *float64, maxSeconds *float64, minCell *int, useOr *bool, filters []*records.Filter) (<-chan []*IntervalStats, error) {
	return gqlfield.Live(s.q.IntervalStats(ctx, startDate, endDate, from, to, groupBy, bucket, fractiles, fractileMethod, targets, confidence, maxSeconds, minCell, useOr, filters))
}

func (s *Subscriptions) DemandGrid(ctx context.Context, startDate string, endDate string, percentiles []float64, minCell *int, useOr *bool, filters []*records.Filter) (<-chan *DemandGrid, error) {
	return gqlfield.Live(s.q.DemandGrid(ctx, startDate, endDate, percentiles, minCell, useOr, filters))
}

func (s *Subscriptions) PeriodComparison(ctx context.Context, startDate string, endDate string, compareTo *ComparePeriod, groupBy *string, from *TimePoint, to *TimePoint, fractile *float64, target *float64, maxSeconds *float64, minCell *int, useOr *bool, filters []*records.Filter) (<-chan *PeriodComparison, error) {
	return gqlfield.Live(s.q.PeriodComparison(ctx, startDate, endDate, compareTo, groupBy, from, to, fractile, target, maxSeconds, minCell, useOr, filters))
}

func (s *Subscriptions) UnitHourUtilization(ctx context.Context, startDate string, endDate string, perResource *bool) (<-chan []*UnitHours, error) {
	return gqlfield.Live(s.q.UnitHourUtilization(ctx, startDate, endDate, perResource))
}
