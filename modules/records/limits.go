package records

import "github.com/emsanalytics/emsquery/platform/apierr"

// Limits bound what one request may ask of the record query: how many columns, filters and
// values in a filter's list (distinct_values, unique_counts, record_series, record_stats, the
// main report and its export). Each refusal is a BAD_USER_INPUT that names the setting.
type Limits struct {
	Columns      int // LIMITS__MAX_COLUMNS
	Filters      int // LIMITS__MAX_FILTERS
	FilterValues int // LIMITS__MAX_FILTER_VALUES
}

// CheckColumns refuses a list of more than Columns column names, counted as given (a repeated
// name counts each time, although it is answered once); arg names the argument ("columns",
// "group_by").
func (l Limits) CheckColumns(arg string, n int) error {
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
// (the stats and reports modules) reads these arguments.
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
