package reports

import (
	"log/slog"

	"github.com/emsanalytics/emsquery/platform/keyslots"
)

// ExportSlots bounds the CSV exports running at once (LIMITS__MAX_CONCURRENT_EXPORTS, one key
// at most half of them rounded up, so that one key cannot hold them all while another waits),
// and takes each export's place among the answers sent while their rows are read
// (LIMITS__MAX_STREAMED_ANSWERS, which GraphQL's whole-table lists share). An export holds one
// database connection from its start until its client has the last row, which for a slow
// download is minutes: without a bound, a handful of exports would hold the whole pool and
// every GraphQL request would wait for a connection. With it, exports never hold more than that
// many connections, and GraphQL always has the rest of the pool.
//
// An export past a bound is refused at once (503 past the total, 429 past the key's share, with
// Retry-After) rather than queued: a queued export would hold its client's connection and
// memory while it waits, and a client told to come back later can choose when.
type ExportSlots struct {
	exports  *keyslots.Slots
	streamed *keyslots.Slots
}

// exportRetryAfter is the Retry-After of an export refused for want of a slot, in seconds:
// exports take seconds to minutes, so sooner would mostly be refused again.
const exportRetryAfter = 10

// ExportOptions are the settings of the exports' bounds.
type ExportOptions struct {
	MaxConcurrent int // LIMITS__MAX_CONCURRENT_EXPORTS
	PoolMax       int // DATABASE__POOL_SIZE + DATABASE__MAX_OVERFLOW, for the warning below
}

// NewExportSlots returns the bounds of the settings. It warns when the bound leaves GraphQL no
// connection of the pool while exports run.
func NewExportSlots(o ExportOptions, streamed keyslots.StreamedAnswers, log *slog.Logger) *ExportSlots {
	n := o.MaxConcurrent
	if pool := o.PoolMax; n >= pool {
		log.Warn("LIMITS__MAX_CONCURRENT_EXPORTS is not below DATABASE__POOL_SIZE + DATABASE__MAX_OVERFLOW: exports running at once can hold every database connection, and GraphQL requests then wait for one",
			"max_concurrent_exports", n, "pool_max", pool)
	}
	return &ExportSlots{
		exports:  keyslots.New(n, keyslots.HalfRoundedUp(n), "exports", "LIMITS__MAX_CONCURRENT_EXPORTS", exportRetryAfter),
		streamed: streamed.Slots,
	}
}

// take takes an export's slots for key, or returns the refusal to answer and its Retry-After
// in seconds. The release it returns gives them back (once, however often it is called).
func (s *ExportSlots) take(key string) (release func(), retryAfter int, err error) {
	releaseExport, refusal := s.exports.Take(key)
	if refusal != nil {
		return nil, s.exports.RetryAfter, refusal
	}
	if s.streamed == nil {
		return releaseExport, 0, nil
	}
	releaseStreamed, refusal := s.streamed.Take(key)
	if refusal != nil {
		releaseExport()
		return nil, s.streamed.RetryAfter, refusal
	}
	return func() { releaseStreamed(); releaseExport() }, 0, nil
}
