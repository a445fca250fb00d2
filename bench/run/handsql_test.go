package main

import (
	"strings"
	"testing"
)

// The service side of the answer check: a list is read element by element, any other value
// whole, and errors anywhere in the response fail the check.
func TestAnswerStream(t *testing.T) {
	read := func(body string) ([]any, error) {
		a, err := openAnswer(strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		var out []any
		for {
			v, ok, err := a.next()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			out = append(out, v)
		}
		return out, a.finish()
	}

	got, err := read(`{"data":{"patients":[{"sk_patient":1,"weight":70.5},{"sk_patient":2,"weight":null}]}}`)
	if err != nil || len(got) != 2 || !same(got[1], obj("sk_patient", 2.0, "weight", nil)) {
		t.Errorf("list: %v, %v", got, err)
	}
	got, err = read(`{"data":{"records_count":{"count":42}},"extensions":{"x":1}}`)
	if err != nil || len(got) != 1 || !same(got[0], obj("count", 42.0)) {
		t.Errorf("object: %v, %v", got, err)
	}
	if _, err := read(`{"errors":[{"message":"boom"}],"data":null}`); err == nil {
		t.Error("errors before the data: no error")
	}
	if _, err := read(`{"data":{"resources":[]},"errors":[{"message":"boom"}]}`); err == nil {
		t.Error("errors after the data: no error")
	}
}

func TestSame(t *testing.T) {
	for _, c := range []struct {
		a, b any
		want bool
	}{
		{0.1 + 0.2, 0.3, true}, // float8 and numeric averages differ in the last bits
		{12.5, 12.51, false},
		{nil, "x", false},
		{[]any{"a", nil}, []any{"a", nil}, true},
		{[]any{"a"}, []any{"a", "b"}, false},
		{obj("v", "t"), obj("v", "true"), false},
		{obj("a", 1.0), obj("a", 1.0, "b", nil), false},
	} {
		if got := same(c.a, c.b); got != c.want {
			t.Errorf("same(%v, %v) = %v", c.a, c.b, got)
		}
	}
}
