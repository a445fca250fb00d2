package reports

import (
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// Limits bound what one main_report or export may ask: the record filter (records.Limits) and
// the largest page (LIMITS__MAX_PAGE_SIZE, as platform/keyset reads it for the lists).
type Limits struct {
	Records  records.Limits
	PageSize int
}

// Paging of main_report.
const (
	// DefaultLimit is main_report's page size when limit is omitted. The largest page is the
	// setting LIMITS__MAX_PAGE_SIZE (Limits): a page is for a screen; all rows come from
	// the export.
	DefaultLimit = 100
)

// Page selects which of the ordered matching rows a report returns.
type Page struct {
	// Limit is the number of rows at most; All (negative) means every row from Offset on.
	Limit int64
	// Offset is the number of rows skipped first.
	Offset int64
}

// All as Page.Limit: no limit (the export without a limit parameter).
const All int64 = -1

// Args are the arguments of main_report and of the CSV export, in one Go type whether they came
// as GraphQL arguments (GraphQLArgs) or as query parameters (ParseExportQuery): the records (the
// records module's record filter every record query shares: date range, filters, use_or) and the page.
type Args struct {
	Records records.RecordFilter
	Page    Page
}

// GraphQLArgs returns main_report's arguments: the record filter within lim (see
// Limits.Records); limit defaults to
// DefaultLimit and may be 0 (only the total) to lim.PageSize; offset defaults to 0 and must not
// be negative.
func GraphQLArgs(lim Limits, startDate, endDate string, filters []*records.Filter, useOr *bool, limit, offset *int) (Args, error) {
	f, err := lim.Records.Records(startDate, endDate, useOr, filters)
	if err != nil {
		return Args{}, err
	}
	a := Args{Records: f, Page: Page{Limit: DefaultLimit}}
	if limit != nil {
		if *limit < 0 {
			return Args{}, apierr.BadInput("limit: %d is negative; give 0 to %d rows per page", *limit, lim.PageSize)
		}
		if *limit > lim.PageSize {
			return Args{}, apierr.BadInput("limit: %d rows exceed LIMITS__MAX_PAGE_SIZE=%d; page with offset, or use the CSV export for all rows", *limit, lim.PageSize)
		}
		a.Page.Limit = int64(*limit)
	}
	if offset != nil {
		if *offset < 0 {
			return Args{}, apierr.BadInput("offset: %d is negative; give 0 or more", *offset)
		}
		a.Page.Offset = int64(*offset)
	}
	return a, nil
}

// ExportQuerySyntax describes the export's query parameters; error messages refer to it.
const ExportQuerySyntax = "start_date=YYYY-MM-DD&end_date=YYYY-MM-DD[&use_or=true|false][&filter=column:OPERATOR:value]...[&limit=N][&offset=N]" +
	" (filter=column:IS_NULL, filter=column:IN:[\"a\",\"b\"])"

// ParseExportQuery reads the export's query string (as sent, still percent-encoded):
//
//	start_date=2024-03-01          required, YYYY-MM-DD, first day included
//	end_date=2024-03-31            required, YYYY-MM-DD, last day included
//	use_or=false                   optional, true or false (default false)
//	filter=station:EQUALS:Central  optional, repeatable: column, operator and value separated by
//	                               the first two colons; the value is everything after the
//	                               second colon (it may contain colons, and may be empty);
//	                               column:IS_NULL and column:IS_NOT_NULL have nothing after the
//	                               operator; column:IN:["a","b"] and column:NOT_IN:[...] have
//	                               a JSON array of strings
//	limit=N, offset=N              optional; without limit every matching row is exported
//
// These are main_report's arguments with the same meaning; each filter parameter is one Filter
// input object. Values are percent-encoded as in any URL (a space as %20 or +, a colon may
// stay). Parameters other than these, a parameter given twice (but filter), or a value that is
// not valid UTF-8 are refused. The filters themselves are validated when compiled, as for
// main_report.
func ParseExportQuery(rawQuery string) (Args, error) {
	vals, err := url.ParseQuery(rawQuery)
	if err != nil {
		return Args{}, apierr.BadInput("query string: %v; expected %s", err, ExportQuerySyntax)
	}
	for name, vs := range vals {
		switch name {
		case "start_date", "end_date", "use_or", "limit", "offset":
			if len(vs) > 1 {
				return Args{}, apierr.BadInput("query parameter %s: given %d times; give it once", name, len(vs))
			}
		case "filter":
		default:
			return Args{}, apierr.BadInput("unknown query parameter %s; expected %s", strconv.Quote(name), ExportQuerySyntax)
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return Args{}, apierr.BadInput("query parameter %s: the value is not valid UTF-8", name)
			}
		}
	}
	var a Args
	a.Records.StartDate = vals.Get("start_date")
	a.Records.EndDate = vals.Get("end_date")
	if !vals.Has("start_date") || !vals.Has("end_date") {
		return Args{}, apierr.BadInput("query parameters start_date and end_date are required; expected %s", ExportQuerySyntax)
	}
	if vals.Has("use_or") {
		switch v := vals.Get("use_or"); {
		case strings.EqualFold(v, "true"):
			a.Records.UseOr = true
		case strings.EqualFold(v, "false"):
		default:
			return Args{}, apierr.BadInput("query parameter use_or: %s is not true or false", strconv.Quote(v))
		}
	}
	for i, v := range vals["filter"] {
		fl, err := parseFilter(v)
		if err != nil {
			return Args{}, apierr.BadInput("query parameter filter #%d (%s): %v", i+1, shorten(v), err)
		}
		a.Records.Filters = append(a.Records.Filters, fl)
	}
	a.Page.Limit = All
	if vals.Has("limit") {
		n, err := nonNegative("limit", vals.Get("limit"))
		if err != nil {
			return Args{}, err
		}
		a.Page.Limit = n
	}
	if vals.Has("offset") {
		n, err := nonNegative("offset", vals.Get("offset"))
		if err != nil {
			return Args{}, err
		}
		a.Page.Offset = n
	}
	return a, nil
}

