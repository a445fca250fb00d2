package systemtest

// Outside-in tests of the checks of a GraphQL document before it runs (contract 6.10): the real
// binary, real HTTP, a real PostgreSQL. Whatever the document, it is refused or started within
// a second, and once it is answered no work of it goes on.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"

	"github.com/emsanalytics/emsquery/internal/procstat"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// fragmentChain is `{ ...F1 }` where each of F1 ... Fn spreads the next twice and F(n+1) is
// last: 2^n copies of last when expanded, in about 50 bytes a level.
func fragmentChain(n int, last string) string {
	var b strings.Builder
	b.WriteString("{ ...F1 }\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "fragment F%d on Query { ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { %s }\n", n+1, last)
	return b.String()
}

// fieldArguments is `a0: 0 a1: 1 ...`: n arguments of distinct names.
func fieldArguments(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, " a%d: %d", i, i)
	}
	return b.String()
}

// tokenCount is the number of tokens of a document as gqlparser's lexer reads them (comments
// included, the end of the input not).
func tokenCount(t *testing.T, doc string) int {
	t.Helper()
	l := lexer.New(&ast.Source{Input: doc})
	n := 0
	for {
		tok, err := l.ReadToken()
		if err != nil {
			t.Fatalf("lex: %v", err)
		}
		if tok.Kind == lexer.EOF {
			return n
		}
		n++
	}
}

// notInQuery is a distinct_values query with NOT_IN filters of values "v0", "v1", ...: a
// query that runs, of exactly tokens tokens (one value is one token).
func notInQuery(t *testing.T, tokens int) string {
	t.Helper()
	build := func(values int) string {
		var b strings.Builder
		b.WriteString(`{ distinct_values(columns: ["station"], start_date: "2024-01-01", end_date: "2024-12-31", filters: [`)
		for i := 0; i < values; i++ {
			if i%1000 == 0 { // LIMITS__MAX_FILTER_VALUES
				if i > 0 {
					b.WriteString("] }")
				}
				b.WriteString(` {column: "station", operator: NOT_IN, values: [`)
			}
			fmt.Fprintf(&b, ` "v%d"`, i)
		}
		b.WriteString("] }]) { column value } }")
		return b.String()
	}
	values := tokens
	for range 10 {
		q := build(values)
		n := tokenCount(t, q)
		if n == tokens {
			return q
		}
		values += tokens - n
	}
	t.Fatalf("no query of %d tokens", tokens)
	return ""
}

