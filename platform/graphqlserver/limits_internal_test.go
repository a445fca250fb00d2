package graphqlserver

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// Unit tests of the document limits (limits.go): the depth walker, the nesting scan and the size
// check. The gqlgen server with them is tested where the server builds an endpoint
// (app/limits_internal_test.go), with an endpoint's schema.

func parse(t *testing.T, q string) *ast.QueryDocument {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: q})
	if err != nil {
		t.Fatalf("parse %q: %v", q, err)
	}
	return doc
}

func introspectionQuery(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/introspection.graphql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nested returns `{ f { f { ... leaf } } }` with depth fields in all.
func nested(depth int, f, leaf string) string {
	return "{ " + strings.Repeat(f+" { ", depth-1) + leaf + strings.Repeat(" }", depth-1) + " }"
}

// fragmentChain spreads fragment F0, which spreads F1 twice, ... F(n-1) twice: 2^n copies of
// the leaf when expanded.
func fragmentChain(n int, typ, leaf string) string {
	var b strings.Builder
	b.WriteString("{ __type(name: \"Query\") { ...F0 } }\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "fragment F%d on %s { ...F%d ...F%d }\n", i, typ, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on %s { %s }\n", n, typ, leaf)
	return b.String()
}

func TestQueryDepth(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query string
		depth int
	}{
		{"one root field", `{ records_count { count } }`, 2},
		{"scalar root field", `{ __typename }`, 1},
		{"several root fields, the deepest counts", `{ a { b } c { d { e } } f }`, 3},
		{"inline fragments add no depth", `{ a { ... on T { ... { b { c } } } } }`, 3},
		{"fragment spreads count their fields", `{ a { ...F } } fragment F on T { b { ...G } } fragment G on T { c }`, 3},
		{"a fragment used at two depths", `{ a { ...F } b { c { ...F } } } fragment F on T { x { y } }`, 4},
		{"fragment cycle ends", `{ a { ...F } } fragment F on T { b { ...G } } fragment G on T { c { ...F } }`, 3},
		{"self-spread ends", `{ a { ...F } } fragment F on T { b ...F }`, 2},
		{"unknown fragment counts nothing", `{ a { ...Nope } }`, 1},
		{"100 deep", nested(100, "ofType", "name"), 100},
		// graphql-js 16's introspection query: __schema, types, fields, args, type, nine ofType,
		// then kind: 15.
		{"standard introspection query", introspectionQuery(t), 15},
	} {
		doc := parse(t, tc.query)
		if got := queryDepth(doc, doc.Operations[0].SelectionSet); got != tc.depth {
			t.Errorf("%s: depth %d, want %d", tc.name, got, tc.depth)
		}
	}

	// Fragments are measured once each: 2^60 expanded copies take no time.
	doc := parse(t, fragmentChain(60, "__Type", "ofType { name }"))
	start := time.Now()
	if got := queryDepth(doc, doc.Operations[0].SelectionSet); got != 3 {
		t.Errorf("fragment chain: depth %d, want 3", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("fragment chain took %s", d)
	}
}

func TestNesting(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  int
	}{
		{`{ a }`, 1},
		{`{ a(x: [{y: [1]}]) { b } }`, 5},
		{`query($f: [Filter!]) { a(f: $f) { b } }`, 2},
		{`{ a(x: "{{{[[[(((") }`, 2},
		{`{ a(x: "\"{{{") }`, 2},
		{`{ a(x: """ {{{ \""" [[[ """) }`, 2},
		{"{ a # {{{{ [[[[ \n b }", 1},
		{`}}}{`, 1},
		{strings.Repeat("{a", 100000) + strings.Repeat("}", 100000), 100000},
		{`{ a(x: "unterminated {{{`, 2},
		{`{ a(x: """unterminated {{{`, 2},
	} {
		if got := nesting(tc.query); got != tc.want {
			t.Errorf("nesting(%.60q) = %d, want %d", tc.query, got, tc.want)
		}
	}
}

func TestCheckSize(t *testing.T) {
	aliases := func(n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, " a%d: records_count { count }", i)
		}
		return b.String() + " }"
	}
	for _, tc := range []struct {
		name    string
		query   string
		mention string // "" when it passes
	}{
		{"standard introspection query", introspectionQuery(t), ""},
		{"500 fields", aliases(250), ""},
		{"10,000 aliases", aliases(10000), "more than 1000 fields"},
		{"several operations add up", "query A " + aliases(300) + " query B " + aliases(300), "more than 1000 fields"},
		{"an unused fragment counts", aliases(300) + " fragment U on Query " + aliases(300), "more than 1000 fields"},
		{"fragments count at each use", fragmentChain(12, "__Type", "name"), "query complexity"},
		{"fragments expanded 2^60 times stop early", fragmentChain(60, "__Type", "name"), "query complexity"},
		{"20 copies of one field", "{" + strings.Repeat(" records_count { count }", 20) + " }", ""},
		{"21 copies of one field", "{" + strings.Repeat(" records_count { count }", 21) + " }", `field "records_count" is selected more than 20 times at records_count`},
		{"copies merge across fields and fragments", `{ station_resources { ...F } station_resources { ... { station_id } } }
			fragment F on StationResources {` + strings.Repeat(" station_id", 10) + ` ...G } fragment G on StationResources {` + strings.Repeat(" station_id", 10) + " }",
			"at station_resources.station_id"},
		{"copies under merged parents", "{" + strings.Repeat(" station_resources {"+strings.Repeat(" station_id", 5)+" }", 5) + " }",
			"at station_resources.station_id"},
		{"a binary tree of one field", "{ __schema { queryType { " + binaryTree(6) + " } } }", "at __schema.queryType.ofType"},
		{"fragment cycle ends", `{ __type(name: "Query") { ...F } } fragment F on __Type { ofType { ...F } }`, ""},
	} {
		start := time.Now()
		err := checkSize(parse(t, tc.query), 1000)
		switch {
		case tc.mention == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.mention != "" && err == nil:
			t.Errorf("%s: passed", tc.name)
		case err != nil && (!strings.Contains(err.Message, tc.mention) || err.Extensions["code"] != "BAD_USER_INPUT"):
			t.Errorf("%s: %v (code %v), want a BAD_USER_INPUT mentioning %q", tc.name, err, err.Extensions["code"], tc.mention)
		case err != nil && strings.Contains(err.Message, "fields") && !strings.Contains(err.Message, "LIMITS__MAX_QUERY_COMPLEXITY=1000"):
			t.Errorf("%s: %v does not name the setting", tc.name, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: took %s", tc.name, d)
		}
	}
}

// binaryTree is `ofType { ... } ofType { ... }`, depth levels deep.
func binaryTree(depth int) string {
	if depth == 0 {
		return "name"
	}
	s := binaryTree(depth - 1)
	return "ofType { " + s + " } ofType { " + s + " }"
}
