package measures

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// ComparePeriod is the GraphQL enum ComparePeriod.
type ComparePeriod string

const (
	PreviousYear   ComparePeriod = "PREVIOUS_YEAR"
	PreviousPeriod ComparePeriod = "PREVIOUS_PERIOD"
)

// IsValid reports whether c is one of the enum's values.
func (c ComparePeriod) IsValid() bool { return c == PreviousYear || c == PreviousPeriod }

func (c ComparePeriod) String() string { return string(c) }

// MarshalGQL writes the enum value.
func (c ComparePeriod) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(c))) }

// UnmarshalGQL reads the enum value.
func (c *ComparePeriod) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok || !ComparePeriod(s).IsValid() {
		return apierr.BadInput("compare_to: %v is not a ComparePeriod; accepted: PREVIOUS_YEAR, PREVIOUS_PERIOD", v)
	}
	*c = ComparePeriod(s)
	return nil
}

// PeriodComparison is period_comparison's answer (contract 6.12.5).
type PeriodComparison struct {
	CurrentStart  string       `json:"current_start"`
	CurrentEnd    string       `json:"current_end"`
	PreviousStart string       `json:"previous_start"`
	PreviousEnd   string       `json:"previous_end"`
	Rows          []*PeriodRow `json:"rows"`
}

// PlainJSON declares PeriodComparison written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars and plain types, without resolvers.
func (PeriodComparison) PlainJSON() {}

// PeriodRow is one group_by value's figures in both periods.
type PeriodRow struct {
	Column      *string        `json:"column"`
	Value       *string        `json:"value"`
	Current     *PeriodFigures `json:"current"`
	Previous    *PeriodFigures `json:"previous"`
	Change      *int64         `json:"change"`
	ChangeRatio *float64       `json:"change_ratio"`
}

// PlainJSON declares PeriodRow written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars and plain types, without resolvers.
func (PeriodRow) PlainJSON() {}

// PeriodFigures are one period's figures.
type PeriodFigures struct {
	Count      *int64   `json:"count"`
	Measured   *int64   `json:"measured"`
	Fractile   *float64 `json:"fractile"`
	Share      *float64 `json:"share"`
	Suppressed bool     `json:"suppressed"`
}

// PlainJSON declares PeriodFigures written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars and plain types, without resolvers.
func (PeriodFigures) PlainJSON() {}

// PeriodRequest is period_comparison's arguments.
type PeriodRequest struct {
	Records    records.RecordFilter // the current period's dates, and the filters of both
	CompareTo  ComparePeriod
	GroupBy    *string
	From, To   *TimePoint
	Fractile   float64
	Target     *float64
	MaxSeconds *float64
}

// previousPeriod is the period before start..end (contract 6.12.5). Whole months compare with
// whole months: the same months a year earlier, or as many months just before. Other ranges:
// a year off each date as PostgreSQL's date - interval '1 year' does (29 February becomes 28
// February), or as many days ending the day before start.
func previousPeriod(start, end time.Time, c ComparePeriod) (time.Time, time.Time) {
	wholeMonths := start.Day() == 1 && end.AddDate(0, 0, 1).Day() == 1
	switch {
	case wholeMonths && c == PreviousYear:
		return firstOfMonth(start.Year()-1, start.Month()), lastOfMonth(end.Year()-1, end.Month())
	case wholeMonths:
		months := (end.Year()-start.Year())*12 + int(end.Month()-start.Month()) + 1
		prevStart := firstOfMonth(start.Year(), start.Month()-time.Month(months))
		return prevStart, start.AddDate(0, 0, -1)
	case c == PreviousYear:
		return yearEarlier(start), yearEarlier(end)
	default:
		days := int((end.Unix()-start.Unix())/86400) + 1
		return start.AddDate(0, 0, -days), start.AddDate(0, 0, -1)
	}
}

func firstOfMonth(y int, m time.Month) time.Time { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) }

func lastOfMonth(y int, m time.Month) time.Time { return firstOfMonth(y, m+1).AddDate(0, 0, -1) }

// yearEarlier is d - interval '1 year': the same day a year earlier, the month's last day when
// that year's month is shorter (29 February).
func yearEarlier(d time.Time) time.Time {
	last := lastOfMonth(d.Year()-1, d.Month())
	return time.Date(d.Year()-1, d.Month(), min(d.Day(), last.Day()), 0, 0, 0, 0, time.UTC)
}

// periodStatement is a validated PeriodRequest as one statement.
type periodStatement struct {
	sql       string
	args      records.Args
	group     *records.Column
	intervals bool
	target    bool
	dates     [4]time.Time
}

// The statement of period_comparison: the records of either period (each period's condition
// is its dates and the filters), grouped by the group_by value, each period's figures
// aggregated with FILTER on its own condition, so that a record in both periods (ranges longer
// than a year) counts in both.
const periodSQL = `SELECT %s FROM %s WHERE (%s) OR (%s)%s`

