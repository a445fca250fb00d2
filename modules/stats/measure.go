package stats

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// MeasureStats is one object of record_stats: the statistics of the measure over the records
// of one bucket (Bucket, when bucketed) and one combination of the group_by values (Group).
type MeasureStats struct {
	Bucket            *string      `json:"bucket"`
	Group             []GroupValue `json:"group"`
	Count             int64        `json:"count"`
	Measured          int64        `json:"measured"`
	Min               *float64     `json:"min"`
	Max               *float64     `json:"max"`
	Avg               *float64     `json:"avg"`
	Percentiles       []Percentile `json:"percentiles"`
	WithinTarget      *int64       `json:"within_target"`
	WithinTargetShare *float64     `json:"within_target_share"`
}

// PlainJSON declares MeasureStats written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars, lists and other such types.
func (MeasureStats) PlainJSON() {}

// GroupValue is one group_by column's value in a MeasureStats (the database's text form; nil
// for NULL).
type GroupValue struct {
	Column string  `json:"column"`
	Value  *string `json:"value"`
}

// PlainJSON declares GroupValue written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (GroupValue) PlainJSON() {}

// Percentile is the continuous percentile P (0 to 1) of the measured values.
type Percentile struct {
	P     float64  `json:"p"`
	Value *float64 `json:"value"`
}

// PlainJSON declares Percentile written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (Percentile) PlainJSON() {}

// Bounds of record_stats' percentiles argument.
const maxPercentiles = 10

// DefaultPercentiles are the medians and 90th percentiles asked most often.
var DefaultPercentiles = []float64{0.5, 0.9}

// StatsRequest is record_stats' arguments, and which of the figures the query selects.
type StatsRequest struct {
	Records     records.RecordFilter
	Measure     string
	GroupBy     []string
	Bucket      *TimeBucket
	Percentiles []float64 // nil: DefaultPercentiles; empty: none
	Target      *float64
	// Figures the statement computes; the others are left nil (count and measured always).
	Want StatsFigures
}

// StatsFigures says which of the optional figures to compute.
type StatsFigures struct {
	MinMaxAvg   bool
	Percentiles bool
	Target      bool
}

// AllFigures computes everything.
var AllFigures = StatsFigures{MinMaxAvg: true, Percentiles: true, Target: true}

// statsStatement is a validated StatsRequest as one SQL statement.
type statsStatement struct {
	sql         string
	args        records.Args
	bucket      *bucketSpec
	groups      []records.Column
	percentiles []float64
	want        StatsFigures
}

// The statement of record_stats: one aggregate over the selected records, grouped by the
// bucket and the group_by columns when given (without either, exactly one row, also when no
// record matches). percentile_cont takes the whole array of fractions, so all percentiles come
// from one sort per group, as PostgreSQL computes percentile_cont(p). Groups and buckets are
// ordered by their own types (NULL last), and group values are returned as text.
const statsSQL = `SELECT %s FROM %s WHERE %s%s`

