// Package follow keeps the counts behind counting answers (records_count, record_series,
// distinct_values, unique_counts, main_report_summary) up to date from the rows the replication
// change source delivers (contract section 6.13), so that such an answer, once its kept copy
// ends, is computed again from memory instead of by a statement on fact_record.
//
// A module names a question by a key and describes its counts as delta.Selectors; Views.Counts
// returns them: from a view kept up to date since an earlier question, or read once by the
// module's own statement (with its snapshot) and kept from then on. Views receive every
// committed transaction from platform/changes (the Follower interface there), before the tables'
// versions move, so an answer computed after its kept copy ended includes the change that ended
// it. Everything is dropped whenever the stream may have missed a change (lost, started again,
// a definition change): the next question reads again.
//
// The package knows no module: what a view counts and how it is read comes from the caller.
package follow

import (
	"container/list"
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/emsanalytics/emsquery/platform/replication"
	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

// Bounds of what the views hold, so that no mix of questions makes them grow without end:
// every view costs memory and, on every load, the time to apply its rows.
const (
	// MaxViews is how many questions are followed at once; the least recently asked goes.
	MaxViews = 1000
	// MaxKeys bounds the counted keys (values, buckets) of all views together. MaxViewKeys
	// bounds one view's: a read that returns more (ErrTooLarge) leaves its question computed by
	// the database, and a view that grows past it is dropped.
	MaxKeys     = 1_000_000
	MaxViewKeys = 100_000
	// maxPendingRows bounds the rows kept for a view being read (the transactions that commit
	// while its statement runs); past it the view is not kept.
	maxPendingRows = 1_000_000
	// maxApplyWork bounds the rows times views one transaction is applied to: past it every
	// view is dropped (their questions are read again), so that no load holds the stream for
	// long, however many questions are followed.
	maxApplyWork = 20_000_000
	// maxRefused bounds the questions remembered as too large to follow.
	maxRefused = 10_000
)

// ErrTooLarge is what a Read returns when the counts exceed MaxViewKeys (it stops reading
// there): the question is then computed by the database, now and later.
var ErrTooLarge = errors.New("too many counts to follow")

// Outcome says where Counts' answer came from.
type Outcome int

const (
	// Off: nothing is followed (no replication change source, the stream lost); the caller
	// computes the answer as it would without this package.
	Off Outcome = iota
	// Followed: the counts were kept up to date from the changed rows; no statement ran.
	Followed
	// Fresh: the counts were read by the caller's statement now (and are followed from now on
	// when the view could be kept).
	Fresh
)

// Read reads a question's counts from the database, one map per selector (keys made as the
// selectors make them), with the snapshot of the statement that read them.
type Read func(ctx context.Context) ([]map[delta.Key]int64, *delta.Snapshot, error)

// Views are the followed questions. A nil *Views follows nothing.
type Views struct {
	mu    sync.Mutex
	on    bool
	gen   uint64 // moves whenever what is kept is dropped
	views map[string]*view
	lru   list.List // of *view, most recently used first
	keys  int
	// pending are the views being read: each collects the transactions that commit meanwhile.
	pending map[*pending]struct{}
	// refused are the questions whose counts were too large to follow (ErrTooLarge).
	refused map[string]bool

	followed, computed metric.Int64Counter
	fields             sync.Map // field -> []metric.AddOption
}

type view struct {
	key  string
	ctrs []*delta.Counter
	keys int
	elem *list.Element
}

type pending struct {
	gen    uint64
	txs    []*replication.Transaction
	rows   int
	failed bool
}

// meterName is the instrumentation scope of the instruments.
const meterName = "github.com/emsanalytics/emsquery/platform/follow"

// New returns empty views, off until the change source says the stream runs (Following).
func New(mp metric.MeterProvider) (*Views, error) {
	meter := mp.Meter(meterName)
	v := &Views{views: map[string]*view{}, pending: map[*pending]struct{}{}, refused: map[string]bool{}}
	var err1, err2 error
	v.followed, err1 = meter.Int64Counter("emsquery.cache.followed",
		metric.WithDescription("Counting answers computed from counts followed from the changed rows, without a statement on fact_record, by field (graphql.field.name)."),
		metric.WithUnit("{answer}"))
	v.computed, err2 = meter.Int64Counter("emsquery.cache.recomputed",
		metric.WithDescription("Counting answers computed by the database (not followed: first asked, nothing followed, or a selection or change that cannot be followed exactly), by field (graphql.field.name)."),
		metric.WithUnit("{answer}"))
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return v, nil
}

// Following says whether every committed transaction is handed to Commit from now on (the
// replication stream runs): either way, what was kept is dropped, as a change may have been
// missed (a lost stream, a new slot, a definition change).
func (v *Views) Following(on bool) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.on = on
	v.gen++
	clear(v.views)
	v.lru.Init()
	v.keys = 0
	for p := range v.pending {
		p.failed = true
	}
	clear(v.pending)
	clear(v.refused)
}

// Generation moves whenever what is kept is dropped (Following): a caller keeping something
// derived from the data (an order of values) drops it too when it moved.
func (v *Views) Generation() uint64 {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gen
}

