package keyset_test

import (
	"math"
	"strings"
	"testing"

	"github.com/emsanalytics/emsquery/platform/keyset"
)

func TestParse(t *testing.T) {
	n := func(i int) *int { return &i }
	p, err := keyset.Parse(nil, nil, 10)
	if err != nil || !p.Whole() || p != keyset.All {
		t.Errorf("neither given: %+v, %v; want every row", p, err)
	}
	if args := p.Args(); args[0] != int64(math.MinInt64) || args[1].(*int64) != nil {
		t.Errorf("every row: args %v", args)
	}
	p, err = keyset.Parse(n(10), n(-3), 10)
	if err != nil || p.Whole() || *p.Limit != 10 || p.After != -3 {
		t.Errorf("limit 10 after -3: %+v, %v", p, err)
	}
	if p, err = keyset.Parse(nil, n(0), 10); err != nil || p.Whole() || p.Limit != nil || p.After != 0 {
		t.Errorf("after 0 alone: %+v, %v", p, err)
	}
	for _, bad := range []struct {
		limit int
		want  string
	}{{0, "limit: 0"}, {-1, "limit: -1"}, {11, "LIMITS__MAX_PAGE_SIZE=10"}} {
		if _, err := keyset.Parse(n(bad.limit), nil, 10); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("limit %d: %v, want an error naming %q", bad.limit, err, bad.want)
		}
	}
}
