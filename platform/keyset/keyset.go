// Package keyset pages a list ordered by its key (contract section 6.4): a client sends the
// last key it received as after and gets the rows whose key is greater, at most limit of them.
// Unlike an offset, a page costs the same wherever it starts, and a row added or removed
// between two requests neither repeats nor skips another.
package keyset

import (
	"math"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// MaxPage is LIMITS__MAX_PAGE_SIZE: the largest limit a client may ask for.
type MaxPage int

// Page is a validated page: the rows whose key is greater than After, at most Limit of them.
// The zero Page is not valid; use Parse or All.
type Page struct {
	After int64
	Limit *int64 // nil: no limit
}

// All is every row: what a client gets when it sends neither limit nor after.
var All = Page{After: math.MinInt64}

// Whole reports whether p is every row.
func (p Page) Whole() bool { return p.After == math.MinInt64 && p.Limit == nil }

// Args are the statement's parameters for "key > $n ... LIMIT $n+1" (LIMIT NULL is no limit).
func (p Page) Args() []any { return []any{p.After, p.Limit} }

// Parse validates the limit and after arguments: limit from 1 to max, after any key; either
// may be omitted.
func Parse(limit, after *int, max MaxPage) (Page, error) {
	p := All
	if limit != nil {
		if *limit < 1 {
			return Page{}, apierr.BadInput("limit: %d; give 1 to %d rows per page", *limit, max)
		}
		if *limit > int(max) {
			return Page{}, apierr.BadInput("limit: %d rows exceed LIMITS__MAX_PAGE_SIZE=%d; page with after (the last key received)", *limit, max)
		}
		n := int64(*limit)
		p.Limit = &n
	}
	if after != nil {
		p.After = int64(*after)
	}
	return p, nil
}
