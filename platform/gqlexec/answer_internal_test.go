package gqlexec

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// appendData writes gqlgen's data as json.Marshal writes a json.RawMessage (compacted, <, >, &,
// U+2028 and U+2029 escaped), outside strings and in them.
func TestAppendDataAsMarshal(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{"a":1,"b":"x"}`,
		"{ \"a\" : [ 1 ,\t2 ]\n,\r\"b\": null }",
		`{"s":"<script>&amp;</script>","t":"a > b"}`,
		"{\"u\":\"line\u2028para\u2029end\",\"v\":\"\u2027\u202a\"}",
		`{"q":"quote \" and \\ backslash, spaces  kept","k":"\\"}`,
		`{"e":"\u00e5 \\u003c","n":-1.5e-7,"t":true}`,
		"{\"nested\":{\"x\":[{\"y\":\" a b \"} , {}]},\"z\":\"\xe2\x80\"}",
	} {
		want, err := json.Marshal(json.RawMessage(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got := appendData(nil, []byte(in)); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", in, got, want)
		}
	}
}

// bufferSink is a ResponseWriter that keeps what reaches it.
type bufferSink struct {
	header http.Header
	body   bytes.Buffer
}

func (s *bufferSink) Header() http.Header         { return s.header }
func (s *bufferSink) WriteHeader(int)             {}
func (s *bufferSink) Write(p []byte) (int, error) { return s.body.Write(p) }
func (s *bufferSink) Reset() bool                 { s.body.Reset(); return true }
func (s *bufferSink) Fail(error)                  {}

// An answer with parts is written as json.Marshal writes gqlgen's response with each part's JSON
// in its place: the envelope, errors and the fields after the data included.
func TestAnswerWrittenAsMarshal(t *testing.T) {
	yes := true
	for _, resp := range []graphql.Response{
		{},
		{Errors: gqlerror.List{{Message: "boom <&>", Path: ast.Path{ast.PathName("b")}, Extensions: map[string]any{"code": "INTERNAL"}}}},
		{Label: "l", Path: ast.Path{ast.PathName("a"), ast.PathIndex(1)}, HasNext: &yes, Extensions: map[string]any{"x": "<y>"}},
	} {
		// gqlgen writes its data into a buffer; each part is noted at its place.
		pieces := []string{`{"a":`, ` , "b":"<i>","c":`, `}`}
		parts := [][]byte{[]byte(`[{"k":"v"}]`), []byte(`[1,2,3]`)}
		var buf bytes.Buffer
		a := &answer{}
		var spliced []byte
		for i, p := range pieces {
			buf.WriteString(p)
			spliced = append(spliced, p...)
			if i < len(parts) {
				a.place(&buf, part{chunks: [][]byte{parts[i]}, ctx: context.Background()})
				spliced = append(spliced, parts[i]...)
			}
		}
		resp.Data = buf.Bytes()
		w := &bufferSink{header: http.Header{}}
		if err := a.write(w, &resp); err != nil {
			t.Fatal(err)
		}
		whole := resp
		whole.Data = spliced
		want, err := json.Marshal(whole)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.body.Bytes(), want) {
			t.Errorf("\n got %s\nwant %s", w.body.Bytes(), want)
		}
	}
}