// Commit applies a committed transaction to every view, and keeps it for the views being read.
// A view that cannot follow it (no old row, too large) is dropped: its question is read again.
func (v *Views) Commit(tx *replication.Transaction) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.on {
		return
	}
	if len(tx.Rows)*len(v.views) > maxApplyWork {
		clear(v.views)
		v.lru.Init()
		v.keys = 0
	}
	for _, w := range v.apply(tx) {
		v.drop(w.key, w)
	}
	// A view whose count grew past its bound goes too: counted after the loop, once.
	for k, w := range v.views {
		n := 0
		for _, c := range w.ctrs {
			n += c.Len()
		}
		v.keys += n - w.keys
		w.keys = n
		if n > MaxViewKeys {
			v.drop(k, w)
		}
	}
	v.evict()
	for p := range v.pending {
		p.txs = append(p.txs, tx)
		p.rows += len(tx.Rows)
		if p.rows > maxPendingRows {
			p.failed = true
			delete(v.pending, p)
		}
	}
}

// parallelApplyWork is the rows times views from which apply spreads the views over the
// processors: below it, starting goroutines costs more than it saves.
const parallelApplyWork = 20_000

// apply applies tx to every view, and returns the views that cannot follow it. A view's
// counters are its own and tx is only read, so large loads are applied on every processor,
// each taking a share of the views: the stream waits for the slowest share, not for them all.
func (v *Views) apply(tx *replication.Transaction) []*view {
	all := make([]*view, 0, len(v.views))
	for _, w := range v.views {
		all = append(all, w)
	}
	workers := min(runtime.GOMAXPROCS(0), len(all))
	if len(tx.Rows)*len(all) < parallelApplyWork {
		workers = 1
	}
	failed := make([][]*view, workers)
	var wg sync.WaitGroup
	for i := range workers {
		share := all[i*len(all)/workers : (i+1)*len(all)/workers]
		run := func() {
			for _, w := range share {
				for _, c := range w.ctrs {
					if _, err := c.Apply(tx); err != nil {
						failed[i] = append(failed[i], w)
						break
					}
				}
			}
		}
		if i == workers-1 {
			run() // the last share on this goroutine
			continue
		}
		wg.Go(run)
	}
	wg.Wait()
	return slices.Concat(failed...)
}

func (v *Views) drop(k string, w *view) {
	delete(v.views, k)
	v.lru.Remove(w.elem)
	v.keys -= w.keys
}

// evict drops the least recently asked views while over the bounds.
func (v *Views) evict() {
	for len(v.views) > MaxViews || v.keys > MaxKeys {
		last := v.lru.Back()
		if last == nil {
			return
		}
		w := last.Value.(*view)
		v.drop(w.key, w)
	}
}

// Counts are the counts of question key, one map per selector: followed when a view of it is
// kept, otherwise read by read and kept from then on. Off means nothing is followed (the
// caller computes as it would without views). The maps are the caller's.
func (v *Views) Counts(ctx context.Context, key string, sels []delta.Selector, read Read) ([]map[delta.Key]int64, Outcome, error) {
	if v == nil {
		return nil, Off, nil
	}
	v.mu.Lock()
	if !v.on || v.refused[key] {
		v.mu.Unlock()
		return nil, Off, nil
	}
	if w := v.views[key]; w != nil {
		v.lru.MoveToFront(w.elem)
		out := make([]map[delta.Key]int64, len(w.ctrs))
		for i, c := range w.ctrs {
			out[i] = c.Counts()
		}
		v.mu.Unlock()
		return out, Followed, nil
	}
	p := &pending{gen: v.gen}
	v.pending[p] = struct{}{}
	v.mu.Unlock()

	counts, snap, err := read(ctx)

	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.pending, p)
	if errors.Is(err, ErrTooLarge) {
		if len(v.refused) >= maxRefused {
			clear(v.refused)
		}
		v.refused[key] = true
		return nil, Off, nil
	}
	if err != nil {
		return nil, Fresh, err
	}
	if p.failed || p.gen != v.gen || !v.on || snap == nil || len(counts) != len(sels) {
		return counts, Fresh, nil
	}
	w := &view{key: key, ctrs: make([]*delta.Counter, len(sels))}
	for i, s := range sels {
		w.ctrs[i] = delta.NewCounter(s, counts[i], snap)
		w.keys += len(counts[i])
	}
	if w.keys > MaxViewKeys {
		return counts, Fresh, nil
	}
	// The transactions that committed while the statement ran: the snapshot says which it saw.
	for _, tx := range p.txs {
		for _, c := range w.ctrs {
			if _, err := c.Apply(tx); err != nil {
				return counts, Fresh, nil
			}
		}
	}
	out := counts
	if len(p.txs) > 0 {
		out = make([]map[delta.Key]int64, len(w.ctrs))
		for i, c := range w.ctrs {
			out[i] = c.Counts()
		}
		w.keys = 0
		for _, c := range w.ctrs {
			w.keys += c.Len()
		}
	}
	if old := v.views[key]; old != nil {
		v.drop(key, old)
	}
	w.elem = v.lru.PushFront(w)
	v.views[key] = w
	v.keys += w.keys
	v.evict()
	return out, Fresh, nil
}

// Count counts one answer of field: followed (from followed counts) or computed by the database.
func (v *Views) Count(ctx context.Context, field string, followed bool) {
	if v == nil {
		return
	}
	opts, ok := v.fields.Load(field)
	if !ok {
		opts, _ = v.fields.LoadOrStore(field, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("graphql.field.name", field)))})
	}
	if followed {
		v.followed.Add(ctx, 1, opts.([]metric.AddOption)...)
		return
	}
	v.computed.Add(ctx, 1, opts.([]metric.AddOption)...)
}

// Len is the number of questions followed now.
func (v *Views) Len() int {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.views)
}

// On says whether questions are followed now (the replication stream runs).
func (v *Views) On() bool {
	if v == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.on
}
