package resources_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	resourcesQuery        = `{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`
	stationResourcesQuery = `{ station_resources { station_id station_name resources { resource_id } } }`
)

// TestResourcesOnFixture: resources answers every dim_resource row, ordered by sk_resource,
// with the values SQL reads from the edge-case fixture.
func TestResourcesOnFixture(t *testing.T) {
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, nil)

	want := expectedResources(t, pool)
	// The fixture must exercise what the comparison is meant to prove.
	var unstationed, current, closed bool
	for _, r := range want {
		unstationed = unstationed || servicetest.IsNull(r["station_id"]) && servicetest.IsNull(r["station"])
		current = current || servicetest.IsNull(r["valid_to"])
		closed = closed || !servicetest.IsNull(r["valid_to"])
	}
	if !unstationed || !current || !closed {
		t.Fatalf("fixture lacks an unstationed resource (%v), a current version (%v) or a closed version (%v)", unstationed, current, closed)
	}

	got := svc.Field(t, "/graphql", resourcesQuery, nil, "resources")
	servicetest.AssertJSON(t, "resources", got, want)
}

// TestStationResourcesOnFixture: every station ordered by station_id, each with its resource
// versions ordered by resource_id then sk_resource, duplicates kept, [] for none; names intact.
func TestStationResourcesOnFixture(t *testing.T) {
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, nil)

	want := expectedStationResources(t, pool)
	resp := svc.GraphQL(t, "/graphql", stationResourcesQuery, nil)
	var data struct {
		StationResources json.RawMessage `json:"station_resources"`
	}
	resp.DataInto(t, &data)
	servicetest.AssertJSON(t, "station_resources", data.StationResources, want)

	// The contract's edge cases, spelled out on the decoded answer.
	var got []struct {
		StationID   int    `json:"station_id"`
		StationName string `json:"station_name"`
		Resources   []struct {
			ResourceID int `json:"resource_id"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(data.StationResources, &got); err != nil {
		t.Fatal(err)
	}
	byID := map[int]int{}
	for i, s := range got {
		byID[s.StationID] = i
	}
	if i, ok := byID[4]; !ok || got[i].Resources == nil || len(got[i].Resources) != 0 {
		t.Errorf("station 4 must be listed with resources: [] (not null, not missing); answer: %s", data.StationResources)
	}
	if !strings.Contains(string(data.StationResources), `"station_id":4,"station_name":"Empty Station","resources":[]`) {
		t.Errorf("station 4's empty list is not spelled []: %s", data.StationResources)
	}
	if i, ok := byID[2]; ok {
		n := 0
		for _, r := range got[i].Resources {
			if r.ResourceID == 1002 {
				n++
			}
		}
		if n != 2 {
			t.Errorf("station 2 lists resource_id 1002 %d times, want 2 (one per version)", n)
		}
	} else {
		t.Errorf("station 2 missing: %s", data.StationResources)
	}
	var quote, newline, nonASCII bool
	for _, s := range got {
		quote = quote || strings.Contains(s.StationName, `"`) && strings.Contains(s.StationName, `'`)
		newline = newline || strings.Contains(s.StationName, "\n")
		nonASCII = nonASCII || utf8.RuneCountInString(s.StationName) != len(s.StationName)
	}
	if !quote || !newline || !nonASCII {
		t.Errorf("station names lost quotes (%v), a newline (%v) or non-ASCII letters (%v): %s", quote, newline, nonASCII, data.StationResources)
	}
}

// TestEmptyDatabase: with the schema and no rows both lists are [], and a station whose
// table of resources is empty still gets resources: [].
func TestEmptyDatabase(t *testing.T) {
	db := servicetest.NewDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, nil)

	resp := svc.GraphQL(t, "/graphql", `{ resources { sk_resource } station_resources { station_id resources { resource_id } } }`, nil)
	var data map[string]json.RawMessage
	resp.DataInto(t, &data)
	for _, f := range []string{"resources", "station_resources"} {
		if string(data[f]) != "[]" {
			t.Errorf("%s on an empty database = %s, want []", f, data[f])
		}
	}

	if _, err := pool.Exec(context.Background(), `INSERT INTO dim_station (station_id, station_name) VALUES (7, 'Lonely')`); err != nil {
		t.Fatal(err)
	}
	got := svc.Field(t, "/graphql", stationResourcesQuery, nil, "station_resources")
	servicetest.AssertJSON(t, "station_resources", got, expectedStationResources(t, pool))
	if string(got) != `[{"station_id":7,"station_name":"Lonely","resources":[]}]` {
		t.Errorf("station_resources with no resources at all = %s", got)
	}
}

