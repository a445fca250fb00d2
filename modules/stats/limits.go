package stats

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
)

// Limits bound what one request may ask of the statistics: the record query's columns and
// filters (records.Limits), how many points a series has, and how many rows an answer has. Each
// refusal is a BAD_USER_INPUT that names the setting.
type Limits struct {
	Records      records.Limits
	SeriesPoints int // LIMITS__MAX_SERIES_POINTS
	// Rows is LIMITS__MAX_ROWS: the most rows one distinct_values, unique_counts or record_stats
	// answer may have (0: no bound, for tests of the statements alone).
	Rows int
}

// rowsSetting names LIMITS__MAX_ROWS in RESULT_TOO_LARGE's message.
const rowsSetting = "LIMITS__MAX_ROWS"

// tooManyRows is the error of an answer past Rows.
func (l Limits) tooManyRows() error { return apierr.TooManyRows(rowsSetting, l.Rows) }

// collect runs a statement whose rows are an answer of at most Rows rows: with a LIMIT of
// Rows+1, so that the database stops there too, and read with database.CollectAtMost, which
// stops at the row past Rows (RESULT_TOO_LARGE, contract 6.10): memory never holds more than
// Rows rows of an answer refused.
func collect[T any](ctx context.Context, db *database.DB, op, q string, args records.Args, l Limits, scan pgx.RowToFunc[T]) ([]T, error) {
	if l.Rows <= 0 {
		return database.Collect(ctx, db, op, q, args, scan)
	}
	q += " LIMIT " + args.Add(l.Rows+1)
	return database.CollectAtMost(ctx, db, op, q, args, l.Rows, l.tooManyRows(), scan)
}

// checkSeriesPoints refuses an answer of more than SeriesPoints points; what says what the
// number counts.
func (l Limits) checkSeriesPoints(n int64, what string) error {
	if n > int64(l.SeriesPoints) {
		return apierr.BadInput("record_series: %d points (%s) exceed LIMITS__MAX_SERIES_POINTS=%d; choose a coarser bucket, a shorter period or a group_by column with fewer values", n, what, l.SeriesPoints)
	}
	return nil
}