func buildPeriods(f *found, req PeriodRequest, lim Limits) (periodStatement, error) {
	var st periodStatement
	if (req.From == nil) != (req.To == nil) {
		return st, apierr.BadInput("from and to: give both (the interval's time points) or neither")
	}
	if req.Target != nil && req.From == nil {
		return st, apierr.BadInput("target: give from and to as well (the interval the target applies to)")
	}
	if !(req.Fractile >= 0 && req.Fractile <= 1) {
		return st, apierr.BadInput("fractile: %v is not a fraction from 0 to 1 (0.9 is the 90th fractile)", req.Fractile)
	}
	if req.Target != nil && !(*req.Target >= 0) {
		return st, apierr.BadInput("target: %v is negative; a target is a number of seconds, at least 0", *req.Target)
	}
	if err := checkMaxSeconds(req.MaxSeconds); err != nil {
		return st, err
	}
	var interval string
	if req.From != nil {
		var err error
		if interval, err = f.interval(*req.From, *req.To); err != nil {
			return st, err
		}
		st.intervals = true
		st.target = req.Target != nil
	}
	var cols []records.Column
	if req.GroupBy != nil {
		c, err := lookupColumn("group_by", *req.GroupBy)
		if err != nil {
			return st, err
		}
		st.group = &c
		cols = append(cols, c)
	}
	start, err := records.ParseDate("start_date", req.Records.StartDate)
	if err != nil {
		return st, err
	}
	end, err := records.ParseDate("end_date", req.Records.EndDate)
	if err != nil {
		return st, err
	}
	if start.After(end) {
		return st, apierr.BadInput("start_date %s is after end_date %s", req.Records.StartDate, req.Records.EndDate)
	}
	compare := req.CompareTo
	if compare == "" {
		compare = PreviousYear
	}
	prevStart, prevEnd := previousPeriod(start, end, compare)
	st.dates = [4]time.Time{start, end, prevStart, prevEnd}
	if prevStart.Year() < 1 {
		return st, apierr.BadInput("start_date %s: the previous period would start before the year 1", req.Records.StartDate)
	}

	var args records.Args
	cur, err := req.Records.Compile(&args)
	if err != nil {
		return st, err
	}
	prevFilter := req.Records
	prevFilter.StartDate, prevFilter.EndDate = prevStart.Format(time.DateOnly), prevEnd.Format(time.DateOnly)
	prev, err := prevFilter.Compile(&args)
	if err != nil {
		return st, err
	}
	g, err := newGrouping(nil, cols)
	if err != nil {
		return st, err
	}
	sel := append([]string(nil), g.sel...)
	from := cur.From(cols...)
	var ok string
	if st.intervals {
		ok, _ = intervalFilter(req.MaxSeconds, &args)
		from += lateral(interval)
	}
	var fractile, target string
	if st.intervals {
		fractile = args.Add(req.Fractile) + "::float8"
	}
	if st.target {
		target = args.Add(*req.Target) + "::float8"
	}
	for _, period := range []string{cur.SQL, prev.SQL} {
		sel = append(sel, "count(*) FILTER (WHERE "+period+")")
		if st.intervals {
			in := period + " AND " + ok
			sel = append(sel, "count(*) FILTER (WHERE "+in+")",
				"percentile_disc("+fractile+") WITHIN GROUP (ORDER BY iv.s) FILTER (WHERE "+in+")")
			if st.target {
				sel = append(sel, "count(*) FILTER (WHERE "+in+" AND iv.s <= "+target+")")
			}
		}
	}
	st.sql = fmt.Sprintf(periodSQL, strings.Join(sel, ", "), from, cur.SQL, prev.SQL, g.tail())
	st.args = args
	return st, nil
}

// periodSide is one period's figures as the statement returned them.
type periodSide struct {
	count, measured, within int64
	fractile                *float64
}

const opPeriodComparison = "period comparison"

// PeriodComparison compares the period of req with the previous one and suppresses small
// counts.
func (r *Repository) PeriodComparison(ctx context.Context, req PeriodRequest, k threshold, lim Limits) (*PeriodComparison, error) {
	f, err := r.ext.get(ctx)
	if err != nil {
		return nil, err
	}
	st, err := buildPeriods(f, req, lim)
	if err != nil {
		return nil, err
	}
	type row struct {
		value     *string
		cur, prev periodSide
	}
	rows, err := collect(ctx, r.db, opPeriodComparison, st.sql, st.args, lim, func(cr pgx.CollectableRow) (row, error) {
		var (
			x    row
			dest []any
		)
		if st.group != nil {
			dest = append(dest, &x.value)
		}
		for _, s := range []*periodSide{&x.cur, &x.prev} {
			dest = append(dest, &s.count)
			if st.intervals {
				dest = append(dest, &s.measured, &s.fractile)
				if st.target {
					dest = append(dest, &s.within)
				}
			}
		}
		return x, cr.Scan(dest...)
	})
	if err != nil {
		return nil, err
	}
	out := &PeriodComparison{
		CurrentStart: st.dates[0].Format(time.DateOnly), CurrentEnd: st.dates[1].Format(time.DateOnly),
		PreviousStart: st.dates[2].Format(time.DateOnly), PreviousEnd: st.dates[3].Format(time.DateOnly),
		Rows: make([]*PeriodRow, len(rows)),
	}
	for i, x := range rows {
		pr := &PeriodRow{Value: x.value, Current: st.figures(x.cur, k), Previous: st.figures(x.prev, k)}
		if st.group != nil {
			name := st.group.Name
			pr.Column = &name
		}
		if !pr.Current.Suppressed && !pr.Previous.Suppressed {
			change := x.cur.count - x.prev.count
			pr.Change = &change
			if x.prev.count != 0 {
				ratio := float64(change) / float64(x.prev.count)
				pr.ChangeRatio = &ratio
			}
		}
		out.Rows[i] = pr
	}
	return out, nil
}

// figures is one period's figures as published under k.
func (st periodStatement) figures(s periodSide, k threshold) *PeriodFigures {
	f := &PeriodFigures{Suppressed: k.small(s.count) || st.intervals && k.small(s.measured)}
	if f.Suppressed {
		return f
	}
	n := s.count
	f.Count = &n
	if !st.intervals {
		return f
	}
	f.Measured = k.published(s.measured)
	if s.measured > 0 {
		f.Fractile = s.fractile
	}
	if st.target && s.measured > 0 && !k.small(s.within) && !k.small(s.measured-s.within) {
		share := float64(s.within) / float64(s.measured)
		f.Share = &share
	}
	return f
}
