package reports

import (
	"log/slog"
	"strconv"

	"golang.org/x/sync/semaphore"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/config"
)

// ExportSlots bounds the CSV exports running at once (LIMITS__MAX_CONCURRENT_EXPORTS). An export
// holds one database connection from its start until its client has the last row, which for a
// slow download is minutes: without a bound, a handful of exports would hold the whole pool and
// every GraphQL request would wait for a connection. With it, exports never hold more than that
// many connections, and GraphQL always has the rest of the pool.
//
// An export past the bound is refused at once (503, Retry-After) rather than queued: a queued
// export would hold its client's connection and memory while it waits, and a client told to
// come back later can choose when.
type ExportSlots struct {
	sem *semaphore.Weighted
	max int
}

// exportRetryAfter is the Retry-After of an export refused for want of a slot, in seconds:
// exports take seconds to minutes, so sooner would mostly be refused again.
const exportRetryAfter = 10

// NewExportSlots returns the bound of the settings. It warns when the bound leaves GraphQL no
// connection of DATABASE__POOL_SIZE + DATABASE__MAX_OVERFLOW while exports run.
func NewExportSlots(l config.Limits, d config.Database, log *slog.Logger) *ExportSlots {
	n := int(l.MaxConcurrentExports)
	if pool := int(d.PoolSize + d.MaxOverflow); n >= pool {
		log.Warn("LIMITS__MAX_CONCURRENT_EXPORTS is not below DATABASE__POOL_SIZE + DATABASE__MAX_OVERFLOW: exports running at once can hold every database connection, and GraphQL requests then wait for one",
			"max_concurrent_exports", n, "pool_max", pool)
	}
	return &ExportSlots{sem: semaphore.NewWeighted(int64(n)), max: n}
}

// take takes a slot, or returns the 503 SERVICE_UNAVAILABLE to answer (the caller sets
// Retry-After). The slot must be given back with release exactly once.
func (s *ExportSlots) take() error {
	if s.sem.TryAcquire(1) {
		return nil
	}
	return &apierr.Error{Code: apierr.ServiceUnavailable, Message: "as many exports as LIMITS__MAX_CONCURRENT_EXPORTS=" +
		strconv.Itoa(s.max) + " allows are running; retry after " + strconv.Itoa(exportRetryAfter) + " s"}
}

func (s *ExportSlots) release() { s.sem.Release(1) }
