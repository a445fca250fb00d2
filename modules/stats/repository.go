package stats

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/follow"
)

// Repository runs the statistics queries over fact_record, or answers the counting ones from
// followed counts (follow.go).
type Repository struct {
	db    *database.DB
	views *follow.Views // nil: nothing followed
	coll  *records.Collator
}

// NewRepository returns the repository; views (may be nil) keeps the counting answers' counts
// up to date from the changed rows.
func NewRepository(db *database.DB, views *follow.Views) *Repository {
	return &Repository{db: db, views: views, coll: records.NewCollator(db, views.Generation)}
}

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
	if station != nil && strings.IndexByte(*station, 0) >= 0 {
		// text cannot hold NUL, so no station has this name; PostgreSQL would refuse the value.
		return 0, nil
	}
	n, followed, ok := r.followedCount(ctx, station)
	r.views.Count(ctx, fieldRecordsCount, followed)
	if ok {
		return n, nil
	}
	if station == nil {
		const q = `SELECT count(*) FROM fact_record`
		return r.count(ctx, q)
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

// valueRow is one row of the per-column statement: the position of its column among the
// statement's distinct columns, the number of records (unique counts only) and the value's text
// form.
type valueRow struct {
	Ord   int32
	Count int64
	Value *string
}

// DistinctValues returns, for each of cols in order, its distinct values among the records that
// f selects, NULL included, ascending by the column's own type with NULL last.
func (r *Repository) DistinctValues(ctx context.Context, cols []records.Column, f records.RecordFilter, lim Limits) ([]*DistinctValue, error) {
	perCol, err := r.perColumn(ctx, opDistinctValues, fieldDistinctValues, cols, f, false, lim)
	if err != nil {
		return nil, err
	}
	out := make([]*DistinctValue, 0, rowCount(perCol))
	for i, rows := range perCol {
		for _, row := range rows {
			out = append(out, &DistinctValue{Column: cols[i].Name, Value: row.Value})
		}
	}
	return out, nil
}

// UniqueCounts returns, for each of cols in order and each of its distinct values among the
// records that f selects (NULL included), the number of those records with that value; by
// count descending, then value ascending by type with NULL last.
func (r *Repository) UniqueCounts(ctx context.Context, cols []records.Column, f records.RecordFilter, lim Limits) ([]*UniqueCount, error) {
	perCol, err := r.perColumn(ctx, opUniqueCounts, fieldUniqueCounts, cols, f, true, lim)
	if err != nil {
		return nil, err
	}
	out := make([]*UniqueCount, 0, rowCount(perCol))
	for i, rows := range perCol {
		for _, row := range rows {
			out = append(out, &UniqueCount{Column: cols[i].Name, Count: row.Count, Value: row.Value})
		}
	}
	return out, nil
}

// rowCount is the number of rows of all columns together.
func rowCount(perCol [][]valueRow) int {
	n := 0
	for _, rows := range perCol {
		n += len(rows)
	}
	return n
}

// perColumn runs the statement perColumnSQL builds for the distinct columns of cols and returns
// the rows of each of cols, in order: a column asked for twice gets its rows twice, from one
// grouping set. An answer of more than lim.Rows rows, counted as answered (a column asked for
// twice counts twice), is RESULT_TOO_LARGE.
func (r *Repository) perColumn(ctx context.Context, op, field string, cols []records.Column, f records.RecordFilter, counted bool, lim Limits) ([][]valueRow, error) {
	var distinct []records.Column
	set := make([]int, len(cols))
	for i, c := range cols {
		set[i] = slices.IndexFunc(distinct, func(d records.Column) bool { return d.Name == c.Name })
		if set[i] < 0 {
			set[i] = len(distinct)
			distinct = append(distinct, c)
		}
	}
	q, args, err := perColumnSQL(distinct, f, counted)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if perSet, followed, ok := r.followedColumns(ctx, distinct, f, counted); ok {
		out := make([][]valueRow, len(cols))
		for i := range cols {
			out[i] = perSet[set[i]]
		}
		// A refusal is the statement's own (below).
		if lim.Rows <= 0 || rowCount(out) <= lim.Rows {
			r.views.Count(ctx, field, followed)
			return out, nil
		}
	}
	r.views.Count(ctx, field, false)
	rows, err := collect(ctx, r.db, op, q, args, lim, pgx.RowToStructByPos[valueRow])
	if err != nil {
		return nil, err
	}
	// The rows come ordered by set: split them.
	perSet := make([][]valueRow, len(distinct))
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Ord == rows[start].Ord {
			end++
		}
		perSet[rows[start].Ord] = rows[start:end]
		start = end
	}
	out := make([][]valueRow, len(cols))
	for i := range cols {
		out[i] = perSet[set[i]]
	}
	if lim.Rows > 0 && rowCount(out) > lim.Rows {
		return nil, fmt.Errorf("%s: %w", op, lim.tooManyRows())
	}
	return out, nil
}

// perColumnSQL builds one statement for any number of distinct columns: the matching records
// grouped by GROUPING SETS, one set per column, so that PostgreSQL reads the records once and
// hashes (or sorts) each column's values, as a DBA would write it. An earlier form materialized
// the records' values as a CTE and grouped it once per column (UNION ALL): the CTE's tuplestore
// outgrew work_mem and spilled to disk with a few hundred thousand records (a month of the
// 10,000,000-record demo data), which took twice the time of this statement.
//
// Each row's column is the one set whose GROUPING() is 0 (ord, its position in cols); in that
// set every other column is the grouping's NULL, so ordering by the typed columns one after the
// other orders each set by its own column's type, NULL last. unique counts (counted) order each
// set by count first.
func perColumnSQL(cols []records.Column, f records.RecordFilter, counted bool) (string, records.Args, error) {
	const q = `SELECT %s AS ord, %s AS n, %s AS value FROM %s WHERE %s GROUP BY GROUPING SETS (%s) ORDER BY %s`
	if len(cols) == 0 {
		return "", nil, apierr.BadInput("columns: give at least one column; accepted columns: %s", records.ColumnNames())
	}
	var args records.Args
	cond, err := f.Compile(&args)
	if err != nil {
		return "", nil, err
	}
	var ord, value strings.Builder
	ord.WriteString("CASE")
	value.WriteString("CASE")
	sets := make([]string, len(cols))
	order := []string{"ord"}
	n := "0::bigint"
	if counted {
		n = "count(*)"
		order = append(order, "n DESC")
	}
	for i, c := range cols {
		e := c.Expr()
		fmt.Fprintf(&ord, " WHEN GROUPING(%s) = 0 THEN %d", e, i)
		fmt.Fprintf(&value, " WHEN GROUPING(%s) = 0 THEN %s::text", e, e)
		sets[i] = "(" + e + ")"
		order = append(order, e+" ASC NULLS LAST")
	}
	ord.WriteString(" END")
	value.WriteString(" END")
	sql := fmt.Sprintf(q, ord.String(), n, value.String(), cond.From(cols...), cond.SQL, strings.Join(sets, ", "), strings.Join(order, ", "))
	return sql, args, nil
}
