package stats

import "context"

// RecordsCount is the answer of records_count.
type RecordsCount struct {
	Count int64 `json:"count"`
}

// DistinctValue is one entry of distinct_values: a value of a column, as the database's text
// form of it (nil for NULL).
type DistinctValue struct {
	Column string  `json:"column"`
	Value  *string `json:"value"`
}

// UniqueCount is one entry of unique_counts: how many matching records have value in column.
type UniqueCount struct {
	Column string  `json:"column"`
	Count  int64   `json:"count"`
	Value  *string `json:"value"`
}

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

func (r *Resolver) DistinctValues(ctx context.Context, columns []string, startDate string, endDate string, useOr *bool, filters []*Filter) ([]*DistinctValue, error) {
	cols, f, err := r.selection(columns, startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	return r.repo.DistinctValues(ctx, cols, f)
}

func (r *Resolver) UniqueCounts(ctx context.Context, columns []string, startDate string, endDate string, useOr *bool, filters []*Filter) ([]*UniqueCount, error) {
	cols, f, err := r.selection(columns, startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	return r.repo.UniqueCounts(ctx, cols, f)
}

// selection turns the shared arguments of distinct_values and unique_counts into the columns
// and the record filter, within the limits; the filter itself is validated when compiled.
func (r *Resolver) selection(columns []string, startDate, endDate string, useOr *bool, filters []*Filter) ([]Column, RecordFilter, error) {
	if err := r.limits.CheckColumns(len(columns)); err != nil {
		return nil, RecordFilter{}, err
	}
	if err := r.limits.CheckFilters(len(filters)); err != nil {
		return nil, RecordFilter{}, err
	}
	cols, err := ResolveColumns(columns)
	if err != nil {
		return nil, RecordFilter{}, err
	}
	f := RecordFilter{StartDate: startDate, EndDate: endDate, UseOr: useOr != nil && *useOr}
	for _, fl := range filters {
		if fl != nil {
			f.Filters = append(f.Filters, *fl)
		}
	}
	return cols, f, nil
}
