package gqljson

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/99designs/gqlgen/graphql"
)

// A list of structs written from their fields' offsets (structList) is what gqlgen writes of
// the same values, field by field, for every kind it reads that way, once in the response (whose
// encoding escapes <, >, & and U+2028, U+2029, as this package writes them at once).
func TestStructListIsGqlgens(t *testing.T) {
	type elem struct {
		A int
		B int32
		C int64
		D string
		E bool
	}
	gt := reflect.TypeFor[elem]()
	key := func(first bool, name string) []byte {
		if first {
			return []byte(`"` + name + `":`)
		}
		return []byte(`,"` + name + `":`)
	}
	var fields []offsetField
	for i := range gt.NumField() {
		f := gt.Field(i)
		fields = append(fields, offsetField{key: key(i == 0, f.Name), off: f.Offset, kind: f.Type.Kind()})
	}
	fields = append(fields, offsetField{key: key(false, "__typename"), lit: []byte(`"Elem"`)})
	enc := structList(fields, gt.Size(), true)

	values := []elem{
		{math.MinInt, math.MinInt32, math.MinInt64, `quote " backslash \ <tag> & é 🚑 ` + "\u2028\x00\x1f", false},
		{math.MaxInt, math.MaxInt32, math.MaxInt64, "", true},
		{0, -1, 1, "plain", true},
	}
	var want bytes.Buffer
	want.WriteByte('[')
	for i, v := range values {
		if i > 0 {
			want.WriteByte(',')
		}
		want.WriteString(`{"A":`)
		graphql.MarshalInt(v.A).MarshalGQL(&want)
		want.WriteString(`,"B":`)
		graphql.MarshalInt32(v.B).MarshalGQL(&want)
		want.WriteString(`,"C":`)
		graphql.MarshalInt64(v.C).MarshalGQL(&want)
		want.WriteString(`,"D":`)
		graphql.MarshalString(v.D).MarshalGQL(&want)
		want.WriteString(`,"E":`)
		graphql.MarshalBoolean(v.E).MarshalGQL(&want)
		want.WriteString(`,"__typename":"Elem"}`)
	}
	want.WriteByte(']')
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, want.Bytes())
	got, ok := enc(nil, reflect.ValueOf(values))
	if !ok || string(got) != escaped.String() {
		t.Errorf("structList wrote (%v)\n%s\ngqlgen writes\n%s", ok, got, escaped.String())
	}
	for _, c := range []struct {
		v       []elem
		nonNull bool
		want    string
	}{{nil, true, "[]"}, {nil, false, "null"}, {[]elem{}, false, "[]"}} {
		if got, _ := structList(fields, gt.Size(), c.nonNull)(nil, reflect.ValueOf(c.v)); string(got) != c.want {
			t.Errorf("%#v (non-null %v): %s, want %s", c.v, c.nonNull, got, c.want)
		}
	}
}
