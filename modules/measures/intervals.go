package measures

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
)

// IntervalStats is one object of interval_stats (contract 6.12.1).
type IntervalStats struct {
	Bucket     *string            `json:"bucket"`
	Group      []stats.GroupValue `json:"group"`
	Count      *int64             `json:"count"`
	Measured   *int64             `json:"measured"`
	Excluded   *int64             `json:"excluded"`
	Min        *float64           `json:"min"`
	Max        *float64           `json:"max"`
	Avg        *float64           `json:"avg"`
	Fractiles  []stats.Percentile `json:"fractiles"`
	Compliance []Compliance       `json:"compliance"`
	Suppressed bool               `json:"suppressed"`
}

// PlainJSON declares IntervalStats written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars and plain types, without resolvers.
func (IntervalStats) PlainJSON() {}

// Compliance is the share of the measured intervals within one target, with its Wilson score
// interval (contract 6.12.2).
type Compliance struct {
	Target     float64  `json:"target"`
	Within     *int64   `json:"within"`
	Share      *float64 `json:"share"`
	CiLow      *float64 `json:"ci_low"`
	CiHigh     *float64 `json:"ci_high"`
	Suppressed bool     `json:"suppressed"`
}

// PlainJSON declares Compliance written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars and plain types, without resolvers.
func (Compliance) PlainJSON() {}

// FractileMethod is the GraphQL enum FractileMethod.
type FractileMethod string

const (
	NearestRank FractileMethod = "NEAREST_RANK"
	Linear      FractileMethod = "LINEAR"
)

// IsValid reports whether m is one of the enum's values.
func (m FractileMethod) IsValid() bool { return m == NearestRank || m == Linear }

func (m FractileMethod) String() string { return string(m) }

// MarshalGQL writes the enum value.
func (m FractileMethod) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(m))) }

// UnmarshalGQL reads the enum value.
func (m *FractileMethod) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok || !FractileMethod(s).IsValid() {
		return apierr.BadInput("fractile_method: %v is not a FractileMethod; accepted: NEAREST_RANK, LINEAR", v)
	}
	*m = FractileMethod(s)
	return nil
}

// aggregate is the SQL function of a fractile method: nearest rank is percentile_disc, the
// value at rank max(1, ceil(p*n)); linear is percentile_cont.
func (m FractileMethod) aggregate() string {
	if m == Linear {
		return "percentile_cont"
	}
	return "percentile_disc"
}

// DefaultFractiles is the 90th fractile of NFPA 1710.
var DefaultFractiles = []float64{0.9}

// IntervalRequest is interval_stats' arguments.
type IntervalRequest struct {
	Records    records.RecordFilter
	From, To   TimePoint
	GroupBy    []string
	Bucket     *stats.TimeBucket
	Fractiles  []float64 // nil: DefaultFractiles
	Method     FractileMethod
	Targets    []float64
	Confidence float64
	MaxSeconds *float64
}

// intervalFilter is the condition of a measured interval over iv.s, and of an excluded one.
func intervalFilter(maxSeconds *float64, args *records.Args) (measured, excluded string) {
	if maxSeconds == nil {
		return "iv.s >= 0", "iv.s < 0"
	}
	m := args.Add(*maxSeconds) + "::float8"
	return "iv.s >= 0 AND iv.s <= " + m, "(iv.s < 0 OR iv.s > " + m + ")"
}

// lateral is the FROM clause's interval: one value per record, the seconds from one point to
// the other (iv.s), NULL when either is.
func lateral(interval string) string {
	return " CROSS JOIN LATERAL (SELECT " + interval + " AS s) AS iv"
}

// checkMaxSeconds refuses a bound that is not above 0.
func checkMaxSeconds(m *float64) error {
	if m != nil && !(*m > 0) {
		return apierr.BadInput("max_seconds: %v is not above 0", *m)
	}
	return nil
}

// intervalStatement is a validated IntervalRequest as one statement.
type intervalStatement struct {
	sql       string
	args      records.Args
	bucket    bool
	groups    []records.Column
	fractiles []float64
	targets   []float64
}

