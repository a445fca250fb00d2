package stats

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
	"github.com/emsanalytics/emsquery/platform/jsonscalar"
)

// SeriesPoint is one point of record_series: the records in one bucket and, with group_by,
// with one value of that column (Column and Value; Value nil for NULL).
type SeriesPoint struct {
	Bucket string  `json:"bucket"`
	Column *string `json:"column"`
	Value  *string `json:"value"`
	Count  int64   `json:"count"`
}

// PlainJSON declares SeriesPoint written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (SeriesPoint) PlainJSON() {}

// SeriesRequest is record_series' arguments.
type SeriesRequest struct {
	Records records.RecordFilter
	Bucket  TimeBucket
	GroupBy *string // a catalog column; nil: no grouping
}

// seriesStatement is a validated SeriesRequest as one SQL statement.
type seriesStatement struct {
	sql    string
	args   records.Args
	bucket bucketSpec
	group  *records.Column
	// buckets is the number of buckets; with group, each value of the column has that many
	// points.
	buckets int64
}

// The statements of record_series. Both count the selected records per bucket (and value) in
// one pass over the range, which the occurred_at index serves (the range is on the bare
// column, never inside a function), and put the counts on a generated series of every bucket,
// so that a bucket without records is there with 0.
//
// With group_by, the gaps are filled by adding a 0 for every bucket and every value that occurs
// (vals) to the counts and grouping again: GROUP BY treats NULL as one value and orders by the
// column's own type, where a join on the value would need IS NOT DISTINCT FROM, which the
// planner can neither hash nor merge. (It also keeps the planner's estimates, and so its JIT
// effort, small: it cannot know how few groups the counts have.) The number of values decides
// whether the answer fits LIMITS__MAX_SERIES_POINTS: t.nv comes first, and the points are
// computed only when nv times the number of buckets is within the limit (the LATERAL
// subquery's WHERE refers to t alone, so the planner makes it a one-time filter, and OFFSET 0
// keeps the subquery from being merged into the outer query). A refused answer is one row with
// nv and NULLs.
const (
	seriesSQL = `WITH c AS (SELECT %[1]s AS b, count(*) AS n FROM %[2]s WHERE %[3]s GROUP BY 1)
SELECT g.b, coalesce(c.n, 0) AS n FROM %[4]s AS g(b) LEFT JOIN c ON c.b = g.b ORDER BY g.b`

	groupedSeriesSQL = `WITH c AS MATERIALIZED (SELECT %[1]s AS b, %[5]s AS v, count(*) AS n FROM %[2]s WHERE %[3]s GROUP BY 1, 2),
  vals AS MATERIALIZED (SELECT DISTINCT v FROM c)
SELECT t.nv, p.b, p.v::text, p.n
FROM (SELECT count(*) AS nv FROM vals) AS t
LEFT JOIN LATERAL (SELECT u.b, u.v, sum(u.n)::bigint AS n
    FROM (SELECT g.b, vals.v, 0::bigint AS n FROM %[4]s AS g(b) CROSS JOIN vals
          UNION ALL SELECT c.b, c.v, c.n FROM c) AS u
    WHERE t.nv * %[6]s::bigint <= %[7]s::bigint
    GROUP BY u.b, u.v OFFSET 0) AS p ON true
ORDER BY p.b, p.v ASC NULLS LAST`
)

// buildSeries validates req within lim and builds its statement. A calendar bucket count
// alone above LIMITS__MAX_SERIES_POINTS is refused here, before anything runs.
func buildSeries(req SeriesRequest, lim Limits) (seriesStatement, error) {
	spec, ok := req.Bucket.spec()
	if !ok {
		return seriesStatement{}, apierr.BadInput("bucket: %s is not a TimeBucket", records.Quote(string(req.Bucket)))
	}
	var args records.Args
	cond, err := req.Records.Compile(&args)
	if err != nil {
		return seriesStatement{}, err
	}
	// Compile accepted both dates.
	start, _ := records.ParseDate("start_date", req.Records.StartDate)
	end, _ := records.ParseDate("end_date", req.Records.EndDate)
	st := seriesStatement{bucket: spec, buckets: spec.count(start, end)}
	if req.GroupBy != nil {
		g, err := records.ResolveColumn("group_by", *req.GroupBy)
		if err != nil {
			return seriesStatement{}, err
		}
		st.group = &g
	}
	if err := lim.checkSeriesPoints(st.buckets, fmt.Sprintf("%d %s buckets", st.buckets, spec.b)); err != nil {
		return seriesStatement{}, err
	}
	series := fmt.Sprintf("generate_series(%d, %d)", spec.min, spec.max)
	if !spec.cyclic() {
		first, last, _ := spec.span(start, end)
		series = "generate_series(" + args.Add(first) + "::timestamp, " + args.Add(last) + "::timestamp, " + args.Add(spec.step) + "::interval)"
	}
	if st.group == nil {
		st.sql = fmt.Sprintf(seriesSQL, spec.expr(), cond.From(), cond.SQL, series)
		st.args = args
		return st, nil
	}
	st.sql = fmt.Sprintf(groupedSeriesSQL, spec.expr(), cond.From(*st.group), cond.SQL, series, st.group.Expr(),
		args.Add(st.buckets), args.Add(int64(lim.SeriesPoints)))
	st.args = args
	return st, nil
}

