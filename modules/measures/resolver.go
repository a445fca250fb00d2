package measures

import (
	"context"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/stats"
)

// Resolver answers the measures' root fields of /graphql.
type Resolver struct {
	repo    *Repository
	limits  Limits
	privacy Privacy
}

func NewResolver(repo *Repository, limits Limits, privacy Privacy) *Resolver {
	return &Resolver{repo: repo, limits: limits, privacy: privacy}
}

func (r *Resolver) IntervalStats(ctx context.Context, startDate string, endDate string, from TimePoint, to TimePoint, groupBy []string, bucket *stats.TimeBucket, fractiles []float64, fractileMethod *FractileMethod, targets []float64, confidence *float64, maxSeconds *float64, minCell *int, useOr *bool, filters []*records.Filter) ([]*IntervalStats, error) {
	k, err := r.privacy.threshold(ctx, minCell)
	if err != nil {
		return nil, err
	}
	f, err := r.limits.Records.Records(startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	req := IntervalRequest{Records: f, From: from, To: to, GroupBy: groupBy, Bucket: bucket, Fractiles: fractiles,
		Targets: targets, Confidence: 0.95, MaxSeconds: maxSeconds, Method: NearestRank}
	if fractileMethod != nil {
		req.Method = *fractileMethod
	}
	if confidence != nil {
		req.Confidence = *confidence
	}
	return r.repo.IntervalStats(ctx, req, k, r.limits)
}

func (r *Resolver) DemandGrid(ctx context.Context, startDate string, endDate string, percentiles []float64, minCell *int, useOr *bool, filters []*records.Filter) (*DemandGrid, error) {
	k, err := r.privacy.threshold(ctx, minCell)
	if err != nil {
		return nil, err
	}
	f, err := r.limits.Records.Records(startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	return r.repo.DemandGrid(ctx, f, percentiles, k, r.limits)
}

func (r *Resolver) PeriodComparison(ctx context.Context, startDate string, endDate string, compareTo *ComparePeriod, groupBy *string, from *TimePoint, to *TimePoint, fractile *float64, target *float64, maxSeconds *float64, minCell *int, useOr *bool, filters []*records.Filter) (*PeriodComparison, error) {
	k, err := r.privacy.threshold(ctx, minCell)
	if err != nil {
		return nil, err
	}
	f, err := r.limits.Records.Records(startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	req := PeriodRequest{Records: f, CompareTo: PreviousYear, GroupBy: groupBy, From: from, To: to, Fractile: 0.9, Target: target, MaxSeconds: maxSeconds}
	if compareTo != nil {
		req.CompareTo = *compareTo
	}
	if fractile != nil {
		req.Fractile = *fractile
	}
	return r.repo.PeriodComparison(ctx, req, k, r.limits)
}

func (r *Resolver) UnitHourUtilization(ctx context.Context, startDate string, endDate string, perResource *bool) ([]*UnitHours, error) {
	return r.repo.UnitHourUtilization(ctx, startDate, endDate, perResource != nil && *perResource, r.limits)
}

// LookupsResolver answers /lookups/graphql's time_points.
type LookupsResolver struct{ ext *Extensions }

func NewLookupsResolver(ext *Extensions) *LookupsResolver { return &LookupsResolver{ext: ext} }

func (r *LookupsResolver) TimePoints(ctx context.Context) ([]*TimePointSource, error) {
	return r.ext.TimePoints(ctx)
}