// errorsOf decodes a GraphQL errors body.
func errorsOf(t *testing.T, raw []byte) []servicetest.GraphQLError {
	t.Helper()
	var body struct {
		Errors []servicetest.GraphQLError `json:"errors"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("the answer is not JSON: %v\n%.300s", err, raw)
	}
	return body.Errors
}

// TestDocumentBounds: a field takes at most 100 arguments and a document at most 10,000
// tokens, each refused with BAD_USER_INPUT naming the bound (and what is within them is not
// refused for it); an answer lists at most 100 errors, then one saying how many more there
// were, on every GraphQL endpoint; and a document of 64,000 arguments in two copies of a field
// (the validator compares the copies argument by argument) is refused within a second.
func TestDocumentBounds(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, nil)

	for _, tc := range []struct {
		name    string
		query   string
		status  int
		code    string
		mention string
	}{
		{"101 arguments", "{ records_count(" + fieldArguments(101) + ") { count } }", 422, "BAD_USER_INPUT", `field "records_count" has 101 arguments; a field takes at most 100 arguments`},
		{"100 arguments: validated, not refused for their number", "{ records_count(" + fieldArguments(100) + ") { count } }", 422, "GRAPHQL_VALIDATION_FAILED", `Unknown argument "a0" on field "Query.records_count".`},
		{"10,001 tokens", notInQuery(t, 10001), 422, "BAD_USER_INPUT", "the document has more than 10000 tokens"},
		{"10,000 tokens: answered", notInQuery(t, 10000), 200, "", ""},
	} {
		start := time.Now()
		a := ask(t, svc, gqlPost("/graphql", tc.query, nil))
		took := time.Since(start)
		if a.status != tc.status || a.code != tc.code || !strings.Contains(a.message, tc.mention) {
			t.Errorf("%s: status %d, code %q, message %q; want %d %q mentioning %q\n%.300s", tc.name, a.status, a.code, a.message, tc.status, tc.code, tc.mention, a.raw)
		}
		if tc.status == 200 && !strings.Contains(string(a.data), `"distinct_values":[`) {
			t.Errorf("%s: no answer: %.300s", tc.name, a.raw)
		}
		if took > time.Second {
			t.Errorf("%s: took %s", tc.name, took)
		}
	}

	// A thousand unknown fields: a thousand validation errors, of which the answer lists 100.
	var unknown strings.Builder
	unknown.WriteString("{")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&unknown, " nope%d", i)
	}
	unknown.WriteString(" }")
	for _, path := range []string{"/graphql", "/serve/graphql", "/lookups/graphql"} {
		a := ask(t, svc, gqlPost(path, unknown.String(), nil))
		errs := errorsOf(t, a.raw)
		if a.status != 422 || len(errs) != 101 {
			t.Errorf("%s: status %d, %d errors; want 422 and 101 errors", path, a.status, len(errs))
			continue
		}
		for i, e := range errs[:100] {
			if want := fmt.Sprintf(`Cannot query field "nope%d" on type "Query".`, i); e.Message != want || e.Code() != "GRAPHQL_VALIDATION_FAILED" {
				t.Errorf("%s: error %d is %q (%s), want %q", path, i, e.Message, e.Code(), want)
				break
			}
		}
		if last := errs[100]; last.Message != "900 more errors are not listed: an answer lists the first 100" || last.Code() != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%s: the last error is %q (%s), want one saying that 900 more are not listed", path, last.Message, last.Code())
		}
	}

	// 64,000 arguments in two copies of one field.
	copies := "{ a: records_count(" + fieldArguments(32000) + ") { count } b: records_count(" + fieldArguments(32000) + ") { count } }"
	body, _ := json.Marshal(map[string]any{"query": copies})
	if len(body) >= 1<<20 {
		t.Fatalf("the request of 64,000 arguments has %d bytes, over APP__MAX_BODY_BYTES", len(body))
	}
	start := time.Now()
	a := ask(t, svc, rawPostRequest("/graphql", "application/json", body))
	if took := time.Since(start); a.status != 422 || a.code != "BAD_USER_INPUT" || !strings.Contains(a.message, "10000 tokens") || took > time.Second || len(a.raw) > 1000 {
		t.Errorf("64,000 arguments (%d bytes): status %d, code %q, message %q, %d bytes, in %s; want 422 BAD_USER_INPUT naming the token limit, a short answer, within 1 s",
			len(body), a.status, a.code, a.message, len(a.raw), took)
	}
}

// chainClient gives up on an answer after 5 s: a document that runs away does not hang the
// test (it shows in the processor time that follows).
var chainClient = &http.Client{Timeout: 5 * time.Second}

// TestFragmentChainCPU: chains of fragments that double at each level, 20, 30 and 60 levels
// deep, ending in a spread of a fragment that does not exist (no field anywhere) or in a
// fragment of one field. Each is answered within a second with a clear error, and the service's
// processor time over the 5 s after the answers shows no work of them left running (an idle
// service's, against the same 5 s before them). The figures are logged for docs/operations.md
// ("CPU after the fragment chain").
func TestFragmentChainCPU(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, servicetest.NewDB(t), nil)
	cpu := func() time.Duration {
		t.Helper()
		st, err := procstat.ReadStat(svc.PID())
		if err != nil {
			t.Fatal(err)
		}
		return st.CPU()
	}
	post := func(query string) (status int, errs []servicetest.GraphQLError, took time.Duration) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"query": query})
		req, err := http.NewRequest(http.MethodPost, svc.URL+"/graphql", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(svc.Header, svc.Key)
		start := time.Now()
		resp, err := chainClient.Do(req)
		if err != nil {
			t.Errorf("no answer within %s: %v", chainClient.Timeout, err)
			return 0, nil, time.Since(start)
		}
		defer resp.Body.Close()
		var out struct {
			Errors []servicetest.GraphQLError `json:"errors"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Errorf("the answer is not JSON: %v", err)
		}
		return resp.StatusCode, out.Errors, time.Since(start)
	}

	const window = 5 * time.Second
	const bound = 500 * time.Millisecond
	svc.GraphQL(t, "/graphql", recordsCountQuery, nil) // the first request's one-off costs
	before := cpu()
	time.Sleep(window)
	idle := cpu() - before
	t.Logf("idle: %s of processor time in %s", idle, window)

	for _, depth := range []int{20, 30, 60} {
		for _, tc := range []struct {
			last, code, message string
		}{
			{"...Nope", "GRAPHQL_VALIDATION_FAILED", `Unknown fragment "Nope".`},
			{"__typename", "BAD_USER_INPUT", "query complexity exceeds LIMITS__MAX_QUERY_COMPLEXITY=1000"},
		} {
			q := fragmentChain(depth, tc.last)
			status, errs, took := post(q)
			switch {
			case status != 422 || len(errs) != 1:
				t.Errorf("depth %d, ending in %s: status %d, errors %+v; want 422 and one error", depth, tc.last, status, errs)
			case errs[0].Code() != tc.code || !strings.HasPrefix(errs[0].Message, tc.message):
				t.Errorf("depth %d, ending in %s: %s %q, want %s %q", depth, tc.last, errs[0].Code(), errs[0].Message, tc.code, tc.message)
			}
			if took > time.Second {
				t.Errorf("depth %d, ending in %s (%d bytes): answered in %s, want within 1 s", depth, tc.last, len(q), took)
			}
			t.Logf("depth %d, ending in %s (%d bytes): %d %s in %s", depth, tc.last, len(q), status, tc.code, took.Round(time.Millisecond))
		}
		before := cpu()
		time.Sleep(window)
		after := cpu() - before
		t.Logf("depth %d: %s of processor time in the %s after the answers (idle: %s)", depth, after, window, idle)
		if after > bound {
			t.Errorf("depth %d: %s of processor time in the %s after the answers (idle: %s), want under %s: work of the chains goes on", depth, after, window, idle, bound)
		}
	}
}

