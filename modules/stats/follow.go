package stats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/follow"
	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

// Followed answers (contract 6.13): with the replication change source, records_count,
// distinct_values, unique_counts and record_series over columns and filters of fact_record
// are answered from counts that platform/follow keeps up to date from the changed rows; the
// counts are read once per question, by a statement that also returns its snapshot, and the
// answer is made from them here exactly as the statements above make it. A question that
// cannot be followed (a column of another table, a filter the row alone cannot decide) and any
// answer the counts cannot make (a refusal by a limit) is computed by those statements.

// The fields as the followed and recomputed metrics name them.
const (
	fieldRecordsCount   = "records_count"
	fieldDistinctValues = "distinct_values"
	fieldUniqueCounts   = "unique_counts"
	fieldRecordSeries   = "record_series"
)

// snapshotCTE gives the counting statements their snapshot, one row even when they have none.
const snapshotCTE = `WITH s AS (SELECT ` + delta.SnapshotQuery + ` AS snap) `

// limitPast ends a counting statement one row past what a followed question may count: the
// database stops there, and readCounts says the question is too large to follow.
var limitPast = " LIMIT " + strconv.Itoa(follow.MaxViewKeys+1)

// questionKey names a followed question: its kind and its arguments, whole.
func questionKey(kind string, parts ...any) string {
	b, _ := json.Marshal(parts)
	return kind + "\x00" + string(b)
}

// textEqual reads whether each text column of cols has a deterministic collation (equal text
// is equal bytes), for records.RecordFilter.Selects; false when it cannot be read.
func (r *Repository) textEqual(ctx context.Context, cols ...records.Column) (func(records.Column) bool, bool) {
	det := map[string]bool{}
	for _, c := range cols {
		if c.Type != records.TypeText {
			continue
		}
		ok, err := r.coll.Deterministic(ctx, c)
		if err != nil || !ok {
			return nil, false
		}
		det[c.Name] = true
	}
	return func(c records.Column) bool { return det[c.Name] }, true
}

// filterColumns are the catalog columns f's filters read (unknown names left out: Compile
// refused them before).
func filterColumns(f records.RecordFilter) []records.Column {
	var cols []records.Column
	for _, fl := range f.Filters {
		if c, ok := records.LookupColumn(fl.Column); ok {
			cols = append(cols, c)
		}
	}
	return cols
}

// selection is f as a predicate on changed rows, with the columns cols grouped by; false when
// the question cannot be followed.
func (r *Repository) selection(ctx context.Context, f records.RecordFilter, cols ...records.Column) (func(delta.Row) (bool, error), bool) {
	all := append(filterColumns(f), cols...)
	for _, c := range all {
		if !c.Followable() {
			return nil, false
		}
	}
	eq, ok := r.textEqual(ctx, all...)
	if !ok {
		return nil, false
	}
	return f.Selects(eq)
}

// valueKey is a Selector.Key of column c's value as the answers write it.
func valueKey(c records.Column) func(delta.Row) (delta.Key, error) {
	return func(row delta.Row) (delta.Key, error) {
		v, err := records.ValueText(c, row)
		return delta.MakeKey(v), err
	}
}

// readCounts reads counts per key from a statement whose rows are (snap, ord, n, key values...):
// ord the selector's position (NULL: the row of an empty result), key the values. More than
// follow.MaxViewKeys rows is follow.ErrTooLarge (the statement has a LIMIT past it: limitPast).
func readCounts(ctx context.Context, db *database.DB, op, q string, args []any, sets int, keyOf func(vals []any) (delta.Key, error), dest ...any) ([]map[delta.Key]int64, *delta.Snapshot, error) {
	counts := make([]map[delta.Key]int64, sets)
	for i := range counts {
		counts[i] = map[delta.Key]int64{}
	}
	var (
		snap string
		ord  *int32
		n    *int64
	)
	all := append([]any{&snap, &ord, &n}, dest...)
	rows := 0
	err := db.ForEachRow(ctx, op, q, args, all, func() error {
		if n == nil || ord == nil {
			return nil
		}
		if rows++; rows > follow.MaxViewKeys {
			return follow.ErrTooLarge
		}
		if int(*ord) < 0 || int(*ord) >= sets {
			return fmt.Errorf("%s: set %d of %d", op, *ord, sets)
		}
		k, err := keyOf(dest)
		if err != nil {
			return err
		}
		counts[*ord][k] += *n
		return nil
	})
	if err != nil {
		if errors.Is(err, follow.ErrTooLarge) {
			return nil, nil, follow.ErrTooLarge
		}
		return nil, nil, err
	}
	s, err := delta.ParseSnapshot(snap)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	return counts, s, nil
}

