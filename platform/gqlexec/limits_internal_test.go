package gqlexec

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
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
		{"499 spreads and what they select: 999", spreads(499), ""},
		{"500 spreads and what they select: 1001", spreads(500), "more than 1000 fields and fragment spreads"},
		{"100 arguments", "{ records_count(" + arguments(100) + ") { count } }", ""},
		{"101 arguments", "{ records_count(" + arguments(101) + ") { count } }", `field "records_count" has 101 arguments; a field takes at most 100 arguments`},
		{"101 arguments of an aliased field in a fragment", "{ ...F } fragment F on Query { n: records_count(" + arguments(101) + ") { count } }", `field "n" has 101 arguments`},
		{"101 arguments of a directive", "{ records_count @include(" + arguments(101) + ") { count } }", "directive @include has 101 arguments; a directive takes at most 100 arguments"},
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

// spreads is a query of one field and n fragment spreads, each of a fragment of one field of
// its own: 1 + 2n fields and spreads.
func spreads(n int) string {
	var b strings.Builder
	b.WriteString("{ __typename")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, " ...F%d", i)
	}
	b.WriteString(" }")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, " fragment F%d on Query { f%d: __typename }", i, i)
	}
	return b.String()
}

// arguments is `a0: 0, a1: 1, ...`: n arguments.
func arguments(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("a%d: %d", i, i)
	}
	return strings.Join(parts, ", ")
}

// TestFragmentCostMeasuredOnce: a fragment's cost is the cost of what it selects, each spread
// counting 1 plus that cost; it is measured at the first spread and kept, so chains that double
// at each level cost one walk of the text, and the cost saturates just past the limit.
func TestFragmentCostMeasuredOnce(t *testing.T) {
	cost := func(q string, max int) (int, map[string]int) {
		t.Helper()
		doc := parse(t, q)
		c := newCostWalker(doc, max)
		n, err := c.set(doc.Operations[0].SelectionSet)
		if err != nil {
			t.Fatalf("%.60q: %v", q, err)
		}
		return n, c.cost
	}
	// F3 = 1 (name); F2 = 2 × (1 + 1) = 4; F1 = 2 × (1 + 4) = 10; F0 = 2 × (1 + 10) = 22;
	// __type = 1 + (1 + 22).
	if n, memo := cost(fragmentChain(3, "__Type", "name"), 1000); n != 24 || len(memo) != 4 || memo["F0"] != 22 || memo["F3"] != 1 {
		t.Errorf("chain of 3: cost %d, fragments %v; want 24, F0 22 ... F3 1", n, memo)
	}
	// A field costs 1 plus what it selects; an inline fragment what it selects.
	if n, _ := cost(`{ a { b c ... on T { d { e } } } }`, 1000); n != 5 {
		t.Errorf("fields and an inline fragment: cost %d, want 5", n)
	}
	// 2^60 copies expanded, measured in one walk: saturated at the limit plus one.
	start := time.Now()
	if n, memo := cost(fragmentChain(60, "__Type", "name"), 1000); n != 1001 || len(memo) != 61 || memo["F0"] != 1001 {
		t.Errorf("chain of 60: cost %d, %d fragments measured, F0 %d; want 1001, 61, 1001", n, len(memo), memo["F0"])
	}
	// 1,500 levels (the most that 10,000 tokens hold), each fragment spread twice: 2^1500.
	if n, _ := cost(fragmentChain(1500, "__Type", "name"), 1<<62); n != 1<<62+1 {
		t.Errorf("chain of 1500 with no practical limit: cost %d, want %d (saturated)", n, 1<<62+1)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("the chains took %s", d)
	}
}

// unknownChain is fragmentChain whose last fragment spreads one that does not exist: no field
// anywhere.
func unknownChain(n int) string {
	var b strings.Builder
	b.WriteString("{ ...F0 }\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { ...Nope }\n", n)
	return b.String()
}

