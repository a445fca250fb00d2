package reports

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/follow"
	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

// Followed summaries (contract 6.13): with the replication change source, main_report_summary
// over filters of fact_record columns is answered from counts that platform/follow keeps up to
// date from the changed rows: per selected record's resource key, patient key, distance,
// response time, transported, urgency and station. The figures are made from them as the
// statements make them: the distinct resources by looking up the resource keys in dim_resource
// (a dimension read by key; its change ends the answer), the averages by the database's own
// numeric division of the exact sums (a statement that reads no table), the breakdowns ordered
// as the database orders the values. A filter the rows alone cannot decide is computed by the
// statements.

// valueCount is one row of summaryCounts' statements: a value's text and its records.
type valueCount struct {
	Value *string
	Count int64
}

// fieldSummary is the field as the followed and recomputed metrics name it.
const fieldSummary = "main_report_summary"

// The sets of a followed summary's counts, in order.
const (
	setResource = iota
	setPatient
	setDistance
	setResponse
	setTransported
	setUrgency
	setStation
	summarySets
)

// keyColumn is a Selector.Key of an integer key column's text (sk_resource, sk_patient), which
// is canonical for integers.
func keyColumn(field string) func(delta.Row) (delta.Key, error) {
	return func(row delta.Row) (delta.Key, error) {
		col, ok := row.Column(field)
		if !ok || (col.TypeName != "int8" && col.TypeName != "int4" && col.TypeName != "int2") {
			return "", fmt.Errorf("%w: %s.%s is not an integer", delta.ErrCannotFollow, records.RecordTable, field)
		}
		v, err := row.Get(field)
		return delta.MakeKey(v), err
	}
}

func valueKey(c records.Column) func(delta.Row) (delta.Key, error) {
	return func(row delta.Row) (delta.Key, error) {
		v, err := records.ValueText(c, row)
		return delta.MakeKey(v), err
	}
}

// summaryCounts are the statements that read a followed summary's counts: per set, the
// selected records grouped by the set's column, its value as text; all with args. Run as one
// batch (database.RunBatch: one snapshot, which snapshotSQL, queued first, returns), each is a
// plain GROUP BY with its own plan, parallel where it can be, as the summary's own statements
// are. Each stops one row past what a followed question may count.
func summaryCounts(f records.RecordFilter, sets []int) ([]string, records.Args, error) {
	var args records.Args
	cond, err := f.Compile(&args)
	if err != nil {
		return nil, nil, err
	}
	exprs := [summarySets]string{records.AliasRecord + ".sk_resource", records.AliasRecord + ".sk_patient", colDistance.Expr(),
		colResponse.Expr(), colTransport.Expr(), colUrgency.Expr(), colStation.Expr()}
	qs := make([]string, len(sets))
	for i, set := range sets {
		qs[i] = `SELECT ` + exprs[set] + `::text, count(*) FROM ` + cond.From() + ` WHERE ` + cond.SQL + ` GROUP BY 1 LIMIT ` + strconv.Itoa(follow.MaxViewKeys+1)
	}
	return qs, args, nil
}

// summarySetsOf are the sets of counts the parts need: the transported values always (at most
// three keys, whose counts add up to the records), the others only when asked for, as a
// summary's patients, say, are about as many as its records.
func summarySetsOf(parts SummaryParts) []int {
	sets := []int{setTransported}
	for _, s := range []struct {
		want bool
		set  int
	}{{parts.Resources, setResource}, {parts.Patients, setPatient}, {parts.Distance, setDistance},
		{parts.Response, setResponse}, {parts.ByUrgency, setUrgency}, {parts.ByStation, setStation}} {
		if s.want {
			sets = append(sets, s.set)
		}
	}
	return sets
}

// snapshotSQL reads the snapshot of the batch's transaction.
const snapshotSQL = `SELECT ` + delta.SnapshotQuery

