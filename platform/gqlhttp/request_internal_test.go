package gqlhttp

import (
	"reflect"
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
