package stats

import "context"

// RecordsCount is the answer of records_count.
type RecordsCount struct {
	Count int64 `json:"count"`
}

// Resolver answers the stats root fields of /graphql.
type Resolver struct {
	repo *Repository
}

func NewResolver(repo *Repository) *Resolver { return &Resolver{repo: repo} }

func (r *Resolver) RecordsCount(ctx context.Context, station *string) (*RecordsCount, error) {
	n, err := r.repo.RecordsCount(ctx, station)
	if err != nil {
		return nil, err
	}
	return &RecordsCount{Count: n}, nil
}