// costlyDocuments are documents of up to 1 MiB made to cost the parser and the validator the
// most within the bounds: long unknown names (each compared with the names it could have
// meant), many fragments compared pairwise, copies of a field compared argument by argument,
// and megabytes that are one token or only comments.
func costlyDocuments() map[string]string {
	long := func(i, n int) string { return fmt.Sprintf("x%d%s", i, strings.Repeat("q", n)) }
	build := func(f func(b *strings.Builder)) string {
		var b strings.Builder
		f(&b)
		return b.String()
	}
	return map[string]string{
		"999 unknown fields of 1,000 characters": build(func(b *strings.Builder) {
			b.WriteString("{")
			for i := 0; i < 999; i++ {
				b.WriteString(" " + long(i, 1000))
			}
			b.WriteString(" }")
		}),
		"400 fragments on unknown types of 2,000 characters": build(func(b *strings.Builder) {
			b.WriteString("{")
			for i := 0; i < 400; i++ {
				fmt.Fprintf(b, " ...F%d", i)
			}
			b.WriteString(" }")
			for i := 0; i < 400; i++ {
				fmt.Fprintf(b, " fragment F%d on %s { f%d: __typename }", i, long(i, 2000), i)
			}
		}),
		"1,000 variables of unknown types of 1,000 characters": build(func(b *strings.Builder) {
			b.WriteString("query(")
			for i := 0; i < 1000; i++ {
				fmt.Fprintf(b, " $v%d: %s", i, long(i, 1000))
			}
			b.WriteString(") { __typename }")
		}),
		"3,000 unknown arguments of 300 characters": build(func(b *strings.Builder) {
			b.WriteString("{")
			for j := 0; j < 30; j++ {
				fmt.Fprintf(b, " r%d: records_count(", j)
				for i := 0; i < 100; i++ {
					fmt.Fprintf(b, " %s: 1", long(i, 300))
				}
				b.WriteString(") { count }")
			}
			b.WriteString(" }")
		}),
		"499 fragments spread together": build(func(b *strings.Builder) {
			b.WriteString("{ __typename")
			for i := 0; i < 499; i++ {
				fmt.Fprintf(b, " ...F%d", i)
			}
			b.WriteString(" }")
			for i := 0; i < 499; i++ {
				fmt.Fprintf(b, " fragment F%d on Query { f%d: __typename }", i, i)
			}
		}),
		"two chains of 240 fragments compared": build(func(b *strings.Builder) {
			b.WriteString("{ ...A0 ...B0 }")
			for i := 0; i < 240; i++ {
				fmt.Fprintf(b, " fragment A%d on Query { a%d: __typename ...A%d }", i, i, i+1)
				fmt.Fprintf(b, " fragment B%d on Query { b%d: __typename ...B%d }", i, i, i+1)
			}
			b.WriteString(" fragment A240 on Query { __typename } fragment B240 on Query { __typename }")
		}),
		"20 copies of a field of 100 differing arguments": build(func(b *strings.Builder) {
			b.WriteString("{")
			for j := 0; j < 20; j++ {
				b.WriteString(" records_count(")
				for i := 0; i < 100; i++ {
					fmt.Fprintf(b, " a%d: %d", i, j)
				}
				b.WriteString(") { count }")
			}
			b.WriteString(" }")
		}),
		"a string of 1 MiB":       `{ records_count(station: "` + strings.Repeat("a", 1<<20-100) + `") { count } }`,
		"a block string of 1 MiB": `{ records_count(station: """` + strings.Repeat("a\n  ", (1<<20-100)/5) + `""") { count } }`,
		"1 MiB of comments":       strings.Repeat("#"+strings.Repeat("c", 200)+"\n", 5000) + "{ __typename }",
	}
}

