package database

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// The measurements on a query's path allocate nothing of their own with the real SDK: the
// attribute sets are built once.
func TestMetricsAllocateNothing(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	m, err := newPoolMetrics(mp, Options{Hosts: []string{"db"}, Ports: []int{5432}, Name: "analytics"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	m.operation(ctx, "unique counts", start, nil) // builds the set once
	if n := testing.AllocsPerRun(1000, func() { m.operation(ctx, "unique counts", start, nil) }); n != 0 {
		t.Errorf("operation: %v allocations per call, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { m.acquired(ctx, start, false) }); n != 0 {
		t.Errorf("acquired: %v allocations per call, want 0", n)
	}
}

func TestErrorType(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want string
	}{
		{context.Background(), nil, ""},
		{context.Background(), fmt.Errorf("q: %w", &pgconn.PgError{Code: "57014"}), "57014"},
		{context.Background(), apierr.Unavailable(errors.New("down")), "SERVICE_UNAVAILABLE"},
		{expired, context.DeadlineExceeded, "TIMEOUT"},
		{canceled, context.Canceled, "canceled"},
		{context.Background(), errors.New("scan: odd column"), "_OTHER"},
	} {
		if got := errorType(tc.ctx, tc.err); got != tc.want {
			t.Errorf("errorType(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
