package follow

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/emsanalytics/emsquery/platform/replication"
	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

// The rows here are made by hand: what is tested is the views' bookkeeping (when a question is
// followed, read, dropped, bounded), not the replication stream or the counting, which
// platform/replication/delta tests against SQL.

var rel = &replication.Relation{Table: "t", Columns: []replication.Column{{Name: "v", TypeName: "text"}}}

func insert(xid uint32, values ...string) *replication.Transaction {
	tx := &replication.Transaction{Xid: xid, Tables: []string{"t"}}
	for _, v := range values {
		tx.Rows = append(tx.Rows, replication.Row{Op: replication.Insert, Relation: rel, New: []replication.Value{{Text: v}}})
	}
	return tx
}

var byValue = []delta.Selector{{Table: "t", Key: delta.Columns("v")}}

func newViews(t *testing.T) *Views {
	t.Helper()
	v, err := New(noop.NewMeterProvider())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// reader reads counts of nothing under a snapshot that saw every transaction before xmax.
func reader(reads *int, xmax uint64, counts map[delta.Key]int64) Read {
	return func(context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error) {
		*reads++
		c := map[delta.Key]int64{}
		for k, n := range counts {
			c[k] = n
		}
		return []map[delta.Key]int64{c}, &delta.Snapshot{Xmin: xmax, Xmax: xmax}, nil
	}
}

func TestViewsFollowAfterOneRead(t *testing.T) {
	ctx := context.Background()
	v := newViews(t)
	reads := 0
	if _, out, _ := v.Counts(ctx, "q", byValue, reader(&reads, 10, nil)); out != Off || reads != 0 {
		t.Fatalf("before Following: %v after %d reads, want Off without reading", out, reads)
	}
	v.Following(true)
	counts, out, err := v.Counts(ctx, "q", byValue, reader(&reads, 10, map[delta.Key]int64{delta.MakeKey(ptr("a")): 2}))
	if err != nil || out != Fresh || reads != 1 || counts[0][delta.MakeKey(ptr("a"))] != 2 {
		t.Fatalf("first: %v %v %v after %d reads", counts, out, err, reads)
	}
	v.Commit(insert(9, "a"))       // seen by the snapshot: not counted again
	v.Commit(insert(11, "a", "b")) // after it
	counts, out, _ = v.Counts(ctx, "q", byValue, reader(&reads, 10, nil))
	if out != Followed || reads != 1 || counts[0][delta.MakeKey(ptr("a"))] != 3 || counts[0][delta.MakeKey(ptr("b"))] != 1 {
		t.Fatalf("followed: %v %v after %d reads, want a:3 b:1 without a read", counts, out, reads)
	}
	// A transaction larger than the stream keeps (its rows dropped) drops the view: read again.
	v.Commit(&replication.Transaction{Xid: 12, Tables: []string{"t"}, Overflow: true})
	if _, out, _ = v.Counts(ctx, "q", byValue, reader(&reads, 13, nil)); out != Fresh || reads != 2 {
		t.Fatalf("after an overflowing transaction: %v after %d reads, want Fresh", out, reads)
	}
	// A change that cannot be followed (no old row) drops the view: read again.
	v.Commit(&replication.Transaction{Xid: 13, Tables: []string{"t"}, Rows: []replication.Row{{Op: replication.Delete, Relation: rel}}})
	if _, out, _ = v.Counts(ctx, "q", byValue, reader(&reads, 14, nil)); out != Fresh || reads != 3 {
		t.Fatalf("after a delete without the old row: %v after %d reads, want Fresh", out, reads)
	}
	// Lost: nothing is followed; back: read again.
	v.Following(false)
	if _, out, _ = v.Counts(ctx, "q", byValue, reader(&reads, 14, nil)); out != Off {
		t.Fatalf("lost: %v, want Off", out)
	}
	v.Following(true)
	if _, out, _ = v.Counts(ctx, "q", byValue, reader(&reads, 15, nil)); out != Fresh || reads != 4 {
		t.Fatalf("resumed: %v after %d reads, want Fresh", out, reads)
	}
}

// A transaction that commits while the counts are read is applied when the snapshot did not
// see it; a loss meanwhile keeps no view.
func TestViewsReadMeanwhile(t *testing.T) {
	ctx := context.Background()
	v := newViews(t)
	v.Following(true)
	counts, _, _ := v.Counts(ctx, "q", byValue, func(context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error) {
		v.Commit(insert(20, "a")) // committed before the snapshot, delivered during the read
		v.Commit(insert(21, "a")) // still running at the snapshot
		return []map[delta.Key]int64{{delta.MakeKey(ptr("a")): 1}}, &delta.Snapshot{Xmin: 21, Xmax: 22, Xip: []uint64{21}}, nil
	})
	if n := counts[0][delta.MakeKey(ptr("a"))]; n != 2 {
		t.Fatalf("a: %d, want 2 (1 read, 20 seen by the read, 21 not)", n)
	}
	_, _, _ = v.Counts(ctx, "r", byValue, func(context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error) {
		v.Following(false)
		v.Following(true)
		return []map[delta.Key]int64{{}}, &delta.Snapshot{Xmin: 30, Xmax: 30}, nil
	})
	if v.Len() != 0 {
		t.Fatalf("%d views kept, want none: the stream was lost while r was read", v.Len())
	}
}

// The bounds: at most MaxViews questions, a read past MaxViewKeys is not followed (and not read
// again), a transaction too large for the views drops them.
func TestViewsBounded(t *testing.T) {
	ctx := context.Background()
	v := newViews(t)
	v.Following(true)
	reads := 0
	for i := range MaxViews + 50 {
		v.Counts(ctx, "q"+strconv.Itoa(i), byValue, reader(&reads, 10, nil))
	}
	if v.Len() != MaxViews {
		t.Fatalf("%d views, want MaxViews %d", v.Len(), MaxViews)
	}
	tooLarge := func(context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error) {
		reads++
		return nil, nil, ErrTooLarge
	}
	for range 3 {
		if _, out, err := v.Counts(ctx, "big", byValue, tooLarge); out != Off || err != nil {
			t.Fatalf("too large: %v %v, want Off", out, err)
		}
	}
	if reads != MaxViews+50+1 {
		t.Fatalf("%d reads, want the large question read once", reads)
	}
	rows := make([]string, maxApplyWork/MaxViews+1)
	v.Commit(insert(11, rows...))
	if v.Len() != 0 {
		t.Fatalf("%d views after a transaction of %d rows, want none", v.Len(), len(rows))
	}
	if _, _, err := v.Counts(ctx, "x", byValue, func(context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error) {
		return nil, nil, errors.New("boom")
	}); err == nil {
		t.Fatal("a read's error is not returned")
	}
}

func ptr(s string) *string { return &s }

// A load large enough to be applied on every processor (rows × views past parallelApplyWork):
// every view ends with the counts of its own rows, and a view that cannot follow the load is
// dropped, whichever share it was in. go test -race checks the shares touch nothing in common.
func TestViewsApplyLargeLoadSideBySide(t *testing.T) {
	ctx := context.Background()
	v := newViews(t)
	v.Following(true)
	const views, rows, values = 200, 500, 10
	selector := func(i int) []delta.Selector {
		if i%20 == 7 { // a column the table does not have: this view cannot follow
			return []delta.Selector{{Table: "t", Key: delta.Columns("w")}}
		}
		return []delta.Selector{{Table: "t", Where: delta.In("v", ptr(strconv.Itoa(i%values))), Key: delta.Columns("v")}}
	}
	reads := 0
	for i := range views {
		if _, out, err := v.Counts(ctx, "q"+strconv.Itoa(i), selector(i), reader(&reads, 10, nil)); err != nil || out != Fresh {
			t.Fatalf("view %d: %v %v", i, out, err)
		}
	}
	load := make([]string, rows)
	for i := range load {
		load[i] = strconv.Itoa(i % values)
	}
	if rows*views < parallelApplyWork {
		t.Fatalf("%d rows × %d views is applied on one goroutine", rows, views)
	}
	v.Commit(insert(11, load...))
	reads = 0
	for i := range views {
		counts, out, err := v.Counts(ctx, "q"+strconv.Itoa(i), selector(i), reader(&reads, 12, nil))
		if err != nil {
			t.Fatal(err)
		}
		if i%20 == 7 {
			if out != Fresh {
				t.Errorf("view %d, which cannot follow the load: %v, want Fresh (read again)", i, out)
			}
			continue
		}
		key := delta.MakeKey(ptr(strconv.Itoa(i % values)))
		if out != Followed || len(counts[0]) != 1 || counts[0][key] != rows/values {
			t.Errorf("view %d: %v %v, want Followed with %d under %q", i, out, counts[0], rows/values, key)
		}
	}
	if want := views / 20; reads != want {
		t.Errorf("%d questions read again, want the %d that could not follow", reads, want)
	}
}

// What applying one load costs the stream with many questions followed: 1,000 rows on 200
// views, each counting its own value.
//
//	go test ./platform/follow/ -run '^$' -bench ViewsCommit
func BenchmarkViewsCommit(b *testing.B) {
	v, err := New(noop.NewMeterProvider())
	if err != nil {
		b.Fatal(err)
	}
	v.Following(true)
	const views, rows, values = 200, 1000, 50
	for i := range views {
		sel := []delta.Selector{{Table: "t", Where: delta.In("v", ptr(strconv.Itoa(i%values))), Key: delta.Columns("v")}}
		n := 0
		if _, _, err := v.Counts(context.Background(), "q"+strconv.Itoa(i), sel, reader(&n, 1, nil)); err != nil {
			b.Fatal(err)
		}
	}
	load := make([]string, rows)
	for i := range load {
		load[i] = strconv.Itoa(i % values)
	}
	b.ReportAllocs()
	xid := uint32(10)
	for b.Loop() {
		xid++
		v.Commit(insert(xid, load...))
	}
	if v.Len() != views {
		b.Fatalf("%d views kept, want %d", v.Len(), views)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*views), "ns/row-view")
}
