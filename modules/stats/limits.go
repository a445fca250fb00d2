package stats

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/keyset"
)

// Limits bound what one request may ask of the record query: how many columns, filters and
// values in a filter's list (distinct_values, unique_counts, record_series, record_stats, the
// main report and its export), how many points a series has and, for the reports module, the
// largest main_report page. Each refusal is a BAD_USER_INPUT that names the setting.
type Limits struct {
	Columns      int // LIMITS__MAX_COLUMNS
	Filters      int // LIMITS__MAX_FILTERS
	FilterValues int // LIMITS__MAX_FILTER_VALUES
	PageSize     int // LIMITS__MAX_PAGE_SIZE
	SeriesPoints int // LIMITS__MAX_SERIES_POINTS
	// Rows is LIMITS__MAX_ROWS: the most rows one distinct_values, unique_counts or record_stats
	// answer may have (0: no bound, for tests of the statements alone).
	Rows int
}

// NewLimits takes the limits from the settings; the largest page is LIMITS__MAX_PAGE_SIZE as
// platform/keyset reads it (the one place that setting is read).
func NewLimits(l config.Limits, maxPage keyset.MaxPage) Limits {
	return Limits{
		Columns:      int(l.Columns),
		Filters:      int(l.Filters),
		FilterValues: int(l.FilterValues),
		PageSize:     int(maxPage),
		SeriesPoints: int(l.SeriesPoints),
		Rows:         int(l.MaxRows),
	}
}

// rowsSetting names LIMITS__MAX_ROWS in RESULT_TOO_LARGE's message.
const rowsSetting = "LIMITS__MAX_ROWS"

// tooManyRows is the error of an answer past Rows.
func (l Limits) tooManyRows() error { return apierr.TooManyRows(rowsSetting, l.Rows) }

// collect runs a statement whose rows are an answer of at most Rows rows: with a LIMIT of
// Rows+1, so that the database stops there too, and read with database.CollectAtMost, which
// stops at the row past Rows (RESULT_TOO_LARGE, contract 6.10): memory never holds more than
// Rows rows of an answer refused.
func collect[T any](ctx context.Context, db *database.DB, op, q string, args Args, l Limits, scan pgx.RowToFunc[T]) ([]T, error) {
	if l.Rows <= 0 {
		return database.Collect(ctx, db, op, q, args, scan)
	}
	q += " LIMIT " + args.Add(l.Rows+1)
	return database.CollectAtMost(ctx, db, op, q, args, l.Rows, l.tooManyRows(), scan)
}

// CheckColumns refuses a columns argument of more than Columns names, counted as given (a
// repeated name counts each time, although it is answered once); arg names the argument.
func (l Limits) CheckColumns(n int) error { return l.checkColumns("columns", n) }

func (l Limits) checkColumns(arg string, n int) error {
	if n > l.Columns {
		return apierr.BadInput("%s: %d columns exceed LIMITS__MAX_COLUMNS=%d; ask for fewer columns per request", arg, n, l.Columns)
	}
	return nil
}

// CheckRecords refuses a record filter with more than Filters filters, or a filter with more
// than FilterValues values.
func (l Limits) CheckRecords(f RecordFilter) error {
	if n := len(f.Filters); n > l.Filters {
		return apierr.BadInput("filters: %d filters exceed LIMITS__MAX_FILTERS=%d; combine conditions (IN takes a list) or narrow the dates instead", n, l.Filters)
	}
	for i, fl := range f.Filters {
		if n := len(fl.Values); n > l.FilterValues {
			return apierr.BadInput("filters[%d] (%s): %d values exceed LIMITS__MAX_FILTER_VALUES=%d; split the list or filter by another column", i, fl.Operator, n, l.FilterValues)
		}
	}
	return nil
}

// Records builds the record filter of a GraphQL field's arguments (start_date, end_date,
// use_or, filters) within the limits; Compile validates the rest. It is how every record query
// (here and in the reports module) reads these arguments.
func (l Limits) Records(startDate, endDate string, useOr *bool, filters []*Filter) (RecordFilter, error) {
	f := RecordFilter{StartDate: startDate, EndDate: endDate, UseOr: useOr != nil && *useOr}
	for _, fl := range filters {
		if fl != nil {
			f.Filters = append(f.Filters, *fl)
		}
	}
	if err := l.CheckRecords(f); err != nil {
		return RecordFilter{}, err
	}
	return f, nil
}

// CheckPageSize refuses a page (main_report's limit) of more than PageSize rows.
func (l Limits) CheckPageSize(n int) error {
	if n > l.PageSize {
		return apierr.BadInput("limit: %d rows exceed LIMITS__MAX_PAGE_SIZE=%d; page with offset, or use the CSV export for all rows", n, l.PageSize)
	}
	return nil
}

// checkSeriesPoints refuses an answer of more than SeriesPoints points; what says what the
// number counts.
func (l Limits) checkSeriesPoints(n int64, what string) error {
	if n > int64(l.SeriesPoints) {
		return apierr.BadInput("record_series: %d points (%s) exceed LIMITS__MAX_SERIES_POINTS=%d; choose a coarser bucket, a shorter period or a group_by column with fewer values", n, what, l.SeriesPoints)
	}
	return nil
}
