package resources

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/emsanalytics/emsquery/internal/dbtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/keyset"
)

// The lists Resources and StationResources keep (gqlgen's path, when the direct JSON declines a
// selection) hold what the Each functions handed on row by row, although those reuse their
// values for the next row.
func TestKeptListsAreWhatWasHandedOn(t *testing.T) {
	fixture := servicetest.FixtureDB(t)
	db := dbtest.Open(t, fixture)
	repo := NewRepository(db)
	ctx := context.Background()
	// JSON of every row at the moment it was handed on.
	var handed []json.RawMessage
	snap := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		handed = append(handed, b)
		return true
	}
	if _, err := repo.EachResource(ctx, keyset.All, func(r *Resource) bool { return snap(r) }); err != nil {
		t.Fatal(err)
	}
	resources, err := repo.Resources(ctx, keyset.All)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "resources", resources, handed)
	handed = nil
	if _, err := repo.EachStationResources(ctx, func(s *StationResources) bool { return snap(s) }); err != nil {
		t.Fatal(err)
	}
	stations, err := repo.StationResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "station resources", stations, handed)
}

func same[T any](t *testing.T, what string, kept []T, handed []json.RawMessage) {
	t.Helper()
	if len(kept) != len(handed) || len(kept) < 3 {
		t.Fatalf("%s: %d kept, %d handed on (the fixture has more than 2)", what, len(kept), len(handed))
	}
	for i := range kept {
		b, _ := json.Marshal(kept[i])
		if string(b) != string(handed[i]) {
			t.Errorf("%s row %d kept as %s, handed on as %s", what, i, b, handed[i])
		}
	}
}