// followedCount is records_count from followed counts; ok false: compute it by the statement.
func (r *Repository) followedCount(ctx context.Context, station *string) (n int64, followed, ok bool) {
	if !r.views.On() {
		return 0, false, false
	}
	sel := delta.Selector{Table: records.RecordTable}
	col, _ := records.LookupColumn("station")
	if station != nil {
		if _, ok := r.textEqual(ctx, col); !ok {
			return 0, false, false
		}
		sel.Where = delta.In(col.Field(), station)
	}
	read := func(ctx context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error) {
		q := snapshotCTE + `SELECT s.snap, 0::integer, (SELECT count(*) FROM fact_record) FROM s`
		var args []any
		if station != nil {
			q = snapshotCTE + `SELECT s.snap, 0::integer, (SELECT count(*) FROM fact_record WHERE station = $1) FROM s`
			args = []any{*station}
		}
		return readCounts(ctx, r.db, opRecordsCount, q, args, 1, func([]any) (delta.Key, error) { return "", nil })
	}
	counts, out, err := r.views.Counts(ctx, questionKey(fieldRecordsCount, station), []delta.Selector{sel}, read)
	if err != nil || out == follow.Off {
		return 0, false, false
	}
	for _, c := range counts[0] {
		n += c
	}
	return n, out == follow.Followed, true
}

// followedColumns are the rows perColumn would return for the distinct columns of cols, from
// followed counts (counted: each column's values by count descending first); ok false:
// compute them by the statement. distinct_values and unique_counts of the same columns and
// filter share their counts.
func (r *Repository) followedColumns(ctx context.Context, distinct []records.Column, f records.RecordFilter, counted bool) (perSet [][]valueRow, followed, ok bool) {
	if !r.views.On() {
		return nil, false, false
	}
	where, ok := r.selection(ctx, f, distinct...)
	if !ok {
		return nil, false, false
	}
	sels := make([]delta.Selector, len(distinct))
	names := make([]string, len(distinct))
	for i, c := range distinct {
		sels[i] = delta.Selector{Table: records.RecordTable, Where: where, Key: valueKey(c)}
		names[i] = c.Name
	}
	read := func(ctx context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error) {
		q, args, err := perColumnSQL(distinct, f, true)
		if err != nil {
			return nil, nil, err
		}
		q = snapshotCTE + `SELECT s.snap, g.ord, g.n, g.value FROM s LEFT JOIN (` + q + limitPast + `) AS g ON true`
		var value *string
		return readCounts(ctx, r.db, opDistinctValues, q, args, len(distinct), func([]any) (delta.Key, error) {
			return delta.MakeKey(value), nil
		}, &value)
	}
	counts, out, err := r.views.Counts(ctx, questionKey("values", names, f), sels, read)
	if err != nil || out == follow.Off {
		return nil, false, false
	}
	perSet = make([][]valueRow, len(distinct))
	for i, c := range distinct {
		values := make([]*string, 0, len(counts[i]))
		for k := range counts[i] {
			values = append(values, k.Values()[0])
		}
		if err := r.coll.Sort(ctx, c, values); err != nil {
			return nil, false, false
		}
		rows := make([]valueRow, len(values))
		for j, v := range values {
			rows[j] = valueRow{Ord: int32(i), Value: v}
			if counted {
				rows[j].Count = counts[i][delta.MakeKey(v)]
			}
		}
		if counted {
			slices.SortStableFunc(rows, func(a, b valueRow) int { return int(b.Count - a.Count) })
		}
		perSet[i] = rows
	}
	return perSet, out == follow.Followed, true
}

// seriesKey is the key of a record in record_series' counts: its bucket's label and, with
// group, its value of the column.
func seriesKey(spec bucketSpec, group *records.Column) func(delta.Row) (delta.Key, error) {
	at, _ := records.LookupColumn("occurred_at")
	return func(row delta.Row) (delta.Key, error) {
		v, err := records.ValueText(at, row)
		if err != nil {
			return "", err
		}
		if v == nil {
			return "", fmt.Errorf("%w: occurred_at is NULL", delta.ErrCannotFollow)
		}
		t, err := records.ParseTimestamp(*v)
		if err != nil {
			return "", err
		}
		label := spec.labelOfTime(t)
		if group == nil {
			return delta.MakeKey(&label), nil
		}
		g, err := records.ValueText(*group, row)
		return delta.MakeKey(&label, g), err
	}
}

// labelOfTime is the label of the bucket of a record that occurred at t.
func (s bucketSpec) labelOfTime(t time.Time) string {
	switch s.field {
	case "hour":
		return s.label(time.Time{}, int32(t.Hour()))
	case "isodow":
		return s.label(time.Time{}, int32((int(t.Weekday())+6)%7+1))
	case "month":
		return s.label(time.Time{}, int32(t.Month()))
	}
	return s.label(s.truncate(t), 0)
}

