package otel_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/emsanalytics/emsquery/platform/otel"
)

func TestCacheBuildsOncePerKeyUpToMaxSets(t *testing.T) {
	builds := map[int]int{}
	c := otel.NewAttrSets(func(k int) attribute.Set {
		builds[k]++
		return attribute.NewSet(attribute.Int("k", k))
	}, nil)
	for range 3 {
		for k := range otel.MaxSets + 1 {
			if opts := c.Get(k); len(opts) != 1 {
				t.Fatalf("key %d: %d options, want 1", k, len(opts))
			}
		}
	}
	if builds[0] != 1 || builds[otel.MaxSets-1] != 1 {
		t.Errorf("kept keys built %d and %d times, want once", builds[0], builds[otel.MaxSets-1])
	}
	if n := builds[otel.MaxSets]; n != 3 {
		t.Errorf("the key past MaxSets built %d times, want 3 (once per Get, never kept)", n)
	}
}

func TestCacheOwnsKeptKeys(t *testing.T) {
	owned := 0
	c := otel.NewAttrSets(func(k string) attribute.Set { return attribute.NewSet(attribute.String("k", k)) },
		func(k string) string { owned++; return k })
	c.Get("a")
	c.Get("a")
	if owned != 1 {
		t.Errorf("own called %d times for one key, want 1", owned)
	}
}
