package gqlexec_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/internal/gqltest"
)

// The document limits in /graphql's gqlgen server, built as the server builds it (through the
// endpoint, platform/gqlhttp), without a database (only introspection runs).

func introspectionQuery(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/introspection.graphql") // graphql-js 16's introspection query, kept once
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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

// unknownChain is `{ ...F0 }` where F0 spreads F1 twice, ... F(n-1) spreads Fn twice, and Fn
// spreads a fragment that does not exist: no field anywhere, 2^n spreads expanded.
func unknownChain(n int) string {
	var b strings.Builder
	b.WriteString("{ ...F0 }\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { ...Nope }\n", n)
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

// limitsServer is /graphql's gqlgen server with the default limits and no resolvers: only
// introspection can run, which is all these tests need.
func limitsServer(t *testing.T) http.Handler {
	t.Helper()
	return gqltest.NewEndpoint(gqlpublic.NewSchema(&gqlpublic.Resolver{}), gqltest.Options())
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
		{"1,500 aliases", rootFields(1500), 422, "BAD_USER_INPUT", "LIMITS__MAX_QUERY_COMPLEXITY=1000"},
		{"10,000 aliases: over the token limit", rootFields(10000), 422, "BAD_USER_INPUT", "more than 10000 tokens"},
		{"400 copies of one field", "{" + strings.Repeat(" records_count { count }", 400) + " }", 422, "BAD_USER_INPUT", `query complexity: field "records_count" is selected more than 20 times`},
		{"10,000 copies of one field: over the token limit", "{" + strings.Repeat(" records_count { count }", 10000) + " }", 422, "BAD_USER_INPUT", "more than 10000 tokens"},
		{"a field of 101 arguments", "{ records_count(" + arguments(101) + ") { count } }", 422, "BAD_USER_INPUT", `field "records_count" has 101 arguments; a field takes at most 100 arguments`},
		{"a field of 100 arguments: unknown ones", "{ records_count(" + arguments(100) + ") { count } }", 422, "GRAPHQL_VALIDATION_FAILED", `Unknown argument "a0" on field "Query.records_count".`},
		{"a chain of 60 fragments ending in an unknown one", unknownChain(60), 422, "GRAPHQL_VALIDATION_FAILED", `Unknown fragment "Nope".`},
		{"a chain of 60 fragments ending in a cycle", strings.Replace(unknownChain(60), "...Nope", "...F0", 1), 422, "GRAPHQL_VALIDATION_FAILED", `Cannot spread fragment "F0" within itself via "F1", "F2", `},
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

// TestRootFieldsLimit: LIMITS__MAX_ROOT_FIELDS counts the root fields the operation executes,
// as gqlgen's executor collects them: aliases and fragments' fields count, fields merged under
// one response name count once, and fields that @skip or @include leave out with the request's
// variables do not count. A refusal is a request error (422, no data), before any resolver runs.
// Each document is asked twice: the second time, its count comes with its cached document.
func TestRootFieldsLimit(t *testing.T) {
	o := gqltest.Options()
	o.MaxRootFields = 3
	h := gqltest.NewEndpoint(gqlpublic.NewSchema(&gqlpublic.Resolver{}), o)
	post := func(query string, vars map[string]any) gqlResult {
		body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
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
	const skipped = `query($s: Boolean!) { a: __typename b: __typename c: __typename d: __typename @skip(if: $s) }`
	for _, tc := range []struct {
		name    string
		query   string
		vars    map[string]any
		refused bool
	}{
		{"3 aliases", `{ a: __typename b: __typename c: __typename }`, nil, false},
		{"4 aliases", `{ a: __typename b: __typename c: __typename d: __typename }`, nil, true},
		{"one field 4 times, one response name", `{ __typename __typename __typename __typename }`, nil, false},
		{"2 + 2 through a fragment", `{ a: __typename b: __typename ...F } fragment F on Query { c: __typename d: __typename }`, nil, true},
		{"2 + 2 through an inline fragment", `{ a: __typename b: __typename ... on Query { c: __typename d: __typename } }`, nil, true},
		{"a fragment spread twice counts once", `{ ...F ...F a: __typename } fragment F on Query { b: __typename c: __typename }`, nil, false},
		{"the fourth skipped by a variable", skipped, map[string]any{"s": true}, false},
		{"the fourth not skipped", skipped, map[string]any{"s": false}, true},
		{"the fourth skipped by a literal", `{ a: __typename b: __typename c: __typename d: __typename @skip(if: true) }`, nil, false},
		{"the fourth included by a literal", `{ a: __typename b: __typename c: __typename d: __typename @include(if: true) }`, nil, true},
		{"4 statements", `{ a: records_count { count } b: records_count { count } c: records_count { count } d: records_count { count } }`, nil, true},
	} {
		for asked := range 2 {
			r := post(tc.query, tc.vars)
			if asked > 0 {
				tc.name += " (asked again)"
			}
			switch {
			case tc.refused && (r.status != 422 || r.code() != "BAD_USER_INPUT" || !strings.Contains(r.Errors[0].Message, "LIMITS__MAX_ROOT_FIELDS=3")):
				t.Errorf("%s: %d %+v, want 422 BAD_USER_INPUT naming LIMITS__MAX_ROOT_FIELDS=3", tc.name, r.status, r.Errors)
			case tc.refused && len(r.Data) > 0 && string(r.Data) != "null":
				t.Errorf("%s: a refused request has data %s", tc.name, r.Data)
			case !tc.refused && r.code() == "BAD_USER_INPUT":
				t.Errorf("%s: refused: %s", tc.name, r.Errors[0].Message)
			}
		}
	}
}