// labels are the labels of every bucket of the days start..end, in order (generate_series').
func (s bucketSpec) labels(start, end time.Time) []string {
	if s.cyclic() {
		out := make([]string, 0, s.max-s.min+1)
		for n := s.min; n <= s.max; n++ {
			out = append(out, s.label(time.Time{}, int32(n)))
		}
		return out
	}
	first, _, n := s.span(start, end)
	out := make([]string, 0, n)
	t := first
	for i := int64(0); i < n; i++ {
		out = append(out, s.label(t, 0))
		switch s.b {
		case Hour:
			t = t.Add(time.Hour)
		case Day:
			t = t.AddDate(0, 0, 1)
		case Week:
			t = t.AddDate(0, 0, 7)
		case Month:
			t = t.AddDate(0, 1, 0)
		case Quarter:
			t = t.AddDate(0, 3, 0)
		default:
			t = t.AddDate(1, 0, 0)
		}
	}
	return out
}

// followedSeries is RecordSeries' answer from followed counts; ok false: compute it by the
// statement (also when the answer is a refusal).
func (r *Repository) followedSeries(ctx context.Context, req SeriesRequest, lim Limits, st seriesStatement) (points []*SeriesPoint, followed, ok bool) {
	if !r.views.On() {
		return nil, false, false
	}
	var cols []records.Column
	if st.group != nil {
		cols = append(cols, *st.group)
	}
	where, ok := r.selection(ctx, req.Records, cols...)
	if !ok {
		return nil, false, false
	}
	sel := delta.Selector{Table: records.RecordTable, Where: where, Key: seriesKey(st.bucket, st.group)}
	read := func(ctx context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error) {
		var args records.Args
		cond, err := req.Records.Compile(&args)
		if err != nil {
			return nil, nil, err
		}
		v, from := "NULL::text", cond.From()
		if st.group != nil {
			v, from = st.group.Expr()+"::text", cond.From(*st.group)
		}
		q := snapshotCTE + `SELECT s.snap, 0::integer, g.n, g.b, g.v FROM s LEFT JOIN (SELECT ` + st.bucket.expr() + ` AS b, ` + v +
			` AS v, count(*) AS n FROM ` + from + ` WHERE ` + cond.SQL + ` GROUP BY 1, 2` + limitPast + `) AS g ON true`
		var (
			b     any
			value *string
		)
		return readCounts(ctx, r.db, opRecordSeries, q, args, 1, func([]any) (delta.Key, error) {
			label := st.bucket.labelOf(b)
			if st.group == nil {
				return delta.MakeKey(&label), nil
			}
			return delta.MakeKey(&label, value), nil
		}, &b, &value)
	}
	counts, out, err := r.views.Counts(ctx, questionKey(fieldRecordSeries, req), []delta.Selector{sel}, read)
	if err != nil || out == follow.Off {
		return nil, false, false
	}
	start, _ := records.ParseDate("start_date", req.Records.StartDate)
	end, _ := records.ParseDate("end_date", req.Records.EndDate)
	labels := st.bucket.labels(start, end)
	if int64(len(labels)) != st.buckets {
		return nil, false, false
	}
	c := counts[0]
	if st.group == nil {
		points = make([]*SeriesPoint, len(labels))
		for i, l := range labels {
			points[i] = &SeriesPoint{Bucket: l, Count: c[delta.MakeKey(&l)]}
		}
		return points, out == follow.Followed, true
	}
	seen := map[delta.Key]bool{}
	var values []*string
	for k := range c {
		v := k.Values()[1]
		if vk := delta.MakeKey(v); !seen[vk] {
			seen[vk] = true
			values = append(values, v)
		}
	}
	if st.checkValues(lim, int64(len(values))) != nil {
		return nil, false, false
	}
	if err := r.coll.Sort(ctx, *st.group, values); err != nil {
		return nil, false, false
	}
	name := st.group.Name
	points = make([]*SeriesPoint, 0, len(labels)*len(values))
	for _, l := range labels {
		for _, v := range values {
			points = append(points, &SeriesPoint{Bucket: l, Column: &name, Value: v, Count: c[delta.MakeKey(&l, v)]})
		}
	}
	return points, out == follow.Followed, true
}

// seriesRows hands points over as EachSeriesRow's rows.
func seriesRows(points []*SeriesPoint, fn func(*SeriesRow) bool) bool {
	var row SeriesRow
	for _, p := range points {
		row = SeriesRow{Bucket: []byte(p.Bucket), Count: fmt.Appendf(nil, "%d", p.Count)}
		if p.Column != nil {
			row.Column = []byte(*p.Column)
		}
		if p.Value != nil {
			row.Value = []byte(*p.Value)
		}
		if !fn(&row) {
			return false
		}
	}
	return true
}
