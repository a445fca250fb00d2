package deploytest_test

import (
	"maps"
	"testing"

	"github.com/emsanalytics/emsquery/internal/deploytest"
)

func TestParseEnvironmentFile(t *testing.T) {
	got, err := deploytest.ParseEnvironmentFile("# comment\n; also\n\n  A = one two  \nB='x # \\y'\nC=\"q\\\"\\$\\n\"\nD=a\\\nb\nE=[\"h\"]\nnoequals\nF=p#w\nA=again\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "again", "B": `x # \y`, "C": `q"$\n`, "D": "ab", "E": `["h"]`, "F": "p#w"}
	if !maps.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