// followedSummary is Summary's answer from followed counts; ok false: compute it by the
// statements.
func (r *Repository) followedSummary(ctx context.Context, f records.RecordFilter, parts SummaryParts) (s *MainReportSummary, followed, ok bool) {
	if !r.views.On() {
		return nil, false, false
	}
	cols := []records.Column{colStation, colUrgency}
	for _, fl := range f.Filters {
		c, found := records.LookupColumn(fl.Column)
		if !found || !c.Followable() {
			return nil, false, false
		}
		cols = append(cols, c)
	}
	det := map[string]bool{}
	for _, c := range cols {
		if c.Type == records.TypeText {
			ok, err := r.coll.Deterministic(ctx, c)
			if err != nil || !ok {
				return nil, false, false
			}
			det[c.Name] = true
		}
	}
	where, ok := f.Selects(func(c records.Column) bool { return det[c.Name] })
	if !ok {
		return nil, false, false
	}
	keys := [summarySets]func(delta.Row) (delta.Key, error){keyColumn("sk_resource"), keyColumn("sk_patient"),
		valueKey(colDistance), valueKey(colResponse), valueKey(colTransport), valueKey(colUrgency), valueKey(colStation)}
	sets := summarySetsOf(parts)
	sels := make([]delta.Selector, len(sets))
	for i, set := range sets {
		sels[i] = delta.Selector{Table: records.RecordTable, Where: where, Key: keys[set]}
	}
	read := func(ctx context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error) {
		qs, args, err := summaryCounts(f, sets)
		if err != nil {
			return nil, nil, err
		}
		var (
			b    database.Batch
			snap string
			rows = make([][]valueCount, len(qs))
		)
		b.QueueRow(snapshotSQL, nil, &snap)
		for i, q := range qs {
			database.QueueCollect(&b, q, args, pgx.RowToStructByPos[valueCount], &rows[i])
		}
		if err := r.db.RunBatch(ctx, opSummary, &b); err != nil {
			return nil, nil, err
		}
		counts := make([]map[delta.Key]int64, len(qs))
		for i, set := range rows {
			if len(set) > follow.MaxViewKeys {
				return nil, nil, follow.ErrTooLarge
			}
			counts[i] = make(map[delta.Key]int64, len(set))
			for _, vc := range set {
				counts[i][delta.MakeKey(vc.Value)] = vc.Count
			}
		}
		sn, err := delta.ParseSnapshot(snap)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", opSummary, err)
		}
		return counts, sn, nil
	}
	key, _ := json.Marshal([]any{sets, f})
	got, out, err := r.views.Counts(ctx, fieldSummary+"\x00"+string(key), sels, read)
	if err != nil || out == follow.Off {
		return nil, false, false
	}
	// By set; a set not read is empty (its figures are not asked for).
	counts := make([]map[delta.Key]int64, summarySets)
	for i, set := range sets {
		counts[set] = got[i]
	}
	s = &MainReportSummary{ByUrgency: []ValueCount{}, ByStation: []ValueCount{}}
	if parts.Figures {
		if err := r.figures(ctx, counts, s); err != nil {
			return nil, false, false
		}
	}
	if parts.ByUrgency {
		if s.ByUrgency, err = r.breakdown(ctx, colUrgency, counts[setUrgency]); err != nil {
			return nil, false, false
		}
	}
	if parts.ByStation {
		if s.ByStation, err = r.breakdown(ctx, colStation, counts[setStation]); err != nil {
			return nil, false, false
		}
	}
	return s, out == follow.Followed, true
}

// breakdown is a summary's breakdown by c from its counts: value ascending, NULL last.
func (r *Repository) breakdown(ctx context.Context, c records.Column, counts map[delta.Key]int64) ([]ValueCount, error) {
	values := make([]*string, 0, len(counts))
	for k := range counts {
		values = append(values, k.Values()[0])
	}
	if err := r.coll.Sort(ctx, c, values); err != nil {
		return nil, err
	}
	out := make([]ValueCount, len(values))
	for i, v := range values {
		out[i] = ValueCount{Value: v, Count: counts[delta.MakeKey(v)]}
	}
	return out, nil
}

// figuresSQL completes the figures from the counts, reading no record: the distinct resource
// ids of the resource keys ($1, looked up in dim_resource), and the averages as avg computes
// them, the exact sum divided by the number of values in numeric ($2/$3 distance, $4/$5
// response time; NULL without values), then cast to float8.
const figuresSQL = `SELECT (SELECT count(DISTINCT resource_id) FROM dim_resource WHERE sk_resource = ANY($1::text[]::bigint[])),
  ($2::numeric / $3::numeric)::float8, ($4::numeric / $5::numeric)::float8`