// parseFilter reads column:OPERATOR:value, column:OPERATOR (operators that take no value) or
// column:OPERATOR:["a","b"] (operators that take a list: a JSON array of strings). Whether the
// column takes the operator and the values convert is for records.RecordFilter.Compile to say, as
// for main_report.
func parseFilter(s string) (records.Filter, error) {
	col, rest, ok := strings.Cut(s, ":")
	if !ok {
		return records.Filter{}, errFilterSyntax
	}
	op, value, hasValue := strings.Cut(rest, ":")
	o := records.FilterOperator(op)
	takes, ok := o.Takes()
	if !ok {
		return records.Filter{}, apierr.BadInput("operator %s is not one of %s", strconv.Quote(op), records.OperatorNames())
	}
	fl := records.Filter{Column: col, Operator: o}
	switch {
	case takes == records.NoOperand:
		if hasValue {
			return records.Filter{}, apierr.BadInput("%s takes no value; write %s:%s", o, col, o)
		}
	case !hasValue:
		return records.Filter{}, errFilterSyntax
	case takes == records.ValueList:
		var values []*string // a null in the array is refused, not read as ""
		err := json.Unmarshal([]byte(value), &values)
		if err == nil && values == nil {
			err = errors.New("not an array")
		}
		for i := 0; err == nil && i < len(values); i++ {
			if values[i] == nil {
				err = errors.New("null in the array")
				break
			}
			fl.Values = append(fl.Values, *values[i])
		}
		if err != nil {
			return records.Filter{}, apierr.BadInput("%s takes a JSON array of strings after the second colon, e.g. %s:%s:[\"a\",\"b\"]", o, col, o)
		}
	default:
		fl.Value = &value
	}
	return fl, nil
}

var errFilterSyntax = apierr.BadInput(`expected column:OPERATOR:value, e.g. station:EQUALS:Central (column:IS_NULL, column:IN:["a","b"])`)

func nonNegative(name, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, apierr.BadInput("query parameter %s: %s is not a whole number 0 or more", name, shorten(v))
	}
	return n, nil
}

// shorten quotes a client value for a message, cut when long.
func shorten(s string) string {
	const max = 80
	if utf8.RuneCountInString(s) > max {
		return strconv.Quote(string([]rune(s)[:max])) + "…"
	}
	return strconv.Quote(s)
}
