package measures

import (
	"strconv"
	"strings"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// maxFractions bounds fractiles, percentiles and targets (contract 6.12).
const maxFractions = 10

// checkFractions refuses more than maxFractions fractions or one outside 0 to 1; arg names the
// argument.
func checkFractions(arg string, ps []float64) error {
	if len(ps) > maxFractions {
		return apierr.BadInput("%s: %d given; give at most %d", arg, len(ps), maxFractions)
	}
	for i, p := range ps {
		if !(p >= 0 && p <= 1) {
			return apierr.BadInput("%s[%d]: %v is not a fraction from 0 to 1 (0.9 is the 90th percentile)", arg, i, p)
		}
	}
	return nil
}

// groupColumns resolves group_by as record_stats does: at most LIMITS__MAX_COLUMNS names, each
// a queryable column, a name given twice kept once.
func groupColumns(lim Limits, names []string) ([]records.Column, error) {
	if len(names) > lim.Records.Columns {
		return nil, apierr.BadInput("group_by: %d columns exceed LIMITS__MAX_COLUMNS=%d; ask for fewer columns per request", len(names), lim.Records.Columns)
	}
	var out []records.Column
	seen := map[string]bool{}
	for i, name := range names {
		c, err := lookupColumn("group_by["+strconv.Itoa(i)+"]", name)
		if err != nil {
			return nil, err
		}
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	return out, nil
}

func lookupColumn(arg, name string) (records.Column, error) {
	c, ok := records.LookupColumn(name)
	if !ok {
		if len(name) > 80 {
			name = name[:80] + "…"
		}
		return records.Column{}, apierr.BadInput("%s: unknown column %s; accepted columns: %s", arg, strconv.Quote(name), records.ColumnNames())
	}
	return c, nil
}

// bucketSQL is a bucket of the call's occurred_at as SQL: the grouping key and its label, as
// record_series labels buckets (contract 6.2). Every word is the service's own.
func bucketSQL(b stats.TimeBucket) (key, label string, err error) {
	cal := func(unit, format string) (string, string, error) {
		k := "date_trunc('" + unit + "', r.occurred_at)"
		return k, "to_char(" + k + ", '" + format + "')", nil
	}
	cyc := func(field string) (string, string, error) {
		k := "extract(" + field + " FROM r.occurred_at)::integer"
		return k, k + "::text", nil
	}
	switch b {
	case stats.Hour:
		return cal("hour", "YYYY-MM-DD HH24:00")
	case stats.Day:
		return cal("day", "YYYY-MM-DD")
	case stats.Week:
		return cal("week", "YYYY-MM-DD")
	case stats.Month:
		return cal("month", "YYYY-MM")
	case stats.Quarter:
		return cal("quarter", `YYYY-"Q"Q`)
	case stats.Year:
		return cal("year", "YYYY")
	case stats.HourOfDay:
		return cyc("hour")
	case stats.DayOfWeek:
		return cyc("isodow")
	case stats.MonthOfYear:
		return cyc("month")
	}
	return "", "", apierr.BadInput("bucket: %s is not a TimeBucket", strconv.Quote(string(b)))
}

// grouping is the GROUP BY and ORDER BY of a statement grouped by an optional bucket and
// columns: buckets in their natural order, then each column ascending by type, NULL last.
type grouping struct {
	sel  []string // the label and the columns' text forms, in that order
	keys []string
}

func newGrouping(bucket *stats.TimeBucket, cols []records.Column) (grouping, error) {
	var g grouping
	if bucket != nil {
		key, label, err := bucketSQL(*bucket)
		if err != nil {
			return grouping{}, err
		}
		g.sel = append(g.sel, label)
		g.keys = append(g.keys, key)
	}
	for _, c := range cols {
		g.sel = append(g.sel, c.Expr()+"::text")
		g.keys = append(g.keys, c.Expr())
	}
	return g, nil
}

// tail is the statement's GROUP BY and ORDER BY; empty without keys (exactly one row).
func (g grouping) tail() string {
	if len(g.keys) == 0 {
		return ""
	}
	order := make([]string, len(g.keys))
	for i, k := range g.keys {
		order[i] = k + " ASC NULLS LAST"
	}
	return " GROUP BY " + strings.Join(g.keys, ", ") + " ORDER BY " + strings.Join(order, ", ")
}