// buildStats validates req within lim and builds its statement.
func buildStats(req StatsRequest, lim Limits) (statsStatement, error) {
	m, err := records.ResolveColumn("measure", req.Measure)
	if err != nil {
		return statsStatement{}, err
	}
	if m.Type != records.TypeInteger && m.Type != records.TypeNumeric {
		return statsStatement{}, apierr.BadInput("measure: column %s is %s; give a column of integer or numeric type: %s", m.Name, m.Type, numericColumnNames())
	}
	if err := lim.Records.CheckColumns("group_by", len(req.GroupBy)); err != nil {
		return statsStatement{}, err
	}
	st := statsStatement{percentiles: req.Percentiles, want: req.Want}
	seen := map[string]bool{}
	for i, name := range req.GroupBy {
		c, err := records.ResolveColumn("group_by["+strconv.Itoa(i)+"]", name)
		if err != nil {
			return statsStatement{}, err
		}
		if !seen[c.Name] {
			seen[c.Name] = true
			st.groups = append(st.groups, c)
		}
	}
	if req.Bucket != nil {
		spec, ok := req.Bucket.spec()
		if !ok {
			return statsStatement{}, apierr.BadInput("bucket: %s is not a TimeBucket", records.Quote(string(*req.Bucket)))
		}
		st.bucket = &spec
	}
	if st.percentiles == nil {
		st.percentiles = DefaultPercentiles
	}
	if len(st.percentiles) > maxPercentiles {
		return statsStatement{}, apierr.BadInput("percentiles: %d given; give at most %d", len(st.percentiles), maxPercentiles)
	}
	for i, p := range st.percentiles {
		if !(p >= 0 && p <= 1) {
			return statsStatement{}, apierr.BadInput("percentiles[%d]: %v is not a fraction from 0 to 1 (0.9 is the 90th percentile)", i, p)
		}
	}
	st.want.Target = st.want.Target && req.Target != nil

	var args records.Args
	cond, err := req.Records.Compile(&args)
	if err != nil {
		return statsStatement{}, err
	}
	me := m.Expr()
	var sel, keys []string
	if st.bucket != nil {
		sel = append(sel, st.bucket.expr())
		keys = append(keys, st.bucket.expr())
	}
	for _, g := range st.groups {
		sel = append(sel, g.Expr()+"::text")
		keys = append(keys, g.Expr())
	}
	sel = append(sel, "count(*)", "count("+me+")")
	if st.want.MinMaxAvg {
		sel = append(sel, "min("+me+")::float8", "max("+me+")::float8", "avg("+me+")::float8")
	}
	if st.want.Percentiles && len(st.percentiles) > 0 {
		sel = append(sel, "percentile_cont("+args.Add(st.percentiles)+"::float8[]) WITHIN GROUP (ORDER BY "+me+")")
	}
	if st.want.Target {
		sel = append(sel, "count("+me+") FILTER (WHERE "+me+" <= "+args.Add(*req.Target)+"::float8)")
	}
	var tail string
	if len(keys) > 0 {
		order := make([]string, len(keys))
		for i, k := range keys {
			order[i] = k + " ASC NULLS LAST"
		}
		tail = " GROUP BY " + strings.Join(keys, ", ") + " ORDER BY " + strings.Join(order, ", ")
	}
	st.sql = fmt.Sprintf(statsSQL, strings.Join(sel, ", "), cond.From(append([]records.Column{m}, st.groups...)...), cond.SQL, tail)
	st.args = args
	return st, nil
}

// RecordStats computes the statistics of req's measure over the records it selects, per bucket
// and group, in one statement; more than lim.Rows objects is RESULT_TOO_LARGE.
func (r *Repository) RecordStats(ctx context.Context, req StatsRequest, lim Limits) ([]*MeasureStats, error) {
	st, err := buildStats(req, lim)
	if err != nil {
		return nil, err
	}
	return collect(ctx, r.db, opRecordStats, st.sql, st.args, lim, func(row pgx.CollectableRow) (*MeasureStats, error) {
		var (
			s        MeasureStats
			bucket   any
			groups   = make([]*string, len(st.groups))
			pcts     []float64
			inTarget int64
			dest     []any
		)
		if st.bucket != nil {
			dest = append(dest, &bucket)
		}
		for i := range groups {
			dest = append(dest, &groups[i])
		}
		dest = append(dest, &s.Count, &s.Measured)
		if st.want.MinMaxAvg {
			dest = append(dest, &s.Min, &s.Max, &s.Avg)
		}
		if st.want.Percentiles && len(st.percentiles) > 0 {
			dest = append(dest, &pcts)
		}
		if st.want.Target {
			dest = append(dest, &inTarget)
		}
		if err := row.Scan(dest...); err != nil {
			return nil, err
		}
		if st.bucket != nil {
			label := st.bucket.labelOf(bucket)
			s.Bucket = &label
		}
		s.Group = make([]GroupValue, len(st.groups))
		for i, g := range st.groups {
			s.Group[i] = GroupValue{Column: g.Name, Value: groups[i]}
		}
		s.Percentiles = make([]Percentile, len(st.percentiles))
		for i, p := range st.percentiles {
			s.Percentiles[i].P = p
			if s.Measured > 0 && i < len(pcts) {
				v := pcts[i]
				s.Percentiles[i].Value = &v
			}
		}
		if st.want.Target {
			s.WithinTarget = &inTarget
			if s.Measured > 0 {
				share := float64(inTarget) / float64(s.Measured)
				s.WithinTargetShare = &share
			}
		}
		return &s, nil
	})
}

// numericColumnNames lists the columns record_stats can measure.
func numericColumnNames() string {
	var names []string
	for _, c := range records.Columns() {
		if c.Type == records.TypeInteger || c.Type == records.TypeNumeric {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ", ")
}
