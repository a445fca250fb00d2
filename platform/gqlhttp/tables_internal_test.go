package gqlhttp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
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

// A chain of fragments each spreading the next twice is walked once per fragment, not 2^depth.
func TestTablesOfFragmentChain(t *testing.T) {
	ft := FieldTables{"resources": {"dim_resource"}}
	q := "query A { ...F0 }\n"
	for i := range 60 {
		q += fmt.Sprintf("fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	q += "fragment F60 on Query { resources { resource_id } }"
	start := time.Now()
	if got := ft.tablesOf(q, "A"); !slices.Equal(got, []string{"dim_resource"}) {
		t.Errorf("tables %q", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s", d)
	}
}

// A question asked again is answered from what was remembered, the same as parsing it; a
// question over the size bound is parsed each time, with the same answer.
func TestQuestionTablesRemembered(t *testing.T) {
	ft := FieldTables{"resources": {"dim_resource"}}
	q := newQuestionTables(ft)
	small := `{ resources { resource_id } }`
	large := small + "#" + strings.Repeat(" ", maxTablesQuery)
	for range 2 {
		for _, query := range []string{small, large, `{ records_count { count } }`} {
			if got, want := q.tablesOf(query, ""), ft.tablesOf(query, ""); !slices.Equal(got, want) || (got == nil) != (want == nil) {
				t.Errorf("%.40s: %q, want %q", query, got, want)
			}
		}
	}
	if _, ok := q.seen.Get(context.Background(), "\x00"+small); !ok {
		t.Errorf("the small question was not remembered")
	}
	if _, ok := q.seen.Get(context.Background(), "\x00"+large); ok {
		t.Errorf("a question over %d bytes was remembered", maxTablesQuery)
	}
	if q := newQuestionTables(nil); q.tablesOf(small, "") != nil {
		t.Errorf("no declarations: want nil (any table)")
	}
}

// What finding a question's tables costs per request, parsed each time against remembered.
//
//	go test ./platform/gqlhttp/ -run '^$' -bench TablesOf -benchmem
func BenchmarkTablesOf(b *testing.B) {
	ft := FieldTables{"station_resources": {"dim_station", "dim_resource"}}
	const query = `query Board { station_resources { station_id station_name resources { resource_id } } }`
	b.Run("parsed", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			ft.tablesOf(query, "Board")
		}
	})
	b.Run("remembered", func(b *testing.B) {
		q := newQuestionTables(ft)
		b.ReportAllocs()
		for range b.N {
			q.tablesOf(query, "Board")
		}
	})
}
