package answercache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/emsanalytics/emsquery/platform/changes"
)

// meterName is the instrumentation scope of the cache's instruments.
const meterName = "github.com/emsanalytics/emsquery/platform/answercache"

// cacheMetrics are the cache's instruments. Requests are counted per endpoint (http.route):
// answered from memory (hits), computed and kept or keepable (misses), answered with what an
// identical request in flight computed (coalesced), or not cacheable (bypasses).
type cacheMetrics struct {
	hits, misses, coalesced, bypasses metric.Int64Counter
	invalidations, evictions          metric.Int64Counter
	endedByTable                      metric.Int64Counter
	tables                            sync.Map // table -> []metric.AddOption
	reasons                           map[string][]metric.AddOption
	routes                            sync.Map // route -> []metric.AddOption
	reg                               metric.Registration
}

// newCacheMetrics creates the instruments; stats and age are read when the gauges are
// collected.
func newCacheMetrics(mp metric.MeterProvider, stats func() (int, int64), age func() (time.Duration, bool), health func() changes.Health) (*cacheMetrics, error) {
	meter := mp.Meter(meterName)
	m := &cacheMetrics{reasons: map[string][]metric.AddOption{}}
	var errs []error
	counter := func(name, desc, unit string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	m.hits = counter("emsquery.cache.hits", "GraphQL requests answered from memory.", "{request}")
	m.misses = counter("emsquery.cache.misses", "GraphQL requests computed whose answer is kept (or could be).", "{request}")
	m.coalesced = counter("emsquery.cache.coalesced", "GraphQL requests that waited for an identical request in flight and got its answer.", "{request}")
	m.bypasses = counter("emsquery.cache.bypasses", "GraphQL requests computed whose answer cannot be kept (errors, too large, no current data version).", "{request}")
	m.invalidations = counter("emsquery.cache.invalidations", "Times every answer in memory was dropped, by reason: data_changed (the data version moved), notified (NOTIFY), reconnected (the version could not be read for a while).", "{invalidation}")
	m.endedByTable = counter("emsquery.cache.ended", "Answers in memory ended by a committed change to a table they read (CACHE__CHANGES=replication), by table; an answer of several tables changed at once counts under one of them.", "{answer}")
	m.evictions = counter("emsquery.cache.evictions", "Answers dropped to keep within CACHE__MAX_BYTES.", "{answer}")
	for _, r := range []string{reasonDataChanged, reasonNotified, reasonReconnected} {
		m.reasons[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("emsquery.cache.invalidation.reason", r)))}
	}
	entries, err := meter.Int64ObservableGauge("emsquery.cache.entries",
		metric.WithDescription("Answers kept in memory."), metric.WithUnit("{answer}"))
	errs = append(errs, err)
	size, err := meter.Int64ObservableGauge("emsquery.cache.size",
		metric.WithDescription("Bytes the answers in memory take, their keys and bookkeeping included (at most CACHE__MAX_BYTES)."), metric.WithUnit("By"))
	errs = append(errs, err)
	versionAge, err := meter.Float64ObservableGauge("emsquery.cache.data_version.age",
		metric.WithDescription("Seconds since the latest successful read of the data version was sent; answers from memory are served only while it is below CACHE__MAX_STALENESS."), metric.WithUnit("s"))
	errs = append(errs, err)
	failures, err := meter.Int64ObservableCounter("emsquery.cache.replication.failures",
		metric.WithDescription("Times the replication stream of CACHE__CHANGES=replication was lost."), metric.WithUnit("{failure}"))
	errs = append(errs, err)
	recoveries, err := meter.Int64ObservableCounter("emsquery.cache.replication.recoveries",
		metric.WithDescription("Times the replication stream was started again after a loss."), metric.WithUnit("{recovery}"))
	errs = append(errs, err)
	lag, err := meter.Int64ObservableGauge("emsquery.cache.replication.lag",
		metric.WithDescription("Bytes of WAL the replication stream was behind the primary's flushed position at the latest poll."), metric.WithUnit("By"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cache metrics: %w", err)
	}
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n, b := stats()
		o.ObserveInt64(entries, int64(n))
		o.ObserveInt64(size, b)
		if a, ok := age(); ok {
			o.ObserveFloat64(versionAge, a.Seconds())
		}
		if h := health(); h.Source == string(changes.ModeReplication) {
			o.ObserveInt64(failures, h.Failures)
			o.ObserveInt64(recoveries, h.Recoveries)
			o.ObserveInt64(lag, h.LagBytes)
		}
		return nil
	}, entries, size, versionAge, failures, recoveries, lag)
	if err != nil {
		return nil, fmt.Errorf("cache metrics: %w", err)
	}
	return m, nil
}

func (m *cacheMetrics) invalidated(reason string) {
	m.invalidations.Add(context.Background(), 1, m.reasons[reason]...)
}

// ended counts n answers ended by a change to table.
func (m *cacheMetrics) ended(table string, n int) {
	if n == 0 {
		return
	}
	opts, ok := m.tables.Load(table)
	if !ok {
		opts, _ = m.tables.LoadOrStore(table, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("db.collection.name", table)))})
	}
	m.endedByTable.Add(context.Background(), int64(n), opts.([]metric.AddOption)...)
}

func (m *cacheMetrics) evicted(n int) { m.evictions.Add(context.Background(), int64(n)) }

// count adds one request of outcome o at route; the attribute sets are made once per route.
func (m *cacheMetrics) count(ctx context.Context, route string, o Outcome) {
	opts, ok := m.routes.Load(route)
	if !ok {
		opts, _ = m.routes.LoadOrStore(route, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("http.route", route)))})
	}
	add := opts.([]metric.AddOption)
	switch o {
	case Hit:
		m.hits.Add(ctx, 1, add...)
	case Miss:
		m.misses.Add(ctx, 1, add...)
	case Coalesced:
		m.coalesced.Add(ctx, 1, add...)
	default:
		m.bypasses.Add(ctx, 1, add...)
	}
}
