package stats

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// TimeBucket is the GraphQL enum TimeBucket: how record_series and record_stats put records
// into buckets by occurred_at. Calendar buckets are periods labelled by their start; cyclic
// buckets are a position in the day, week or year, the same for every day, week or year.
type TimeBucket string

const (
	Hour        TimeBucket = "HOUR"
	Day         TimeBucket = "DAY"
	Week        TimeBucket = "WEEK"
	Month       TimeBucket = "MONTH"
	Quarter     TimeBucket = "QUARTER"
	Year        TimeBucket = "YEAR"
	HourOfDay   TimeBucket = "HOUR_OF_DAY"
	DayOfWeek   TimeBucket = "DAY_OF_WEEK"
	MonthOfYear TimeBucket = "MONTH_OF_YEAR"
)

// bucketSpec is one bucket of contract section 6.2. Every SQL word here is the service's own;
// none comes from a request.
type bucketSpec struct {
	b TimeBucket
	// Calendar buckets: the date_trunc unit and the step between two bucket starts.
	unit string
	step string
	// Cyclic buckets: the extract field and its values, first to last.
	field    string
	min, max int
}

var buckets = []bucketSpec{
	{b: Hour, unit: "hour", step: "1 hour"},
	{b: Day, unit: "day", step: "1 day"},
	{b: Week, unit: "week", step: "7 days"}, // date_trunc('week') is the ISO week's Monday
	{b: Month, unit: "month", step: "1 month"},
	{b: Quarter, unit: "quarter", step: "3 months"},
	{b: Year, unit: "year", step: "1 year"},
	{b: HourOfDay, field: "hour", min: 0, max: 23},
	{b: DayOfWeek, field: "isodow", min: 1, max: 7}, // ISO: 1 Monday to 7 Sunday
	{b: MonthOfYear, field: "month", min: 1, max: 12},
}

func (b TimeBucket) spec() (bucketSpec, bool) {
	for _, s := range buckets {
		if s.b == b {
			return s, true
		}
	}
	return bucketSpec{}, false
}

// TimeBuckets lists every bucket in the enum's order.
func TimeBuckets() []TimeBucket {
	out := make([]TimeBucket, len(buckets))
	for i, s := range buckets {
		out[i] = s.b
	}
	return out
}

// IsValid reports whether b is one of the enum's values.
func (b TimeBucket) IsValid() bool { _, ok := b.spec(); return ok }

func (b TimeBucket) String() string { return string(b) }

// MarshalGQL writes the enum value.
func (b TimeBucket) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(b))) }

// UnmarshalGQL reads the enum value.
func (b *TimeBucket) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok || !TimeBucket(s).IsValid() {
		names := make([]string, len(buckets))
		for i, s := range buckets {
			names[i] = string(s.b)
		}
		return apierr.BadInput("bucket: %v is not a TimeBucket; accepted: %s", v, strings.Join(names, ", "))
	}
	*b = TimeBucket(s)
	return nil
}

func (s bucketSpec) cyclic() bool { return s.field != "" }

// expr is the bucket of a record as SQL over the record query's alias: the start of its
// calendar bucket (timestamp) or its place in the cycle (integer).
func (s bucketSpec) expr() string {
	if s.cyclic() {
		return "extract(" + s.field + " FROM r.occurred_at)::integer"
	}
	return "date_trunc('" + s.unit + "', r.occurred_at)"
}

// truncate is date_trunc(unit, t) in Go, for the calendar buckets.
func (s bucketSpec) truncate(t time.Time) time.Time {
	y, m, d := t.Date()
	switch s.b {
	case Hour:
		return time.Date(y, m, d, t.Hour(), 0, 0, 0, time.UTC)
	case Day:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case Week:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		return time.Date(y, m, d-back, 0, 0, 0, 0, time.UTC)
	case Month:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	case Quarter:
		return time.Date(y, m-(m-1)%3, 1, 0, 0, 0, 0, time.UTC)
	default: // Year
		return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
	}
}

// span returns the calendar buckets that overlap the days start..end (both included, at
// midnight): the first and the last bucket's start and how many buckets there are.
func (s bucketSpec) span(start, end time.Time) (first, last time.Time, n int64) {
	first = s.truncate(start)
	switch s.b {
	case Hour:
		last = end.Add(23 * time.Hour)
		n = (days(start, end) + 1) * 24
	case Day:
		last = end
		n = days(start, end) + 1
	case Week:
		last = s.truncate(end)
		n = days(first, last)/7 + 1
	case Month, Quarter, Year:
		last = s.truncate(end)
		months := int64(last.Year()-first.Year())*12 + int64(last.Month()-first.Month())
		n = months/map[TimeBucket]int64{Month: 1, Quarter: 3, Year: 12}[s.b] + 1
	}
	return first, last, n
}

// days is the number of days from a to b, both at midnight; in seconds rather than a
// time.Duration, which reaches only 292 years.
func days(a, b time.Time) int64 { return (b.Unix() - a.Unix()) / 86400 }

// count is the number of buckets over the days start..end.
func (s bucketSpec) count(start, end time.Time) int64 {
	if s.cyclic() {
		return int64(s.max - s.min + 1)
	}
	_, _, n := s.span(start, end)
	return n
}

// label is a bucket's name in answers: the start of a calendar bucket written as contract
// section 6.2 says (HOUR "YYYY-MM-DD HH:00", DAY and WEEK "YYYY-MM-DD", MONTH "YYYY-MM",
// QUARTER "YYYY-Qn", YEAR "YYYY"), or the number of a cyclic one.
func (s bucketSpec) label(start time.Time, n int32) string {
	switch s.b {
	case Hour:
		return start.Format("2006-01-02 15:00")
	case Day, Week:
		return start.Format(time.DateOnly)
	case Month:
		return start.Format("2006-01")
	case Quarter:
		return start.Format("2006") + "-Q" + strconv.Itoa((int(start.Month())+2)/3)
	case Year:
		return start.Format("2006")
	}
	return strconv.Itoa(int(n))
}

// labelOf names a bucket as a statement returned it: a calendar bucket's start (timestamp) or
// a cyclic bucket's number (integer).
func (s bucketSpec) labelOf(b any) string {
	switch x := b.(type) {
	case time.Time:
		return s.label(x, 0)
	case int32:
		return s.label(time.Time{}, x)
	}
	return fmt.Sprint(b)
}
