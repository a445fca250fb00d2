package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/platform/config"
)

// Unit tests of the document limits (limits.go): the depth walker, the nesting scan, the size
// check, and the gqlgen server with them, without a database (only introspection runs).

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

// ofTypes is `ofType { ofType { ... name } }` with n ofType fields: depth n+1.
func ofTypes(n int) string {
	return strings.Repeat("ofType { ", n) + "name" + strings.Repeat(" }", n)
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

// aliasedNames is `n0: name n1: name ...`: n fields with different response names.
func aliasedNames(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, " n%d: name", i)
	}
	return b.String()
}

// binaryTree is `ofType { ... } ofType { ... }`, depth levels deep.
func binaryTree(depth int) string {
	if depth == 0 {
		return "name"
	}
	s := binaryTree(depth - 1)
	return "ofType { " + s + " } ofType { " + s + " }"
}

// gqlResult is a GraphQL answer of the test server.
type gqlResult struct {
	status int
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

func (r gqlResult) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// testLimits are the default document limits, for gqlgen servers built in tests.
var testLimits = config.Limits{QueryDepth: 15, QueryComplexity: 1000}

// limitsServer is /graphql's gqlgen server with the default limits and no resolvers: only
// introspection can run, which is all these tests need.
func limitsServer(t *testing.T) http.Handler {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return newGraphQLServer(gqlpublic.NewSchema(&gqlpublic.Resolver{}), log, testLimits)
}

func postQuery(t *testing.T, h http.Handler, query string) gqlResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	r := gqlResult{status: rec.Code}
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("answer is not JSON (%d): %v\n%.300s", rec.Code, err, rec.Body.Bytes())
	}
	return r
}

// TestLimitsInGqlgen: the limits as gqlgen applies them, with their codes and statuses, and a
// time bound on every document that would take the validator long.
func TestLimitsInGqlgen(t *testing.T) {
	h := limitsServer(t)
	rootFields := func(n int) string {
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
		status  int
		code    string
		mention string
	}{
		{"standard introspection query", introspectionQuery(t), 200, "", ""},
		{"depth 15", `{ __schema { queryType { ` + ofTypes(12) + ` } } }`, 200, "", ""},
		{"depth 16: the walker refuses it", `{ __schema { queryType { ` + ofTypes(13) + ` } } }`, 422, "BAD_USER_INPUT", "query depth 16 exceeds LIMITS__MAX_QUERY_DEPTH=15"},
		{"depth 16 through fragments", `{ __schema { queryType { ...A } } } fragment A on __Type { ofType { ofType { ofType { ...B } } } }
			fragment B on __Type { ` + ofTypes(10) + ` }`, 422, "BAD_USER_INPUT", "query depth 16 exceeds"},
		{"nested 100 deep: refused before parsing", `{ __schema { queryType { ` + ofTypes(97) + ` } } }`, 422, "BAD_USER_INPUT", "LIMITS__MAX_QUERY_DEPTH=15: the query nests 100 levels deep"},
		{"nested 200,000 deep", strings.Repeat("{a", 200000) + strings.Repeat("}", 200000), 422, "BAD_USER_INPUT", "nests 200000 levels deep"},
		{"a list nested 100,000 deep", "{ records_count(station: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + ") { count } }", 422, "BAD_USER_INPUT", "LIMITS__MAX_QUERY_DEPTH"},
		{"90 root fields: complexity 990", rootFields(90), 0, "", ""},
		{"91 root fields: complexity 1001", rootFields(91), 422, "BAD_USER_INPUT", "query complexity 1001 exceeds LIMITS__MAX_QUERY_COMPLEXITY=1000"},
		{"10,000 aliases", rootFields(10000), 422, "BAD_USER_INPUT", "LIMITS__MAX_QUERY_COMPLEXITY=1000"},
		{"10,000 copies of one field", "{" + strings.Repeat(" records_count { count }", 10000) + " }", 422, "BAD_USER_INPUT", `query complexity: field "records_count" is selected more than 20 times`},
		{"1,000 copies of one nested field", "{ station_resources {" + strings.Repeat(" station_id", 990) + " } }", 422, "BAD_USER_INPUT", `field "station_id" is selected more than 20 times`},
		{"a binary tree of ofType", "{ __schema { queryType { " + binaryTree(9) + " } } }", 422, "BAD_USER_INPUT", "query complexity"},
		{"fragments expanded 2^60 times", fragmentChain(60, "__Type", "name"), 422, "BAD_USER_INPUT", "query complexity"},
		{"fragments expanded 2^60 times, 50 fields each", fragmentChain(60, "__Type", aliasedNames(50)), 422, "BAD_USER_INPUT", "LIMITS__MAX_QUERY_COMPLEXITY=1000"},
		{"unknown enum value", `{ distinct_values(columns: ["age"], start_date: "2024-01-01", end_date: "2024-01-01", filters: [{column: "age", operator: NOPE, value: "1"}]) { value } }`, 422, "GRAPHQL_VALIDATION_FAILED", "NOPE"},
		{"syntax error", `{ records_count { count }`, 422, "GRAPHQL_PARSE_FAILED", ""},
	} {
		start := time.Now()
		r := postQuery(t, h, tc.query)
		took := time.Since(start)
		if tc.status == 0 {
			// Within the limits but not runnable here (no resolvers): not refused by a limit.
			if r.code() == "BAD_USER_INPUT" {
				t.Errorf("%s: refused: %s", tc.name, r.Errors[0].Message)
			}
		} else if r.status != tc.status || r.code() != tc.code || (tc.mention != "" && !strings.Contains(r.Errors[0].Message, tc.mention)) {
			t.Errorf("%s: %d %s %+v, want %d %s mentioning %q", tc.name, r.status, r.code(), r.Errors, tc.status, tc.code, tc.mention)
		}
		if tc.code != "" && tc.status >= 400 && len(r.Data) > 0 && string(r.Data) != "null" {
			t.Errorf("%s: a refused request has data %s", tc.name, r.Data)
		}
		if took > 2*time.Second {
			t.Errorf("%s: took %s", tc.name, took)
		}
	}
}

// TestParsedQueryCache: a document checked and parsed once is taken from gqlgen's cache, and
// the limits still apply to the operation each request runs.
func TestParsedQueryCache(t *testing.T) {
	h := limitsServer(t)
	doc := `query Shallow { __typename } query Deep { __schema { queryType { ` + ofTypes(13) + ` } } }`
	run := func(op string) gqlResult {
		body, _ := json.Marshal(map[string]any{"query": doc, "operationName": op})
		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		r := gqlResult{status: rec.Code}
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i := 0; i < 3; i++ {
		if r := run("Shallow"); r.status != 200 || len(r.Errors) > 0 {
			t.Fatalf("Shallow (run %d): %d %+v", i, r.status, r.Errors)
		}
		if r := run("Deep"); r.status != 422 || r.code() != "BAD_USER_INPUT" {
			t.Fatalf("Deep (run %d), from the cache: %d %+v, want the depth refusal", i, r.status, r.Errors)
		}
	}
}