// TestCostliestDocuments: whatever a document of up to 1 MiB holds, checking it costs the
// service well under a second of processor time, measured on the service process (the figures
// are logged for docs/operations.md).
func TestCostliestDocuments(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, servicetest.NewDB(t), nil)
	svc.GraphQL(t, "/graphql", recordsCountQuery, nil) // the first request's one-off costs
	for name, query := range costlyDocuments() {
		body, _ := json.Marshal(map[string]any{"query": query})
		if len(body) > 1<<20 {
			t.Fatalf("%s: %d bytes, over APP__MAX_BODY_BYTES", name, len(body))
		}
		before, err := procstat.ReadStat(svc.PID())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		a := ask(t, svc, rawPostRequest("/graphql", "application/json", body))
		took := time.Since(start)
		after, err := procstat.ReadStat(svc.PID())
		if err != nil {
			t.Fatal(err)
		}
		cpu := after.CPU() - before.CPU()
		t.Logf("%s (%d bytes): %d %s in %s, %s of processor time", name, len(body), a.status, a.code, took.Round(time.Millisecond), cpu)
		if a.status == 0 || a.status >= 500 {
			t.Errorf("%s: status %d: %.300s", name, a.status, a.raw)
		}
		if cpu > 700*time.Millisecond || took > 5*time.Second {
			t.Errorf("%s: %s of processor time, answered in %s; want well under a second of processor time", name, cpu, took)
		}
	}
}
