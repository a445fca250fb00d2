package stats

import (
	"context"
	"fmt"

	"github.com/emsanalytics/emsquery/platform/database"
)

// Repository runs the statistics queries over fact_record.
type Repository struct {
	db *database.DB
}

func NewRepository(db *database.DB) *Repository { return &Repository{db: db} }

// RecordsCount counts the records of one station, or of all when station is nil.
func (r *Repository) RecordsCount(ctx context.Context, station *string) (int64, error) {
	// "$1::text IS NULL" keeps one plan for both cases; the planner still uses the station index
	// for a bound name because the statement is re-planned per parameter set when it pays off.
	const q = `SELECT count(*) FROM fact_record WHERE $1::text IS NULL OR station = $1`
	conn, err := r.db.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("records count: %w", err)
	}
	defer conn.Release()
	var n int64
	if err := conn.QueryRow(ctx, q, station).Scan(&n); err != nil {
		return 0, fmt.Errorf("records count: %w", database.Classify(err))
	}
	return n, nil
}
