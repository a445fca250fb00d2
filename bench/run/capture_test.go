package main

import (
	"slices"
	"testing"
)

func TestParseLog(t *testing.T) {
	log := "2025-01-02 10:11:12.345 UTC [42] LOG:  execute stmtcache_1: SELECT a\n\tFROM t WHERE x = $1 AND y = $2 AND z = $3\n" +
		"2025-01-02 10:11:12.345 UTC [42] DETAIL:  parameters: $1 = 'it''s', $2 = NULL, $3 = 'two\n\tlines'\n" +
		"2025-01-02 10:11:12.400 UTC [7] LOG:  checkpoint starting: time\n" +
		"2025-01-02 10:11:13.000 UTC [42] LOG:  statement: COPY (SELECT 1) TO STDOUT WITH (FORMAT csv)\n" +
		"2025-01-02 10:11:13.100 UTC [42] LOG:  execute <unnamed>: SELECT b FROM t WHERE x = $1\n" +
		"2025-01-02 10:11:13.100 UTC [42] DETAIL:  parameters: $1 = '1'\n"
	sts, err := statements(parseLog(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 3 {
		t.Fatalf("statements: %+v", sts)
	}
	if sts[0].SQL != "SELECT a\nFROM t WHERE x = $1 AND y = $2 AND z = $3" || sts[0].Simple || !sts[0].Prepared {
		t.Errorf("first: %+v", sts[0])
	}
	got := make([]string, len(sts[0].Params))
	for i, p := range sts[0].Params {
		if p == nil {
			got[i] = "<nil>"
		} else {
			got[i] = *p
		}
	}
	if want := []string{"it's", "<nil>", "two\nlines"}; !slices.Equal(got, want) {
		t.Errorf("params %q, want %q", got, want)
	}
	if !sts[1].Simple || sts[1].SQL != "COPY (SELECT 1) TO STDOUT WITH (FORMAT csv)" {
		t.Errorf("second: %+v", sts[1])
	}
	if sts[2].Prepared || sts[2].Simple || sts[2].SQL != "SELECT b FROM t WHERE x = $1" || len(sts[2].Params) != 1 {
		t.Errorf("third (unnamed): %+v", sts[2])
	}
}
