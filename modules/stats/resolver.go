package stats

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
)

// RecordsCount is the answer of records_count.
type RecordsCount struct {
	Count int64 `json:"count"`
}

// PlainJSON declares RecordsCount written to JSON by the GraphQL path itself (gqljson.Plain):
// its field is a json-tagged built-in scalar.
func (RecordsCount) PlainJSON() {}

// DistinctValue is one entry of distinct_values: a value of a column, as the database's text
// form of it (nil for NULL).
type DistinctValue struct {
	Column string  `json:"column"`
	Value  *string `json:"value"`
}

// PlainJSON declares DistinctValue written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (DistinctValue) PlainJSON() {}

// UniqueCount is one entry of unique_counts: how many matching records have value in column.
type UniqueCount struct {
	Column string  `json:"column"`
	Count  int64   `json:"count"`
	Value  *string `json:"value"`
}

// PlainJSON declares UniqueCount written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (UniqueCount) PlainJSON() {}

// Resolver answers the stats root fields of /graphql.
type Resolver struct {
	repo   *Repository
	limits Limits
}

func NewResolver(repo *Repository, limits Limits) *Resolver {
	return &Resolver{repo: repo, limits: limits}
}

func (r *Resolver) RecordsCount(ctx context.Context, station *string) (*RecordsCount, error) {
	n, err := r.repo.RecordsCount(ctx, station)
	if err != nil {
		return nil, err
	}
	return &RecordsCount{Count: n}, nil
}

func (r *Resolver) DistinctValues(ctx context.Context, columns []string, startDate string, endDate string, useOr *bool, filters []*records.Filter) ([]*DistinctValue, error) {
	cols, f, err := r.selection(columns, startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	return r.repo.DistinctValues(ctx, cols, f, r.limits)
}

func (r *Resolver) UniqueCounts(ctx context.Context, columns []string, startDate string, endDate string, useOr *bool, filters []*records.Filter) ([]*UniqueCount, error) {
	cols, f, err := r.selection(columns, startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	return r.repo.UniqueCounts(ctx, cols, f, r.limits)
}

// selection turns the shared arguments of distinct_values and unique_counts into the columns
// and the record filter, within the limits; the filter itself is validated when compiled.
func (r *Resolver) selection(columns []string, startDate, endDate string, useOr *bool, filters []*records.Filter) ([]records.Column, records.RecordFilter, error) {
	if err := r.limits.Records.CheckColumns("columns", len(columns)); err != nil {
		return nil, records.RecordFilter{}, err
	}
	f, err := r.limits.Records.Records(startDate, endDate, useOr, filters)
	if err != nil {
		return nil, records.RecordFilter{}, err
	}
	cols, err := records.ResolveColumns(columns)
	if err != nil {
		return nil, records.RecordFilter{}, err
	}
	return cols, f, nil
}

func (r *Resolver) RecordSeries(ctx context.Context, startDate string, endDate string, bucket TimeBucket, groupBy *string, useOr *bool, filters []*records.Filter) ([]*SeriesPoint, error) {
	f, err := r.limits.Records.Records(startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	req := SeriesRequest{Records: f, Bucket: bucket, GroupBy: groupBy}
	// Thousands of points (a year of days by urgency) are written to JSON from the database's
	// bytes; the decoding path would cost a SeriesPoint, a label and several values each.
	return gqlfield.List(ctx, r.repo.SeriesList(req, r.limits), false)
}

func (r *Resolver) RecordStats(ctx context.Context, startDate string, endDate string, measure string, groupBy []string, bucket *TimeBucket, percentiles []float64, target *float64, useOr *bool, filters []*records.Filter) ([]*MeasureStats, error) {
	f, err := r.limits.Records.Records(startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	req := StatsRequest{Records: f, Measure: measure, GroupBy: groupBy, Bucket: bucket, Percentiles: percentiles, Target: target, Want: wantedFigures(ctx)}
	return r.repo.RecordStats(ctx, req, r.limits)
}

// wantedFigures says which of record_stats' optional figures the query selects, so that the
// statement computes only those (a percentile costs a sort per group; min, max and avg are
// cheap but not free). Outside a GraphQL request: all of them.
func wantedFigures(ctx context.Context) StatsFigures {
	if graphql.GetFieldContext(ctx) == nil {
		return AllFigures
	}
	var w StatsFigures
	for _, f := range graphql.CollectFieldsCtx(ctx, nil) {
		switch f.Name {
		case "min", "max", "avg":
			w.MinMaxAvg = true
		case "percentiles":
			w.Percentiles = true
		case "within_target", "within_target_share":
			w.Target = true
		}
	}
	return w
}