// checkValues refuses a grouped answer whose values of the group_by column, each with a point
// per bucket, exceed LIMITS__MAX_SERIES_POINTS.
func (st seriesStatement) checkValues(lim Limits, values int64) error {
	return lim.checkSeriesPoints(values*st.buckets, fmt.Sprintf("%d %s buckets times %d values of %s", st.buckets, st.bucket.b, values, st.group.Name))
}

// RecordSeries counts the records req selects per bucket (and value of req.GroupBy), every
// bucket present, in one statement.
func (r *Repository) RecordSeries(ctx context.Context, req SeriesRequest, lim Limits) ([]*SeriesPoint, error) {
	st, err := buildSeries(req, lim)
	if err != nil {
		return nil, err
	}
	if points, followed, ok := r.followedSeries(ctx, req, lim, st); ok {
		r.views.Count(ctx, fieldRecordSeries, followed)
		return points, nil
	}
	r.views.Count(ctx, fieldRecordSeries, false)
	if st.group == nil {
		return database.Collect(ctx, r.db, opRecordSeries, st.sql, st.args, func(row pgx.CollectableRow) (*SeriesPoint, error) {
			var (
				b any
				p SeriesPoint
			)
			if err := row.Scan(&b, &p.Count); err != nil {
				return nil, err
			}
			p.Bucket = st.bucket.labelOf(b)
			return &p, nil
		})
	}
	var values int64
	name := st.group.Name
	points, err := database.Collect(ctx, r.db, opRecordSeries, st.sql, st.args, func(row pgx.CollectableRow) (*SeriesPoint, error) {
		var (
			b any
			n *int64
			p = SeriesPoint{Column: &name}
		)
		if err := row.Scan(&values, &b, &p.Value, &n); err != nil {
			return nil, err
		}
		if n == nil { // no value at all, or too many points
			return nil, nil
		}
		p.Bucket, p.Count = st.bucket.labelOf(b), *n
		return &p, nil
	})
	if err != nil {
		return nil, err
	}
	if err := st.checkValues(lim, values); err != nil {
		return nil, err
	}
	out := points[:0]
	for _, p := range points {
		if p != nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// SeriesRow is one point of record_series as EachSeriesRow hands it over: the JSON values of a
// SeriesPoint's fields in their order, as text (nil for null), valid only until the callback
// returns.
type SeriesRow struct {
	Bucket []byte // the bucket's label (bucketSpec.label)
	Column []byte // group_by's column; nil without group_by
	Value  []byte // the column's value as text; nil for NULL and without group_by
	Count  []byte // decimal digits
}

// EachSeriesRow answers req as RecordSeries does, point by point from the database's bytes,
// without a SeriesPoint or a Go value per point: the counts and values as text, the buckets'
// starts in binary, each bucket labelled once for all its values. It returns false when fn
// refused a point, or at a bucket it cannot label as RecordSeries would (an infinite
// timestamp, which the date range keeps out): the caller then answers with RecordSeries. A
// refusal by LIMITS__MAX_SERIES_POINTS comes with the first row, before any point is handed
// over, and is RecordSeries' error.
func (r *Repository) EachSeriesRow(ctx context.Context, req SeriesRequest, lim Limits, fn func(*SeriesRow) bool) (bool, error) {
	st, err := buildSeries(req, lim)
	if err != nil {
		return false, err
	}
	if points, followed, ok := r.followedSeries(ctx, req, lim, st); ok {
		r.views.Count(ctx, fieldRecordSeries, followed)
		return seriesRows(points, fn), nil
	}
	r.views.Count(ctx, fieldRecordSeries, false)
	bucketFormat := int16(pgx.BinaryFormatCode) // a timestamp
	if st.bucket.cyclic() {
		bucketFormat = pgx.TextFormatCode // an integer
	}
	formats, bucketCol := []int16{bucketFormat, pgx.TextFormatCode}, 0
	var row SeriesRow
	if st.group != nil {
		formats, bucketCol = []int16{pgx.TextFormatCode, bucketFormat, pgx.TextFormatCode, pgx.TextFormatCode}, 1
		row.Column = []byte(st.group.Name)
	}
	var (
		stop    error  // why the rows were not all read
		checked bool   // the number of values was checked against the limit
		bucket  []byte // the bytes row.Bucket labels
	)
	complete, err := r.db.ForEachRawRow(ctx, opRecordSeries, st.sql, st.args, formats, func(raw [][]byte) bool {
		if len(raw) != len(formats) {
			stop = fmt.Errorf("record series: %d columns, want %d", len(raw), len(formats))
			return false
		}
		if st.group != nil {
			if !checked {
				checked = true
				values, err := strconv.ParseInt(string(raw[0]), 10, 64)
				if err != nil {
					stop = fmt.Errorf("record series: values %q: %w", raw[0], err)
					return false
				}
				if err := st.checkValues(lim, values); err != nil {
					stop = err
					return false
				}
			}
			if raw[3] == nil { // no value at all
				return true
			}
			row.Value, row.Count = raw[2], raw[3]
		} else {
			row.Count = raw[1]
		}
		if b := raw[bucketCol]; row.Bucket == nil || !bytes.Equal(b, bucket) {
			label, ok, err := st.bucket.rawLabel(b)
			if err != nil {
				stop = err
			}
			if !ok {
				return false
			}
			row.Bucket, bucket = []byte(label), append(bucket[:0], b...)
		}
		return fn(&row)
	})
	if stop != nil {
		return false, stop
	}
	return complete, err
}

// microsecondsToY2K is the Unix time of PostgreSQL's epoch, 2000-01-01 00:00:00, in microseconds.
const microsecondsToY2K = 946684800 * 1000000

// rawLabel is labelOf for a bucket as the database sent it: a calendar bucket's start as a
// binary timestamp (microseconds since 2000-01-01, as pgx decodes it), a cyclic bucket's number
// as text. false for an infinite timestamp, which pgx does not decode to a time.
func (s bucketSpec) rawLabel(b []byte) (string, bool, error) {
	if s.cyclic() {
		n, err := strconv.ParseInt(string(b), 10, 32)
		if err != nil {
			return "", false, fmt.Errorf("record series: bucket %q: %w", b, err)
		}
		return s.label(time.Time{}, int32(n)), true, nil
	}
	if len(b) != 8 {
		return "", false, fmt.Errorf("record series: a bucket of %d bytes, want a timestamp's 8", len(b))
	}
	us := int64(binary.BigEndian.Uint64(b))
	if us == math.MaxInt64 || us == math.MinInt64 {
		return "", false, nil
	}
	t := time.Unix(microsecondsToY2K/1000000+us/1000000, (microsecondsToY2K%1000000+us%1000000)*1000).UTC()
	return s.label(t, 0), true, nil
}

// SeriesList is the points of req as record_series writes them (gqlfield.List): the rows of
// EachSeriesRow, each field written to JSON by appendSeriesField.
func (r *Repository) SeriesList(req SeriesRequest, lim Limits) gqlfield.Source[SeriesPoint] {
	return gqlfield.Source[SeriesPoint]{
		Rows: func(ctx context.Context, yield func([][]byte) bool) (bool, error) {
			var fields [4][]byte
			return r.EachSeriesRow(ctx, req, lim, func(p *SeriesRow) bool {
				fields = [4][]byte{p.Bucket, p.Column, p.Value, p.Count}
				return yield(fields[:])
			})
		},
		Column: appendSeriesField,
		Values: func(ctx context.Context, yield func(*SeriesPoint) bool) (bool, error) {
			points, err := r.RecordSeries(ctx, req, lim)
			if err != nil {
				return false, err
			}
			for _, p := range points {
				if !yield(p) {
					return false, nil
				}
			}
			return true, nil
		},
		All: func(ctx context.Context) ([]SeriesPoint, error) {
			points, err := r.RecordSeries(ctx, req, lim)
			out := make([]SeriesPoint, len(points))
			for i, p := range points {
				out[i] = *p
			}
			return out, err
		},
	}
}

// appendSeriesField writes, SeriesRow's field i (SeriesPoint's struct
// field i), never NULL, exactly as the list writes SeriesPoint's Go value: the three texts as
// JSON strings, the count's digits as they are (strconv.AppendInt's for an int64).
func appendSeriesField(b []byte, i int, v []byte) ([]byte, bool) {
	switch i {
	case 0, 1, 2:
		return jsonscalar.AppendString(b, v), true
	case 3:
		return append(b, v...), true
	}
	return b, false
}
