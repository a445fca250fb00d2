package main

import (
	"fmt"
	"testing"
)

// The follow scenario's questions: as many as asked, distinct, every field among the first
// five, with the 20 stations of the smallest data set as with the 30 of the larger ones.
func TestFollowQuestions(t *testing.T) {
	for _, nStations := range []int{1, 20, 30} {
		stations := make([]string, nStations)
		for i := range stations {
			stations[i] = fmt.Sprintf("Station %q %d", "ø", i)
		}
		qs, err := followQuestions(followMaxQs, stations, []string{"a", "b"})
		if nStations == 1 {
			if err == nil && len(qs) == followMaxQs {
				t.Fatalf("1 station: %d questions, want fewer than %d or an error", len(qs), followMaxQs)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%d stations: %v", nStations, err)
		}
		seen := map[string]bool{}
		for _, q := range qs {
			if seen[q.path+q.sel] {
				t.Errorf("%d stations: %s twice", nStations, q.sel)
			}
			seen[q.path+q.sel] = true
		}
		fields := map[string]bool{}
		for _, q := range qs[:5] {
			fields[q.field] = true
		}
		if len(qs) != followMaxQs || len(fields) != 5 {
			t.Errorf("%d stations: %d questions, %d fields among the first five", nStations, len(qs), len(fields))
		}
	}
}