// figures fills the summary's figures from its counts.
func (r *Repository) figures(ctx context.Context, counts []map[delta.Key]int64, s *MainReportSummary) error {
	for _, n := range counts[setTransported] {
		s.Records += n
	}
	var resources []string
	for k := range counts[setResource] {
		if v := k.Values()[0]; v != nil {
			resources = append(resources, *v)
		}
	}
	for k := range counts[setPatient] {
		if k.Values()[0] != nil {
			s.DistinctPatients++
		}
	}
	sum, nd, err := sumNumeric(counts[setDistance])
	if err != nil {
		return err
	}
	var sumResp, nr int64
	for k, n := range counts[setResponse] {
		v := k.Values()[0]
		if v == nil {
			continue
		}
		x, err := strconv.ParseInt(*v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: integer %q", delta.ErrCannotFollow, *v)
		}
		sumResp += x * n
		nr += n
	}
	args := []any{resources, nil, nil, nil, nil}
	if nd > 0 {
		args[1], args[2] = sum, strconv.FormatInt(nd, 10)
	}
	if nr > 0 {
		args[3], args[4] = strconv.FormatInt(sumResp, 10), strconv.FormatInt(nr, 10)
	}
	if resources == nil {
		args[0] = []string{}
	}
	if err := r.db.QueryRow(ctx, opSummary, figuresSQL, args, &s.DistinctResources, &s.AverageDistance, &s.AverageResponseTimeS); err != nil {
		return err
	}
	t, known := counts[setTransported][delta.MakeKey(&textTrue)], int64(0)
	for k, n := range counts[setTransported] {
		if k.Values()[0] != nil {
			known += n
		}
	}
	s.Transported = t
	if known > 0 {
		share := float64(t) / float64(known)
		s.TransportedShare = &share
	}
	return nil
}

// textTrue is a true boolean as the answers write it.
var textTrue = "true"

// sumNumeric is sum() of a numeric column from its values' counts: exact, written with the
// largest scale among the values (as numeric's sum keeps it, which decides the scale numeric's
// division gives the average), and how many values were not NULL. A column of numeric(p,s)
// writes every value with s decimals: such values are summed as integers of that scale, which
// takes a hundredth of the time exact fractions take (every followed summary sums every
// distinct value again after each load); other values, or a sum past int64, as fractions.
func sumNumeric(counts map[delta.Key]int64) (sum string, n int64, err error) {
	var (
		total int64
		scale = -1
	)
	fixed := true
	for k, c := range counts {
		v := k.Values()[0]
		if v == nil {
			continue
		}
		n += c
		if !fixed {
			continue
		}
		whole, frac, _ := strings.Cut(*v, ".")
		if scale < 0 {
			scale = len(frac)
		}
		x, perr := strconv.ParseInt(whole+frac, 10, 64)
		hi, lo := bits.Mul64(uint64(abs(x)), uint64(c))
		if perr != nil || len(frac) != scale || scale > 18 || c < 0 || hi != 0 || lo > math.MaxInt64 ||
			!addFits(total, sign(x)*int64(lo)) || whole == "" || whole == "-" {
			fixed = false
			continue
		}
		total += sign(x) * int64(lo)
	}
	if n == 0 {
		return "", 0, nil
	}
	if fixed {
		return decimalText(total, scale), n, nil
	}
	var (
		r        big.Rat
		maxScale int
	)
	for k, c := range counts {
		v := k.Values()[0]
		if v == nil {
			continue
		}
		x, ok := new(big.Rat).SetString(*v)
		if !ok {
			return "", 0, fmt.Errorf("%w: numeric %q", delta.ErrCannotFollow, *v)
		}
		r.Add(&r, x.Mul(x, new(big.Rat).SetInt64(c)))
		if _, frac, ok := strings.Cut(*v, "."); ok {
			maxScale = max(maxScale, len(frac))
		}
	}
	return r.FloatString(maxScale), n, nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func sign(x int64) int64 {
	if x < 0 {
		return -1
	}
	return 1
}

// addFits says whether a+b is within int64.
func addFits(a, b int64) bool {
	return (b <= 0 || a <= math.MaxInt64-b) && (b >= 0 || a >= math.MinInt64-b)
}

// decimalText writes v / 10^scale as numeric writes it: scale decimals, a zero before the
// point, a minus sign when negative.
func decimalText(v int64, scale int) string {
	neg := v < 0
	d := strconv.FormatUint(uint64(abs(v)), 10)
	if len(d) <= scale {
		d = strings.Repeat("0", scale-len(d)+1) + d
	}
	if scale > 0 {
		d = d[:len(d)-scale] + "." + d[len(d)-scale:]
	}
	if neg {
		d = "-" + d
	}
	return d
}
