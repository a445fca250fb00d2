package main

import (
	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/keyslots"
)

// streamedRetryAfter is the Retry-After of an answer refused for want of a streamed answer's
// slot, in seconds: such answers take seconds to minutes, so sooner would mostly be refused
// again.
const streamedRetryAfter = 10

// newStreamedAnswers is LIMITS__MAX_STREAMED_ANSWERS (its default, half of
// DATABASE__POOL_SIZE rounded up, is settled by config.Load), one key holding at most half of
// it rounded up.
func newStreamedAnswers(l config.Limits) keyslots.StreamedAnswers {
	n := int(l.MaxStreamedAnswers)
	return keyslots.StreamedAnswers{Slots: keyslots.New(n, keyslots.HalfRoundedUp(n),
		"answers sent while their rows are read (whole-table lists, exports)", "LIMITS__MAX_STREAMED_ANSWERS", streamedRetryAfter)}
}
