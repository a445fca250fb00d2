package gqlhttp

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// A body that one decoding reads (decodePlainBody) is the request that the decoding of raw
// values (decodeGraphQLBody, then request) makes of it; any other body goes to that decoding,
// which refuses it with its message or reads it (a duplicated member whose first value has
// the wrong type). The bodies clients send are read by one decoding.
func TestPlainBodyIsTheRequestOfTheFullDecoding(t *testing.T) {
	sent := map[string]bool{
		`{"query":"{ resources { sk_resource } }"}`: true,
		` {"query": "query Q($n: Int) { a(n: $n) }", "operationName": "Q", "variables": {"n": 1.50, "b": [true, null]}} `: true,
		`{"query":"{ a }","operationName":null,"variables":null,"extensions":null}`:                                       true,
		`{"query":"{ a }","variables":{},"extensions":{"persistedQuery":{"version":1,"sha256Hash":"ab"}}}`:                true,
		`{"QUERY":"{ a }","OperationName":"x"}`:                                                                           true,
		`{"query":"\u00e9\ud83d\ude91 \"quoted\" \\ \u2028","unknown":[1,2]}`:                                             true,
		"{\"query\":\"invalid UTF-8: \xff\"}":                                                                             true,
	}
	for _, body := range []string{
		`{"query":1,"query":"{ last }"}`,
		`{"query":"{ a }","variables":"{}"}`,
		`{"query":"{ a }","variables":[1]}`,
		`{"query":"{ a }","extensions":5}`,
		`{"query":true}`,
		`{"query":"{ a }"} trailing`,
		`[{"query":"{ a }"}]`,
		`"query"`,
		``,
	} {
		sent[body] = false
	}
	for body, common := range sent {
		plain := decodePlainBody([]byte(body))
		p, err := decodeGraphQLBody([]byte(body))
		var full *request
		if err == nil {
			full, err = p.request()
		}
		switch {
		case plain == nil && common:
			t.Errorf("%s: not read by one decoding (the full decoding: %v)", body, err)
		case plain == nil:
			// Decoded again: refused with decodeGraphQLBody's message, or read.
		case err != nil:
			t.Errorf("%s: read by one decoding as %+v, though the full decoding refuses it: %v", body, *plain.Request, err)
		case !reflect.DeepEqual(plain, full):
			t.Errorf("%s: read as\n%+v\nwhere the full decoding reads\n%+v", body, *plain.Request, *full.Request)
		}
	}
}

// A body asked again is the request its decoding gives, with maps of its own; only bodies
// without variables or extensions, of at most maxKeptBody bytes, are kept, at most keptBodies
// of them; a kept body is a copy of the bytes it was read from.
func TestKeptBodiesAreTheirDecoding(t *testing.T) {
	b := newPlainBodies()
	long := `{"query":"{ a }","pad":"` + strings.Repeat("x", maxKeptBody) + `"}`
	for body, kept := range map[string]bool{
		`{"query":"{ resources { sk_resource } }"}`:                                    true,
		`{"query":"query Q { a }","operationName":"Q","variables":{},"extensions":{}}`: true,
		`{"query":"{ a }","operationName":null,"variables":null,"extensions":null}`:    true,
		`{"query":"{ a }","variables":{}}`:                                             true,
		`{"query":"query Q($n: Int) { a(n: $n) }","variables":{"n":1}}`:                false,
		`{"query":"{ a }","extensions":{"persistedQuery":{"version":1}}}`:              false,
		long:          false,
		`{"query":1}`: false,
	} {
		want := decodePlainBody([]byte(body))
		for asked := range 3 {
			buf := []byte(body)
			got := b.request(buf)
			copy(buf, strings.Repeat("#", len(buf))) // the caller's buffer is reused
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%.80s, asked %d times: %+v, want %+v", body, asked+1, got, want)
			}
			if got != nil {
				if got.Variables != nil {
					got.Variables["changed"] = true // the next request's map is its own
				}
				if got.Extensions != nil {
					got.Extensions["changed"] = true
				}
			}
		}
		if _, ok := b.kept.Peek(body); ok != kept {
			t.Errorf("%.80s: kept %v, want %v", body, ok, kept)
		}
	}
	for i := range 2 * keptBodies {
		b.request([]byte(`{"query":"{ a` + strconv.Itoa(i) + ` }"}`))
	}
	if n := b.kept.Len(); n > keptBodies {
		t.Errorf("%d bodies kept, want at most %d", n, keptBodies)
	}
}
