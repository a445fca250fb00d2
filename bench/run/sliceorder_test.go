package main

import (
	"slices"
	"testing"
)

// Every round measures every side once; with the bare server, its slice is next to the
// service's, before it in every other round.
func TestSliceOrder(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for i := range 4 {
			order := sliceOrder(n, i)
			sorted := slices.Sorted(slices.Values(order))
			if len(order) != n || !slices.Equal(sorted, []int{0, 1, 2, 3}[:n]) {
				t.Fatalf("sliceOrder(%d, %d) = %v: not every side once", n, i, order)
			}
			if n < 4 {
				continue
			}
			s, b := slices.Index(order, 0), slices.Index(order, 3)
			if s-b != 1 && b-s != 1 {
				t.Errorf("sliceOrder(4, %d) = %v: the service and the bare server apart", i, order)
			}
			if (b < s) != (i%2 == 1) {
				t.Errorf("sliceOrder(4, %d) = %v: the bare server should come first in odd rounds only", i, order)
			}
		}
	}
}
