package database

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// meterName is the instrumentation scope of the pool's and the queries' instruments.
const meterName = "github.com/emsanalytics/emsquery/platform/database"

// Bucket boundaries in seconds (OpenTelemetry's advice for durations, widened to the 30 s pool
// timeout). The waits get finer buckets: most take microseconds.
var (
	operationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30}
	waitBuckets      = []float64{0.00001, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// poolMetrics measures the pool and the repositories' operations. The attribute sets are built
// once (per pool, per operation name and error type) so that a measurement allocates nothing
// beyond what the OpenTelemetry SDK needs.
type poolMetrics struct {
	opDuration metric.Float64Histogram
	waitTime   metric.Float64Histogram
	timeouts   metric.Int64Counter
	pending    atomic.Int64 // acquire calls waiting for a connection

	base []attribute.KeyValue // db.system.name, db.namespace
	// The options are kept as slices: passing one with ... allocates nothing.
	poolRecord []metric.RecordOption
	poolAdd    []metric.AddOption
	poolObs    metric.ObserveOption
	idleObs    metric.ObserveOption
	usedObs    metric.ObserveOption
	mu         sync.RWMutex
	opAttrs    map[opKey][]metric.RecordOption
	maxAttrs   int
}

type opKey struct{ op, errType string }

// poolName is host:port/database, with every host:port of a list, comma separated.
func poolName(d Options) string {
	var b strings.Builder
	for i, e := range d.Endpoints() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(e.String())
	}
	return b.String() + "/" + d.Name
}

// newPoolMetrics creates the instruments on mp and registers the callback that reads the
// pool's statistics at each collection.
func newPoolMetrics(mp metric.MeterProvider, d Options, pool *pgxpool.Pool) (*poolMetrics, error) {
	meter := mp.Meter(meterName)
	poolName := attribute.String("db.client.connection.pool.name", poolName(d))
	m := &poolMetrics{
		base: []attribute.KeyValue{
			attribute.String("db.system.name", "postgresql"),
			attribute.String("db.namespace", d.Name),
		},
		idleObs:  metric.WithAttributeSet(attribute.NewSet(poolName, attribute.String("db.client.connection.state", "idle"))),
		usedObs:  metric.WithAttributeSet(attribute.NewSet(poolName, attribute.String("db.client.connection.state", "used"))),
		opAttrs:  map[opKey][]metric.RecordOption{},
		maxAttrs: 1000,
	}
	poolOpt := metric.WithAttributeSet(attribute.NewSet(poolName))
	m.poolRecord, m.poolAdd, m.poolObs = []metric.RecordOption{poolOpt}, []metric.AddOption{poolOpt}, poolOpt
	var errs []error
	var err error
	m.opDuration, err = meter.Float64Histogram("db.client.operation.duration",
		metric.WithDescription("Duration of the repositories' database operations, from sending the query to the last row read."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(operationBuckets...))
	errs = append(errs, err)
	m.waitTime, err = meter.Float64Histogram("db.client.connection.wait_time",
		metric.WithDescription("Time spent waiting for a connection from the pool (including waits that ended in a timeout)."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(waitBuckets...))
	errs = append(errs, err)
	m.timeouts, err = meter.Int64Counter("db.client.connection.timeouts",
		metric.WithDescription("Requests that found no free connection within DATABASE__POOL_TIMEOUT."),
		metric.WithUnit("{timeout}"))
	errs = append(errs, err)
	count, err := meter.Int64ObservableUpDownCounter("db.client.connection.count",
		metric.WithDescription("Open connections of the pool, by state (idle, used)."),
		metric.WithUnit("{connection}"))
	errs = append(errs, err)
	maxConns, err := meter.Int64ObservableUpDownCounter("db.client.connection.max",
		metric.WithDescription("Most open connections the pool allows (DATABASE__POOL_SIZE + DATABASE__MAX_OVERFLOW)."),
		metric.WithUnit("{connection}"))
	errs = append(errs, err)
	pending, err := meter.Int64ObservableUpDownCounter("db.client.connection.pending_requests",
		metric.WithDescription("Requests waiting for a connection from the pool."),
		metric.WithUnit("{request}"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("database metrics: %w", err)
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := pool.Stat()
		o.ObserveInt64(count, int64(st.IdleConns()), m.idleObs)
		o.ObserveInt64(count, int64(st.AcquiredConns()), m.usedObs)
		o.ObserveInt64(maxConns, int64(st.MaxConns()), m.poolObs)
		o.ObserveInt64(pending, m.pending.Load(), m.poolObs)
		return nil
	}, count, maxConns, pending)
	if err != nil {
		return nil, fmt.Errorf("database metrics: %w", err)
	}
	return m, nil
}

// acquired records one wait for a connection; timedOut says it ended at DATABASE__POOL_TIMEOUT.
func (m *poolMetrics) acquired(ctx context.Context, start time.Time, timedOut bool) {
	m.waitTime.Record(ctx, time.Since(start).Seconds(), m.poolRecord...)
	if timedOut {
		m.timeouts.Add(ctx, 1, m.poolAdd...)
	}
}

// operation records one repository operation that started at start and ended with err.
// Measure records a statement run on a connection outside the pool (the change source's poll)
// in db.client.operation.duration, as the pool's helpers record theirs.
func (db *DB) Measure(ctx context.Context, op string, start time.Time, err error) {
	db.metrics.operation(ctx, op, start, err)
}

func (m *poolMetrics) operation(ctx context.Context, op string, start time.Time, err error) {
	m.opDuration.Record(ctx, time.Since(start).Seconds(), m.attrs(op, errorType(ctx, err))...)
}

// attrs returns the attribute set of op and errType, built on first use. Operation names are
// constants in the repositories, so the cache stays small; past maxAttrs the set is built per
// call rather than kept.
func (m *poolMetrics) attrs(op, errType string) []metric.RecordOption {
	k := opKey{op, errType}
	m.mu.RLock()
	opt, ok := m.opAttrs[k]
	m.mu.RUnlock()
	if ok {
		return opt
	}
	kv := append(append(make([]attribute.KeyValue, 0, len(m.base)+2), m.base...), attribute.String("db.operation.name", op))
	if errType != "" {
		kv = append(kv, attribute.String("error.type", errType))
	}
	opt = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	m.mu.Lock()
	if len(m.opAttrs) < m.maxAttrs {
		m.opAttrs[k] = opt
	}
	m.mu.Unlock()
	return opt
}

// errorType is the error.type of a failed operation: PostgreSQL's SQLSTATE when the server
// answered with an error, TIMEOUT when the request's deadline passed, "canceled" when the client
// went away, else the contract's code (SERVICE_UNAVAILABLE) or "_OTHER". Empty for success.
func errorType(ctx context.Context, err error) string {
	if err == nil {
		return ""
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return string(apierr.Timeout) // the request's own deadline
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return "canceled"
	}
	var ae *apierr.Error
	if errors.As(Classify(err), &ae) {
		return string(ae.Code)
	}
	return "_OTHER"
}
