package gqlhttp

import (
	"slices"
	"testing"
)

// The tables of a question are its root fields' (through fragments and aliases); a field not
// declared, or a document that does not parse, may read any table (nil).
func TestTablesOf(t *testing.T) {
	ft := FieldTables{"station_resources": {"dim_station", "dim_resource"}, "resources": {"dim_resource"}}
	for _, tc := range []struct {
		query, op string
		want      []string
	}{
		{`{ station_resources { station_id } }`, "", []string{"dim_resource", "dim_station"}},
		{`{ a: resources { resource_id } __typename }`, "", []string{"dim_resource"}},
		{`query A { ...F } fragment F on Query { ... on Query { resources { resource_id } } }`, "A", []string{"dim_resource"}},
		{`{ __schema { types { name } } }`, "", []string{}},
		{`{ resources { resource_id } records_count { count } }`, "", nil},
		{`query A { resources { resource_id } } query B { records_count { count } }`, "B", nil},
		{`{ resources `, "", nil},
		{`query A { ...F } fragment F on Query { ...F }`, "A", nil},
	} {
		got := ft.tablesOf(tc.query, tc.op)
		if (got == nil) != (tc.want == nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.query, got, tc.want)
		}
	}
}