// expectedResources reads dim_resource the way the contract describes resources.
func expectedResources(t *testing.T, pool *pgxpool.Pool) []map[string]any {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT sk_resource, resource_id, callsign, station_id, station,
       to_char(valid_from, 'YYYY-MM-DD'), to_char(valid_to, 'YYYY-MM-DD')
FROM dim_resource ORDER BY sk_resource`)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (map[string]any, error) {
		var (
			sk, id          int64
			callsign, from  string
			stationID       *int64
			station, validT *string
		)
		err := row.Scan(&sk, &id, &callsign, &stationID, &station, &from, &validT)
		return map[string]any{
			"sk_resource": sk, "resource_id": id, "callsign": callsign, "station_id": stationID,
			"station": station, "valid_from": from, "valid_to": validT,
		}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// expectedStationResources builds station_resources from two plain queries grouped here, so
// that it shares no SQL with the service's single aggregate query.
func expectedStationResources(t *testing.T, pool *pgxpool.Pool) []map[string]any {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT station_id, station_name FROM dim_station ORDER BY station_id`)
	if err != nil {
		t.Fatal(err)
	}
	type station struct {
		ID   int64
		Name string
	}
	stations, err := pgx.CollectRows(rows, pgx.RowToStructByPos[station])
	if err != nil {
		t.Fatal(err)
	}
	rows, err = pool.Query(ctx, `SELECT station_id, resource_id FROM dim_resource WHERE station_id IS NOT NULL ORDER BY resource_id, sk_resource`)
	if err != nil {
		t.Fatal(err)
	}
	perStation := map[int64][]map[string]any{}
	var stationID, resourceID int64
	if _, err := pgx.ForEachRow(rows, []any{&stationID, &resourceID}, func() error {
		perStation[stationID] = append(perStation[stationID], map[string]any{"resource_id": resourceID})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := make([]map[string]any, 0, len(stations))
	for _, s := range stations {
		res := perStation[s.ID]
		if res == nil {
			res = []map[string]any{}
		}
		want = append(want, map[string]any{"station_id": s.ID, "station_name": s.Name, "resources": res})
	}
	return want
}

// TestResourcesPaging: walking resources with limit and after (the last sk_resource received)
// returns every row exactly once, in order; the limits are refused by name.
func TestResourcesPaging(t *testing.T) {
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, map[string]string{"LIMITS__MAX_PAGE_SIZE": "5"})
	want := expectedResources(t, pool)
	if len(want) <= 5 {
		t.Fatalf("fixture check: %d resources, want more than a page", len(want))
	}
	const q = `query($limit: Int, $after: Int) { resources(limit: $limit, after: $after) { sk_resource resource_id callsign station_id station valid_from valid_to } }`
	for _, limit := range []int{1, 3, 5} {
		var all []json.RawMessage
		vars := map[string]any{"limit": limit}
		for pages := 0; pages <= len(want); pages++ {
			var rows []json.RawMessage
			if err := json.Unmarshal(svc.Field(t, "/graphql", q, vars, "resources"), &rows); err != nil {
				t.Fatal(err)
			}
			if len(rows) > limit {
				t.Fatalf("page of %d with limit %d", len(rows), limit)
			}
			if len(rows) == 0 {
				break
			}
			all = append(all, rows...)
			var last struct {
				Sk int `json:"sk_resource"`
			}
			if err := json.Unmarshal(rows[len(rows)-1], &last); err != nil {
				t.Fatal(err)
			}
			vars["after"] = last.Sk
		}
		b, _ := json.Marshal(all)
		servicetest.AssertJSON(t, "resources walked", b, want)
	}
	servicetest.AssertJSON(t, "after the second", svc.Field(t, "/graphql", `query($a: Int) { resources(after: $a) { sk_resource resource_id callsign station_id station valid_from valid_to } }`,
		map[string]any{"a": want[1]["sk_resource"]}, "resources"), want[2:])
	for _, bad := range []string{`{ resources(limit: 0) { sk_resource } }`, `{ resources(limit: 6) { sk_resource } }`} {
		resp := svc.GraphQL(t, "/graphql", bad, nil)
		if len(resp.Errors) != 1 || resp.Errors[0].Code() != "BAD_USER_INPUT" || !strings.Contains(resp.Errors[0].Message, "limit") {
			t.Errorf("%s: %s", bad, resp.Raw)
		}
	}
	if resp := svc.GraphQL(t, "/graphql", `{ resources(limit: 6) { sk_resource } }`, nil); len(resp.Errors) == 0 || !strings.Contains(resp.Errors[0].Message, "LIMITS__MAX_PAGE_SIZE=5") {
		t.Errorf("the refusal does not name the setting: %s", resp.Raw)
	}
}