// The statement of interval_stats: the selected records with their interval (a LATERAL value
// per record), aggregated per bucket and group: the counts, and over the measured intervals
// (FILTER) min, max, avg, the fractiles from one sort (an array of fractions) and one count per
// target.
const intervalSQL = `SELECT %s FROM %s WHERE %s%s`

func buildIntervals(f *found, req IntervalRequest, lim Limits) (intervalStatement, error) {
	interval, err := f.interval(req.From, req.To)
	if err != nil {
		return intervalStatement{}, err
	}
	groups, err := groupColumns(lim, req.GroupBy)
	if err != nil {
		return intervalStatement{}, err
	}
	g, err := newGrouping(req.Bucket, groups)
	if err != nil {
		return intervalStatement{}, err
	}
	st := intervalStatement{bucket: req.Bucket != nil, groups: groups, fractiles: req.Fractiles, targets: req.Targets}
	if st.fractiles == nil {
		st.fractiles = DefaultFractiles
	}
	if err := checkFractions("fractiles", st.fractiles); err != nil {
		return intervalStatement{}, err
	}
	if len(req.Targets) > maxFractions {
		return intervalStatement{}, apierr.BadInput("targets: %d given; give at most %d", len(req.Targets), maxFractions)
	}
	for i, t := range req.Targets {
		if !(t >= 0) {
			return intervalStatement{}, apierr.BadInput("targets[%d]: %v is negative; a target is a number of seconds, at least 0", i, t)
		}
	}
	if !(req.Confidence > 0 && req.Confidence < 1) {
		return intervalStatement{}, apierr.BadInput("confidence: %v is not strictly between 0 and 1 (0.95 for 95 %%)", req.Confidence)
	}
	if err := checkMaxSeconds(req.MaxSeconds); err != nil {
		return intervalStatement{}, err
	}
	method := req.Method
	if method == "" {
		method = NearestRank
	}

	var args records.Args
	cond, err := req.Records.Compile(&args)
	if err != nil {
		return intervalStatement{}, err
	}
	ok, excluded := intervalFilter(req.MaxSeconds, &args)
	sel := append([]string(nil), g.sel...)
	sel = append(sel, "count(*)",
		"count(*) FILTER (WHERE "+ok+")",
		"count(*) FILTER (WHERE "+excluded+")",
		"min(iv.s) FILTER (WHERE "+ok+")",
		"max(iv.s) FILTER (WHERE "+ok+")",
		"avg(iv.s) FILTER (WHERE "+ok+")")
	if len(st.fractiles) > 0 {
		sel = append(sel, method.aggregate()+"("+args.Add(st.fractiles)+"::float8[]) WITHIN GROUP (ORDER BY iv.s) FILTER (WHERE "+ok+")")
	}
	for _, t := range st.targets {
		sel = append(sel, "count(*) FILTER (WHERE "+ok+" AND iv.s <= "+args.Add(t)+"::float8)")
	}
	st.sql = fmt.Sprintf(intervalSQL, strings.Join(sel, ", "), cond.From(groups...)+lateral(interval), cond.SQL, g.tail())
	st.args = args
	return st, nil
}

// intervalRow is one row of the statement before suppression.
type intervalRow struct {
	bucket                   *string
	groups                   []*string
	count, measured, exclude int64
	min, max, avg            *float64
	fractiles                []float64
	within                   []int64
}

// opIntervalStats names the statement.
const opIntervalStats = "interval stats"

// IntervalStats runs interval_stats' statement and suppresses its small counts (k).
func (r *Repository) IntervalStats(ctx context.Context, req IntervalRequest, k threshold, lim Limits) ([]*IntervalStats, error) {
	f, err := r.ext.get(ctx)
	if err != nil {
		return nil, err
	}
	st, err := buildIntervals(f, req, lim)
	if err != nil {
		return nil, err
	}
	rows, err := collect(ctx, r.db, opIntervalStats, st.sql, st.args, lim, func(row pgx.CollectableRow) (intervalRow, error) {
		var (
			x    intervalRow
			dest []any
		)
		if st.bucket {
			dest = append(dest, &x.bucket)
		}
		x.groups = make([]*string, len(st.groups))
		for i := range x.groups {
			dest = append(dest, &x.groups[i])
		}
		dest = append(dest, &x.count, &x.measured, &x.exclude, &x.min, &x.max, &x.avg)
		if len(st.fractiles) > 0 {
			dest = append(dest, &x.fractiles)
		}
		x.within = make([]int64, len(st.targets))
		for i := range x.within {
			dest = append(dest, &x.within[i])
		}
		return x, row.Scan(dest...)
	})
	if err != nil {
		return nil, err
	}
	out := make([]*IntervalStats, len(rows))
	for i, x := range rows {
		out[i] = x.answer(st, req.Confidence, k)
	}
	return out, nil
}