// TestCheckSizeFragments: a spread of a fragment that does not exist, or of one within itself,
// stops the check with the validation error gqlgen's validator would report, wherever it is.
func TestCheckSizeFragments(t *testing.T) {
	for _, tc := range []struct {
		name, query, message string
	}{
		{"unknown at the end of a chain of 60", unknownChain(60), `Unknown fragment "Nope".`},
		{"unknown at the root", `{ ...Nope }`, `Unknown fragment "Nope".`},
		{"unknown in an unused fragment", `{ __typename } fragment U on Query { ...Nope }`, `Unknown fragment "Nope".`},
		{"unknown under a field", `{ __type(name: "Query") { name ...Nope } }`, `Unknown fragment "Nope".`},
		{"self-spread", `{ ...F } fragment F on Query { __typename ...F }`, `Cannot spread fragment "F" within itself.`},
		{"a cycle of three", `{ ...A } fragment A on Query { ...B } fragment B on Query { ...C } fragment C on Query { __typename ...A }`,
			`Cannot spread fragment "A" within itself via "B", "C".`},
		{"a cycle in unused fragments", `{ __typename } fragment A on Query { ...B } fragment B on Query { ...A }`, `Cannot spread fragment "A" within itself via "B".`},
		{"a cycle at the end of a chain of 60", strings.Replace(unknownChain(60), "...Nope", "...F30", 1), `Cannot spread fragment "F30" within itself via "F31", `},
	} {
		start := time.Now()
		err := checkSize(parse(t, tc.query), 1000)
		switch {
		case err == nil:
			t.Errorf("%s: passed", tc.name)
		case !strings.HasPrefix(err.Message, tc.message) || err.Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" || len(err.Locations) != 1:
			t.Errorf("%s: %q (code %v, locations %v); want GRAPHQL_VALIDATION_FAILED %q at its spread", tc.name, err.Message, err.Extensions["code"], err.Locations, tc.message)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("%s: took %s", tc.name, d)
		}
	}
	// Fragments spread again and again, but measured once each, within the limit.
	shared := "{ a: __type(name: \"Query\") { ...A ...A } b: __type(name: \"Query\") { ...A } } fragment A on __Type { name ...B } fragment B on __Type { kind }"
	if err := checkSize(parse(t, shared), 1000); err != nil {
		t.Errorf("shared fragments: %v", err)
	}
}

func TestParseDocument(t *testing.T) {
	// tokens is a query of exactly n tokens as gqlparser counts them: `{ __typename }` (3) after
	// comments (1 each).
	tokens := func(n int) string { return strings.Repeat("# c\n", n-3) + "{ __typename }" }
	if _, errs := parseDocument(tokens(maxTokens)); errs != nil {
		t.Errorf("%d tokens: %v", maxTokens, errs)
	}
	_, errs := parseDocument(tokens(maxTokens + 1))
	if len(errs) != 1 || errs[0].Extensions["code"] != "BAD_USER_INPUT" || !strings.Contains(errs[0].Message, "more than 10000 tokens") {
		t.Errorf("%d tokens: %v, want BAD_USER_INPUT naming the limit", maxTokens+1, errs)
	}
	// 64,000 arguments: refused at the limit, without reading the rest.
	big := "{ a: records_count(" + arguments(64000) + ") { count } b: records_count(" + arguments(64000) + ") { count } }"
	start := time.Now()
	if _, errs := parseDocument(big); len(errs) != 1 || errs[0].Extensions["code"] != "BAD_USER_INPUT" {
		t.Errorf("64,000 arguments: %v", errs)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("64,000 arguments (%d bytes) took %s", len(big), d)
	}
	for q, code := range map[string]string{
		`{ records_count { count }`: "GRAPHQL_PARSE_FAILED",
		`fragment F on Query { a }`: "GRAPHQL_VALIDATION_FAILED", // no operation
		``:                          "GRAPHQL_VALIDATION_FAILED",
	} {
		if _, errs := parseDocument(q); len(errs) != 1 || errs[0].Extensions["code"] != code {
			t.Errorf("%q: %v, want %s", q, errs, code)
		}
	}
}

func TestLimitErrors(t *testing.T) {
	list := func(n int) gqlerror.List {
		errs := make(gqlerror.List, n)
		for i := range errs {
			errs[i] = &gqlerror.Error{Message: fmt.Sprint("error ", i), Extensions: map[string]any{"code": "GRAPHQL_VALIDATION_FAILED"}}
		}
		return errs
	}
	if got := limitErrors(list(100)); len(got) != 100 || got[99].Message != "error 99" {
		t.Errorf("100 errors: %d kept, the last %q", len(got), got[len(got)-1].Message)
	}
	for n, more := range map[int]string{101: "1 more errors", 5000: "4900 more errors"} {
		got := limitErrors(list(n))
		if len(got) != 101 || got[99].Message != "error 99" || !strings.HasPrefix(got[100].Message, more) || got[100].Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%d errors: %d kept, the last %q %v; want 101, the last saying %q", n, len(got), got[len(got)-1].Message, got[len(got)-1].Extensions, more)
		}
	}
}
