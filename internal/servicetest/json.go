package servicetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// Field posts query to path and returns the raw JSON of one root field, failing on any error.
func (s *Service) Field(t testing.TB, path, query string, vars map[string]any, field string) json.RawMessage {
	t.Helper()
	resp := s.GraphQL(t, path, query, vars)
	if resp.Status != 200 {
		t.Fatalf("status %d: %.2000s", resp.Status, resp.Raw)
	}
	var data map[string]json.RawMessage
	resp.DataInto(t, &data)
	got, ok := data[field]
	if !ok {
		t.Fatalf("no %s in data: %.2000s", field, resp.Raw)
	}
	return got
}

// AssertJSON compares got with want (any value that marshals to JSON) as decoded JSON values: order of list
// elements matters, order of object members does not, [] and null differ.
func AssertJSON(t testing.TB, what string, got json.RawMessage, want any) {
	t.Helper()
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal(wantJSON, &w); err != nil {
		t.Fatal(err)
	}
	if sameJSON(g, w) {
		return
	}
	gl, gok := g.([]any)
	wl, wok := w.([]any)
	if gok && wok {
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if !sameJSON(gl[i], wl[i]) {
				t.Fatalf("%s: first difference at index %d:\n got %s\nwant %s", what, i, mustJSON(gl[i]), mustJSON(wl[i]))
			}
		}
		t.Fatalf("%s: %d elements, want %d", what, len(gl), len(wl))
	}
	t.Fatalf("%s:\n got %.2000s\nwant %.2000s", what, got, wantJSON)
}

// sameJSON is reflect.DeepEqual for decoded JSON, without reflection: large answers compare
// in a fraction of the time.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !sameJSON(av, bv) {
				return false
			}
		}
		return true
	default: // nil, bool, float64, string
		return a == b
	}
}

// IsNull tells whether v, a value scanned from SQL, is NULL (a nil pointer).
func IsNull(v any) bool {
	rv := reflect.ValueOf(v)
	return v == nil || rv.Kind() == reflect.Pointer && rv.IsNil()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