// answer is the row as published under threshold k (contract 6.12.4).
func (x intervalRow) answer(st intervalStatement, confidence float64, k threshold) *IntervalStats {
	s := &IntervalStats{Bucket: x.bucket, Group: make([]stats.GroupValue, len(st.groups))}
	for i, g := range st.groups {
		s.Group[i] = stats.GroupValue{Column: g.Name, Value: x.groups[i]}
	}
	s.Suppressed = k.small(x.count) || k.small(x.measured)
	s.Fractiles = make([]stats.Percentile, len(st.fractiles))
	for i, p := range st.fractiles {
		s.Fractiles[i].P = p
		if !s.Suppressed && x.measured > 0 && i < len(x.fractiles) {
			v := x.fractiles[i]
			s.Fractiles[i].Value = &v
		}
	}
	s.Compliance = make([]Compliance, len(st.targets))
	for i, t := range st.targets {
		s.Compliance[i] = compliance(t, x.within[i], x.measured, confidence, k, s.Suppressed)
	}
	if s.Suppressed {
		return s
	}
	count := x.count
	s.Count = &count
	s.Measured = k.published(x.measured)
	s.Excluded = k.published(x.exclude)
	s.Min, s.Max, s.Avg = x.min, x.max, x.avg
	return s
}

// compliance is one target's entry: within of n measured, the share and its Wilson interval;
// suppressed with its object, or when within or n - within is small.
func compliance(target float64, within, n int64, confidence float64, k threshold, suppressed bool) Compliance {
	c := Compliance{Target: target}
	if suppressed || k.small(within) || k.small(n-within) {
		c.Suppressed = true
		return c
	}
	c.Within = k.published(within)
	if n > 0 {
		share := float64(within) / float64(n)
		lo, hi := wilson(within, n, confidence)
		c.Share, c.CiLow, c.CiHigh = &share, &lo, &hi
	}
	return c
}

// wilson is the Wilson score interval of the share within/n at confidence (contract 6.12.2):
// with z the standard normal quantile at 1 - (1 - confidence)/2, p = within/n,
// (p + z²/2n ∓ z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n); exactly 0 below at within = 0 and
// exactly 1 above at within = n, where the formula's rounding could leave them a hair off.
func wilson(within, n int64, confidence float64) (lo, hi float64) {
	z := normalQuantile(confidence)
	nf := float64(n)
	p := float64(within) / nf
	z2 := z * z
	center := p + z2/(2*nf)
	half := z * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	den := 1 + z2/nf
	lo, hi = (center-half)/den, (center+half)/den
	if within == 0 {
		lo = 0
	}
	if within == n {
		hi = 1
	}
	return lo, hi
}

// normalQuantile is z, the standard normal distribution's quantile at 1 - (1 - confidence)/2:
// sqrt(2)·erfinv(confidence) (erfinv(2q - 1) with q that quantile, without the rounding of
// computing q first).
func normalQuantile(confidence float64) float64 { return math.Sqrt2 * math.Erfinv(confidence) }

// collect runs a statement whose rows are an answer of at most LIMITS__MAX_ROWS rows, as the
// other grouped fields do (contract 6.10): the database stops at the row past the bound, and
// reading it is RESULT_TOO_LARGE.
func collect[T any](ctx context.Context, db *database.DB, op, q string, args records.Args, lim Limits, scan pgx.RowToFunc[T]) ([]T, error) {
	if lim.Rows <= 0 {
		return database.Collect(ctx, db, op, q, args, scan)
	}
	q += " LIMIT " + args.Add(lim.Rows+1)
	return database.CollectAtMost(ctx, db, op, q, args, lim.Rows, apierr.TooManyRows("LIMITS__MAX_ROWS", lim.Rows), scan)
}
