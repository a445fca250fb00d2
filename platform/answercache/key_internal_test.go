package answercache

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func post(t *testing.T, route, body string, header map[string]string) key {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, route, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	k, err := keyOf(route, r, []byte(body))
	if err != nil {
		t.Fatalf("keyOf(%s): %v", body, err)
	}
	return k
}

func get(t *testing.T, route string, q url.Values) key {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, route+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := keyOf(route, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeySameQuestion(t *testing.T) {
	base := post(t, "/graphql", `{"query":"query Q($s: String) { records_count(station: $s) { count } }","operationName":"Q","variables":{"s":"A","n":1.50}}`, nil)
	for _, same := range []string{
		`{"variables":{"n":1.50,"s":"A"},"operationName":"Q","query":"query Q($s: String) { records_count(station: $s) { count } }"}`,
		`{ "query" : "query Q($s: String) { records_count(station: $s) { count } }", "operationName": "Q", "variables": { "s": "\u0041", "n": 1.50 } }`,
		`{"query":"ignored","query":"query Q($s: String) { records_count(station: $s) { count } }","operationName":"Q","variables":{"s":"B","s":"A","n":1.50},"other":1}`,
	} {
		if post(t, "/graphql", same, nil) != base {
			t.Errorf("%s is a different question", same)
		}
	}
	none := post(t, "/graphql", `{"query":"{ a }"}`, nil)
	for _, same := range []string{`{"query":"{ a }","variables":null}`, `{"query":"{ a }","variables":{}}`, `{"query":"{ a }","extensions":{}}`} {
		if post(t, "/graphql", same, nil) != none {
			t.Errorf("%s differs from no variables", same)
		}
	}
}

func TestKeyDifferentQuestions(t *testing.T) {
	body := `{"query":"query Q($n: Float) { a(n: $n) }","variables":{"n":1.5}}`
	base := post(t, "/graphql", body, nil)
	seen := map[key]string{base: "base"}
	for name, k := range map[string]key{
		"another endpoint":        post(t, "/serve/graphql", body, nil),
		"another number text":     post(t, "/graphql", `{"query":"query Q($n: Float) { a(n: $n) }","variables":{"n":1.50}}`, nil),
		"another value":           post(t, "/graphql", `{"query":"query Q($n: Float) { a(n: $n) }","variables":{"n":2}}`, nil),
		"another document":        post(t, "/graphql", `{"query":"query Q($n: Float) { a(n: $n)  }","variables":{"n":1.5}}`, nil),
		"an operation name":       post(t, "/graphql", `{"query":"query Q($n: Float) { a(n: $n) }","operationName":"Q","variables":{"n":1.5}}`, nil),
		"extensions":              post(t, "/graphql", `{"query":"query Q($n: Float) { a(n: $n) }","variables":{"n":1.5},"extensions":{"persistedQuery":{"version":1,"sha256Hash":"ab"}}}`, nil),
		"another Accept":          post(t, "/graphql", body, map[string]string{"Accept": "application/graphql-response+json"}),
		"GET":                     get(t, "/graphql", url.Values{"query": {"query Q($n: Float) { a(n: $n) }"}, "variables": {`{"n":1.5}`}}),
		"parts that run together": post(t, "/graphql", `{"query":"query Q($n: Float) { a(n: $n) }Q","variables":{"n":1.5}}`, nil),
	} {
		if prev, dup := seen[k]; dup {
			t.Errorf("%s has the key of %s", name, prev)
		}
		seen[k] = name
	}
	if get(t, "/graphql", url.Values{"query": {"{ a }"}, "variables": {`{"x": 1, "y": [2]}`}}) !=
		get(t, "/graphql", url.Values{"variables": {`{"y":[2],"x":1}`}, "query": {"{ a }"}}) {
		t.Error("a GET's variables are not canonical")
	}
}

func TestKeyRefusesWhatIsNotGraphQL(t *testing.T) {
	for _, body := range []string{`[{"query":"{ a }"}]`, `{"query":`, `{"query":"{ a }","variables":[1]}`, `{"query":"{ a }","variables":{"a":}}`} {
		r, _ := http.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
		if _, err := keyOf("/graphql", r, []byte(body)); err == nil {
			t.Errorf("%s has a key", body)
		}
	}
	r, _ := http.NewRequest(http.MethodPut, "/graphql", nil)
	if _, err := keyOf("/graphql", r, nil); err == nil {
		t.Error("a PUT has a key")
	}
}
