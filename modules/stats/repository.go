package stats

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
)

// Repository runs the statistics queries over fact_record.
type Repository struct {
	db *database.DB
}

func NewRepository(db *database.DB) *Repository { return &Repository{db: db} }

// The operations of the statistics statements, as db.client.operation.duration names them.
const (
	opRecordsCount   = "records count"
	opDistinctValues = "distinct values"
	opUniqueCounts   = "unique counts"
	opRecordSeries   = "record series"
	opRecordStats    = "record stats"
)

// RecordsCount counts the records of one station, or of all when station is nil.
func (r *Repository) RecordsCount(ctx context.Context, station *string) (int64, error) {
	if station == nil {
		const q = `SELECT count(*) FROM fact_record`
		return r.count(ctx, q)
	}
	if strings.IndexByte(*station, 0) >= 0 {
		// text cannot hold NUL, so no station has this name; PostgreSQL would refuse the value.
		return 0, nil
	}
	// A statement of its own rather than "$1 IS NULL OR station = $1": pgx prepares statements,
	// and the generic plan PostgreSQL settles on after a few runs could not use the index.
	const q = `SELECT count(*) FROM fact_record WHERE station = $1`
	return r.count(ctx, q, *station)
}

func (r *Repository) count(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	if err := r.db.QueryRow(ctx, opRecordsCount, q, args, &n); err != nil {
		return 0, err
	}
	return n, nil
}

// valueRow is one row of the per-column statements: the column's position in the request, the
// number of records (unique counts only) and the value's text form.
type valueRow struct {
	Ord   int32
	Count int64
	Value *string
}

// The per-column branches of distinct_values and unique_counts (see perColumnSQL). Each sorts
// its column's typed values and exposes only its rank k and the value's text form, so branches
// of different types can be put together with UNION ALL.
const (
	distinctBranch = `SELECT %[1]d AS ord, row_number() OVER (ORDER BY c%[1]d ASC NULLS LAST) AS k, 0::bigint AS n, c%[1]d::text AS value FROM m GROUP BY c%[1]d`
	uniqueBranch   = `SELECT %[1]d AS ord, row_number() OVER (ORDER BY count(*) DESC, c%[1]d ASC NULLS LAST) AS k, count(*) AS n, c%[1]d::text AS value FROM m GROUP BY c%[1]d`
)

// DistinctValues returns, for each of cols in order, its distinct values among the records that
// f selects, NULL included, ascending by the column's own type with NULL last.
func (r *Repository) DistinctValues(ctx context.Context, cols []Column, f RecordFilter) ([]*DistinctValue, error) {
	rows, err := r.perColumn(ctx, opDistinctValues, cols, f, distinctBranch)
	if err != nil {
		return nil, err
	}
	out := make([]*DistinctValue, len(rows))
	for i, row := range rows {
		out[i] = &DistinctValue{Column: cols[row.Ord].Name, Value: row.Value}
	}
	return out, nil
}

// UniqueCounts returns, for each of cols in order and each of its distinct values among the
// records that f selects (NULL included), the number of those records with that value; by
// count descending, then value ascending by type with NULL last.
func (r *Repository) UniqueCounts(ctx context.Context, cols []Column, f RecordFilter) ([]*UniqueCount, error) {
	rows, err := r.perColumn(ctx, opUniqueCounts, cols, f, uniqueBranch)
	if err != nil {
		return nil, err
	}
	out := make([]*UniqueCount, len(rows))
	for i, row := range rows {
		out[i] = &UniqueCount{Column: cols[row.Ord].Name, Count: row.Count, Value: row.Value}
	}
	return out, nil
}

// perColumn runs the statement perColumnSQL builds and scans its rows.
func (r *Repository) perColumn(ctx context.Context, op string, cols []Column, f RecordFilter, branch string) ([]valueRow, error) {
	q, args, err := perColumnSQL(cols, f, branch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return database.Collect(ctx, r.db, op, q, args, pgx.RowToStructByPos[valueRow])
}

// perColumnSQL builds one statement for any number of columns: the matching records' values of
// cols as CTE m (columns c0, c1, ...), then branch (a format with the column's position as
// %[1]d) for each column, joined with UNION ALL and ordered by column position, then by the rank
// each branch computed over its typed values.
func perColumnSQL(cols []Column, f RecordFilter, branch string) (string, Args, error) {
	const q = `WITH m AS (SELECT %s FROM %s WHERE %s) SELECT ord, n, value FROM (%s) u ORDER BY ord, k`
	if len(cols) == 0 {
		return "", nil, apierr.BadInput("columns: give at least one column; accepted columns: %s", ColumnNames())
	}
	var args Args
	cond, err := f.Compile(&args)
	if err != nil {
		return "", nil, err
	}
	selects := make([]string, len(cols))
	branches := make([]string, len(cols))
	for i, c := range cols {
		selects[i] = fmt.Sprintf("%s AS c%d", c.Expr(), i)
		branches[i] = fmt.Sprintf(branch, i)
	}
	sql := fmt.Sprintf(q, strings.Join(selects, ", "), cond.From(cols...), cond.SQL, strings.Join(branches, " UNION ALL "))
	return sql, args, nil
}
