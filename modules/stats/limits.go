package stats

import (
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/config"
)

// Limits bound what one request may ask of the record query: how many columns and filters
// (distinct_values, unique_counts, the main report and its export) and, for the reports module,
// the largest main_report page. Each refusal is a BAD_USER_INPUT that names the setting.
type Limits struct {
	Columns  int // LIMITS__MAX_COLUMNS
	Filters  int // LIMITS__MAX_FILTERS
	PageSize int // LIMITS__MAX_PAGE_SIZE
}

// NewLimits takes the limits from the settings.
func NewLimits(l config.Limits) Limits {
	return Limits{
		Columns:  int(l.Columns),
		Filters:  int(l.Filters),
		PageSize: int(l.PageSize),
	}
}

// CheckColumns refuses a columns argument of more than Columns names, counted as given (a
// repeated name counts each time, although it is answered once).
func (l Limits) CheckColumns(n int) error {
	if n > l.Columns {
		return apierr.BadInput("columns: %d columns exceed LIMITS__MAX_COLUMNS=%d; ask for fewer columns per request", n, l.Columns)
	}
	return nil
}

// CheckFilters refuses more than Filters filters.
func (l Limits) CheckFilters(n int) error {
	if n > l.Filters {
		return apierr.BadInput("filters: %d filters exceed LIMITS__MAX_FILTERS=%d; combine conditions or narrow the dates instead", n, l.Filters)
	}
	return nil
}

// CheckPageSize refuses a page (main_report's limit) of more than PageSize rows.
func (l Limits) CheckPageSize(n int) error {
	if n > l.PageSize {
		return apierr.BadInput("limit: %d rows exceed LIMITS__MAX_PAGE_SIZE=%d; page with offset, or use the CSV export for all rows", n, l.PageSize)
	}
	return nil
}
