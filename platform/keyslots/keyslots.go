// Package keyslots bounds work that holds a database connection for as long as its client
// reads (contract 6.10): a number of slots for all keys together, of which one key may hold a
// share, so that one key's slow downloads can neither take the whole pool from the other
// questions nor every slot from the other keys. A request past the slots is refused at once,
// never queued: a queued request would hold its client's connection and memory while it waits,
// and a client told when to come back can choose when.
package keyslots

import (
	"errors"
	"fmt"
	"sync"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// ErrRefused is the cause of every refusal: a bound met, not a failure of the service (not
// logged as one).
var ErrRefused = errors.New("refused: no slot free")

// Slots is a bound of total slots, perKey of them for one key.
type Slots struct {
	total, perKey int
	// what the slots are for, and setting, the bound's name (an environment variable), both
	// for refusals.
	what, setting string
	// RetryAfter is the Retry-After of a refusal, in seconds.
	RetryAfter int

	mu    sync.Mutex
	held  int
	byKey map[string]int
}

// New returns a bound of total slots, perKey of them for one key (at least 1 each), for what
// (a plural: "exports"), named setting in its refusals, which say to come back after
// retryAfter seconds.
func New(total, perKey int, what, setting string, retryAfter int) *Slots {
	return &Slots{total: max(total, 1), perKey: max(perKey, 1), what: what, setting: setting, RetryAfter: retryAfter, byKey: map[string]int{}}
}

// HalfRoundedUp is a key's share of n slots: half of them, rounded up.
func HalfRoundedUp(n int) int { return (n + 1) / 2 }

// Take takes a slot for key (a key's name; "" is a key too: requests without a key check), or
// refuses: 503 SERVICE_UNAVAILABLE when every slot is held (the total wins when both bounds are
// reached), 429 RATE_LIMITED when key holds its share. The release it returns gives the slot
// back; calling it more than once gives it back once.
func (s *Slots) Take(key string) (release func(), err *apierr.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.held >= s.total:
		return nil, &apierr.Error{Code: apierr.ServiceUnavailable, Err: ErrRefused, Message: fmt.Sprintf(
			"as many %s as %s=%d allows are running; retry after %d s",
			s.what, s.setting, s.total, s.RetryAfter)}
	case s.byKey[key] >= s.perKey:
		return nil, &apierr.Error{Code: apierr.RateLimited, Err: ErrRefused, Message: fmt.Sprintf(
			"the API key %q runs %d %s, its share of %s=%d; retry after %d s, when one has ended",
			key, s.perKey, s.what, s.setting, s.total, s.RetryAfter)}
	}
	s.held++
	s.byKey[key]++
	var once sync.Once
	return func() { once.Do(func() { s.give(key) }) }, nil
}

func (s *Slots) give(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held--
	if s.byKey[key]--; s.byKey[key] <= 0 {
		delete(s.byKey, key)
	}
}

// Held is how many slots are held now (for metrics and tests).
func (s *Slots) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// StreamedAnswers are the slots of LIMITS__MAX_STREAMED_ANSWERS, which the GraphQL path's
// whole-table lists and the CSV export share.
type StreamedAnswers struct{ *Slots }
