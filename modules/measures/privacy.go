package measures

import (
	"context"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/requestctx"
)

// Privacy is the service-wide small-cell threshold, PRIVACY__MIN_CELL (contract 6.12.4).
type Privacy struct{ MinCell int }

// MaxMinCell is the largest min_cell argument a field takes (the setting and the keys file
// refuse larger ones too): past CMS's 11 and the state rules' 20 or 30, a threshold of
// thousands would suppress whole answers.
const MaxMinCell = 1000

// Limits are the measures' bounds: the record filter's, LIMITS__MAX_SERIES_POINTS (a
// demand_grid's hour instances) and LIMITS__MAX_ROWS (0: no bound, for tests of the
// statements alone).
type Limits struct {
	Records      records.Limits
	SeriesPoints int
	Rows         int
}

// threshold is k for one field: the largest of PRIVACY__MIN_CELL, the key's min_cell and the
// field's min_cell argument (an argument never lowers the others).
func (pv Privacy) threshold(ctx context.Context, arg *int) (threshold, error) {
	k := max(pv.MinCell, requestctx.MinCell(ctx))
	if arg != nil {
		if *arg < 0 || *arg > MaxMinCell {
			return 0, apierr.BadInput("min_cell: %d is outside 0 to %d", *arg, MaxMinCell)
		}
		k = max(k, *arg)
	}
	return threshold(k), nil
}

// threshold is k: counts from 1 to k-1 are small; k <= 1 suppresses nothing.
type threshold int

// small says whether a count is small: 1 <= n < k (0 never is).
func (k threshold) small(n int64) bool { return n >= 1 && n < int64(k) }

// hides says whether counts other than count are withheld everywhere (k > 1): measured,
// excluded and within would give small counts away by difference.
func (k threshold) hides() bool { return k > 1 }

// published is n, or nil when k hides such counts.
func (k threshold) published(n int64) *int64 {
	if k.hides() {
		return nil
	}
	return &n
}
