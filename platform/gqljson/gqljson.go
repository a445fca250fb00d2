// Package gqljson writes the JSON of a GraphQL query's root field straight from the Go value its
// resolver returned, or from the rows a statement returns, when what it selects is made of
// plain objects, lists and built-in scalars. It encodes, and nothing else: where the JSON goes
// (held for the response, or streamed to the client while it is sent) is the GraphQL path's
// concern (platform/gqlexec).
//
// gqlgen marshals a list of objects by starting a goroutine per element and building, for every
// field of every element, a field context, a context value, closures and a marshaler, all kept
// until the response is written. For the service's large lists (patients, oxygens: hundreds of
// thousands of rows) that costs ten times the database's own time and gigabytes of memory under
// concurrency. This package replaces that step, and only that step: parsing, validation,
// complexity limits, the resolvers, their errors and the response envelope stay gqlgen's.
//
// Only Go types that declare themselves Plain are written here (see Plain); an enum or custom
// scalar, a field with arguments or @defer leave the value to gqlgen. The GraphQL path's tests
// compare the answers with gqlgen's byte for byte.
package gqljson

import (
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// Writer holds the schema and what it compiled for it.
type Writer struct {
	schema *ast.Schema
	// lastSize is, per root field, the size of the first chunk of the JSON a List wrote last:
	// the next List of that field starts with that much room (a table's size changes little
	// between requests), instead of growing to it step by step.
	lastSize map[string]*atomic.Int64
	// compiled are the encoders of root fields compiled before (see compile).
	compiled  sync.Map // compiledKey -> *compiled
	nCompiled atomic.Int64
}

// New returns a Writer for schema.
func New(schema *ast.Schema) *Writer {
	w := &Writer{schema: schema, lastSize: map[string]*atomic.Int64{}}
	if schema.Query != nil {
		for _, f := range schema.Query.Fields {
			w.lastSize[f.Name] = new(atomic.Int64)
		}
	}
	return w
}

// MayWrite reports whether a root field's type is, or is a list of, an object type: one whose
// values this package may write, depending on their Go type.
func (w *Writer) MayWrite(def *ast.FieldDefinition) bool {
	if def == nil || def.Type == nil {
		return false
	}
	t := def.Type
	for t.Elem != nil {
		t = t.Elem
	}
	d := w.schema.Types[t.NamedType]
	return d != nil && d.Kind == ast.Object
}

// Value writes the JSON of res, the value a root field's resolver returned (fc's field, in
// oc's operation), in chunks, and returns the value gqlgen should marshal in its place: the
// same value with its lists emptied, so that gqlgen's work is trivial and cannot differ in
// errors (every value kept is one that was just written without finding anything gqlgen would
// complain about). ok is false when the value is not written here; gqlgen writes it then.
func (w *Writer) Value(oc *graphql.OperationContext, fc *graphql.FieldContext, res any) (json [][]byte, placeholder any, ok bool) {
	v := reflect.ValueOf(res)
	t := fc.Field.Definition.Type
	var out chunked
	if v.Kind() == reflect.Slice && t.Elem != nil {
		// A list, element by element, so that its JSON is cut into chunks as it grows.
		elem, ok := w.compile(oc, fc.Field.Field, t.Elem, fc.Field.Selections, v.Type().Elem())
		if !ok {
			return nil, nil, false
		}
		if v.IsNil() && !t.NonNull {
			out.b = append(out.b, "null"...)
		} else {
			out.b = append(out.b, '[')
			n := v.Len()
			for i := range n {
				if i > 0 {
					out.b = append(out.b, ',')
				}
				before := len(out.b)
				if out.b, ok = elem(out.b, v.Index(i)); !ok {
					return nil, nil, false
				}
				if i == 0 {
					out.reserve(len(out.b) * n)
				}
				out.cut(len(out.b) - before)
			}
			out.b = append(out.b, ']')
		}
	} else {
		enc, ok := w.compile(oc, fc.Field.Field, t, fc.Field.Selections, v.Type())
		if !ok {
			return nil, nil, false
		}
		if out.b, ok = enc(out.b, v); !ok {
			return nil, nil, false
		}
	}
	placeholder, ok = stripped(v)
	if !ok {
		return nil, nil, false
	}
	return out.done(), placeholder, true
}

// stripped returns the value gqlgen marshals instead of v: the same value with its lists
// emptied.
func stripped(v reflect.Value) (any, bool) {
	switch v.Kind() {
	case reflect.Slice:
		return reflect.MakeSlice(v.Type(), 0, 0).Interface(), true
	case reflect.Pointer:
		if v.IsNil() || v.Elem().Kind() != reflect.Struct {
			return nil, false
		}
		cp := reflect.New(v.Elem().Type())
		cp.Elem().Set(v.Elem())
		for i := range cp.Elem().NumField() {
			f := cp.Elem().Field(i)
			if f.Kind() == reflect.Slice && f.CanSet() {
				f.Set(reflect.MakeSlice(f.Type(), 0, 0))
			}
		}
		return cp.Interface(), true
	}
	return nil, false
}
