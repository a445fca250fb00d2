package gqljson

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/emsanalytics/emsquery/platform/jsonscalar"
)

// Plain is the method by which a module marks one of its Go types as written here: a struct
// whose every GraphQL field is a struct field with the same json tag (gqlgen's struct_tag:
// json), with no method or resolver of that name, holding built-in scalars, enums (Go types
// with MarshalGQL), lists and other Plain types. The method does nothing; its presence is the
// declaration, beside the type.
type Plain interface{ PlainJSON() }

var plainType = reflect.TypeFor[Plain]()

// isPlain says whether gt (or *gt) declares itself Plain.
func isPlain(gt reflect.Type) bool {
	return gt.Implements(plainType) || reflect.PointerTo(gt).Implements(plainType)
}

// compiledKey names a root field's compiled encoder: the field in its parsed document (gqlgen's
// cached one, shared by every request with the same query text; the key's pointer keeps that
// document alive, so its memory is not reused for another while the entry exists), the
// GraphQL type and the Go type it was compiled for; with flat, the list elements' flat fields
// (List.Rows) instead.
type compiledKey struct {
	field *ast.Field
	t     *ast.Type
	gt    reflect.Type
	flat  bool
}

// compiled is what was compiled for a compiledKey; shared by the requests, never changed.
type compiled struct {
	enc  encoder
	ok   bool
	flat []fieldEncoder // nil: the elements cannot be written from rows
}

const (
	// maxCompiled bounds the encoders kept; past it they are all dropped and compiled again.
	maxCompiled = 256
	// maxCompiledQuery is the longest query text whose encoders are kept: gqlgen's query cache
	// (platform/gqlexec) keeps documents up to 8 KiB, so a longer one is parsed anew on
	// every request, and keeping its encoders would only keep its syntax tree.
	maxCompiledQuery = 8 << 10
)

// compile returns the encoder of a root field's value (see compiler.value); field is the root
// field in the document and sel its selections as gqlgen collected them. A root field of a
// document seen before gets the encoder compiled then: compiling (gqlgen's CollectFields for
// every object, reflection over the Go types, the closures) cost a light list like the
// resources about as much as encoding it. Kept only: selections that are the field's own
// (not merged with another field of the same name) and have no directive, as the variables
// (@skip, @include, @defer) are the one thing compiling reads from the request.
func (w *Writer) compile(oc *graphql.OperationContext, field *ast.Field, t *ast.Type, sel ast.SelectionSet, gt reflect.Type) (encoder, bool) {
	e := w.keep(oc, field, sel, compiledKey{field: field, t: t, gt: gt}, func() *compiled {
		enc, ok := compiler{w: w, oc: oc}.value(t, sel, gt)
		return &compiled{enc: enc, ok: ok}
	})
	return e.enc, e.ok
}

// keep returns what build compiles for root field field, whose selections are sel: the result
// kept under k when the field's document was seen before, under the conditions compile gives;
// otherwise it builds it, and keeps it when those hold.
func (w *Writer) keep(oc *graphql.OperationContext, field *ast.Field, sel ast.SelectionSet, k compiledKey, build func() *compiled) *compiled {
	if field == nil || len(oc.RawQuery) > maxCompiledQuery || !slices.Equal(sel, field.SelectionSet) || !plain(oc.Doc, sel, 0) {
		return build()
	}
	if v, ok := w.compiled.Load(k); ok {
		return v.(*compiled)
	}
	e := build()
	if w.nCompiled.Add(1) > maxCompiled {
		w.compiled.Clear()
		w.nCompiled.Store(1)
	}
	w.compiled.Store(k, e)
	return e
}

// plain says whether sel, with the fragments it spreads, has no directive: which fields it
// selects then does not depend on the request's variables, and none is deferred.
func plain(doc *ast.QueryDocument, sel ast.SelectionSet, depth int) bool {
	if depth > 32 {
		return false
	}
	for _, s := range sel {
		switch s := s.(type) {
		case *ast.Field:
			if len(s.Directives) > 0 || !plain(doc, s.SelectionSet, depth+1) {
				return false
			}
		case *ast.InlineFragment:
			if len(s.Directives) > 0 || !plain(doc, s.SelectionSet, depth+1) {
				return false
			}
		case *ast.FragmentSpread:
			if len(s.Directives) > 0 {
				return false
			}
			f := s.Definition
			if f == nil && doc != nil {
				f = doc.Fragments.ForName(s.Name)
			}
			if f == nil || len(f.Directives) > 0 || !plain(doc, f.SelectionSet, depth+1) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// encoder appends the JSON of v to b; false when gqlgen would not write it as a plain value
// (it would report an error), so the caller falls back to gqlgen.
type encoder func(b []byte, v reflect.Value) ([]byte, bool)

type compiler struct {
	w  *Writer
	oc *graphql.OperationContext
}

var (
	marshalerType        = reflect.TypeFor[graphql.Marshaler]()
	contextMarshalerType = reflect.TypeFor[graphql.ContextMarshaler]()
)

// value compiles the encoder of a Go value of type gt for the GraphQL type t with the
// selection sel (for objects).
func (c compiler) value(t *ast.Type, sel ast.SelectionSet, gt reflect.Type) (encoder, bool) {
	if gt.Kind() == reflect.Pointer {
		inner, ok := c.value(t, sel, gt.Elem())
		if !ok {
			return nil, false
		}
		nonNull := t.NonNull
		return func(b []byte, v reflect.Value) ([]byte, bool) {
			if v.IsNil() {
				if nonNull {
					return b, false
				}
				return append(b, "null"...), true
			}
			return inner(b, v.Elem())
		}, true
	}
	if t.Elem != nil {
		if gt.Kind() != reflect.Slice {
			return nil, false
		}
		if fields, ok := c.valueStruct(t.Elem, sel, gt.Elem()); ok {
			return structList(fields, gt.Elem().Size(), t.NonNull), true
		}
		elem, ok := c.value(t.Elem, sel, gt.Elem())
		if !ok {
			return nil, false
		}
		nonNull := t.NonNull
		return func(b []byte, v reflect.Value) ([]byte, bool) {
			if v.IsNil() && !nonNull { // gqlgen writes a nil slice of a non-null list as []
				return append(b, "null"...), true
			}
			b = append(b, '[')
			ok := true
			for i := range v.Len() {
				if i > 0 {
					b = append(b, ',')
				}
				if b, ok = elem(b, v.Index(i)); !ok {
					return b, false
				}
			}
			return append(b, ']'), true
		}, true
	}
	def := c.w.schema.Types[t.NamedType]
	if def == nil {
		return nil, false
	}
	switch def.Kind {
	case ast.Object:
		if gt.Kind() != reflect.Struct || !isPlain(gt) {
			return nil, false
		}
		return c.object(def, sel, gt)
	case ast.Scalar:
		if gt.Implements(marshalerType) || gt.Implements(contextMarshalerType) ||
			reflect.PointerTo(gt).Implements(marshalerType) || reflect.PointerTo(gt).Implements(contextMarshalerType) {
			return nil, false
		}
		return scalar(def.Name, gt.Kind())
	case ast.Enum:
		return enum(gt)
	}
	return nil, false
}

// enum is the encoder of an enum value. gqlgen's generated code hands the value itself on as
// its graphql.Marshaler (every enum of the schemas is a Go type with MarshalGQL), so the value
// is written by that method: its bytes are gqlgen's whatever the method writes.
func enum(gt reflect.Type) (encoder, bool) {
	if !gt.Implements(marshalerType) {
		return nil, false
	}
	return func(b []byte, v reflect.Value) ([]byte, bool) {
		if !v.CanInterface() {
			return b, false
		}
		w := bytes.NewBuffer(b) // appends to b
		v.Interface().(graphql.Marshaler).MarshalGQL(w)
		return w.Bytes(), true
	}, true
}

// scalar is the encoder of a built-in scalar, writing what gqlgen's Marshal functions write.
func scalar(name string, k reflect.Kind) (encoder, bool) {
	switch {
	case name == "Int" && (k == reflect.Int || k == reflect.Int32 || k == reflect.Int64):
		return func(b []byte, v reflect.Value) ([]byte, bool) { return strconv.AppendInt(b, v.Int(), 10), true }, true
	case name == "Float" && k == reflect.Float64:
		return func(b []byte, v reflect.Value) ([]byte, bool) { return jsonscalar.AppendFloat(b, v.Float()) }, true
	case name == "String" && k == reflect.String:
		return func(b []byte, v reflect.Value) ([]byte, bool) { return jsonscalar.AppendString(b, v.String()), true }, true
	case name == "Boolean" && k == reflect.Bool:
		return func(b []byte, v reflect.Value) ([]byte, bool) { return strconv.AppendBool(b, v.Bool()), true }, true
	}
	return nil, false
}

type fieldEncoder struct {
	key   []byte  // `"alias":`, preceded by ',' but for the first field
	index int     // of the struct field
	enc   encoder // nil for __typename
	lit   []byte  // __typename's value
	// scalar: the field is a built-in scalar (or a pointer to one), which Fill's rows may give
	// as its JSON; nonNull: its GraphQL type forbids null.
	scalar, nonNull bool
}

// object compiles an object's selection as gqlgen's generated code does: CollectFields with
// the type (and its interfaces) for fragments, @skip and @include, then each field by alias.
func (c compiler) object(def *ast.Definition, sel ast.SelectionSet, gt reflect.Type) (encoder, bool) {
	encs, ok := c.fields(def, sel, gt)
	if !ok {
		return nil, false
	}
	return func(b []byte, v reflect.Value) ([]byte, bool) {
		b = append(b, '{')
		ok := true
		for i := range encs {
			f := &encs[i]
			b = append(b, f.key...)
			if f.enc == nil {
				b = append(b, f.lit...)
				continue
			}
			if b, ok = f.enc(b, v.Field(f.index)); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}, true
}

// fields compiles the fields of an object's selection, in the order they are written.
func (c compiler) fields(def *ast.Definition, sel ast.SelectionSet, gt reflect.Type) ([]fieldEncoder, bool) {
	satisfies := append([]string{def.Name}, def.Interfaces...)
	fields := graphql.CollectFields(c.oc, sel, satisfies)
	encs := make([]fieldEncoder, 0, len(fields))
	written := map[string]bool{}
	for i, f := range fields {
		if written[f.Alias] {
			continue
		}
		written[f.Alias] = true
		if len(f.Deferrables) > 0 { // in a @defer fragment: the general path answers it
			return nil, false
		}
		var key []byte
		if i != 0 {
			key = append(key, ',')
		}
		key = jsonscalar.AppendString(key, f.Alias)
		key = append(key, ':')
		if f.Name == "__typename" {
			encs = append(encs, fieldEncoder{key: key, lit: jsonscalar.AppendString(nil, def.Name)})
			continue
		}
		fd := f.Definition
		if fd == nil || len(fd.Arguments) > 0 {
			return nil, false
		}
		idx, ok := structField(gt, f.Name)
		if !ok {
			return nil, false
		}
		enc, ok := c.value(fd.Type, f.Selections, gt.Field(idx).Type)
		if !ok {
			return nil, false
		}
		ftd := c.w.schema.Types[fd.Type.NamedType]
		scalar := fd.Type.Elem == nil && ftd != nil && ftd.Kind == ast.Scalar
		encs = append(encs, fieldEncoder{key: key, index: idx, enc: enc, scalar: scalar, nonNull: fd.Type.NonNull})
	}
	return encs, true
}

// structField finds the exported field of gt tagged json:"name", directly in gt. It refuses when
// gt or *gt has a method of that name, which gqlgen might bind instead.
func structField(gt reflect.Type, name string) (int, bool) {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	for _, t := range []reflect.Type{gt, reflect.PointerTo(gt)} {
		for i := range t.NumMethod() {
			if norm(t.Method(i).Name) == norm(name) {
				return 0, false
			}
		}
	}
	for i := range gt.NumField() {
		f := gt.Field(i)
		if !f.IsExported() || f.Anonymous {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return i, true
		}
	}
	return 0, false
}

// offsetField is a field of a struct written from its offset in the struct: a built-in scalar
// held by value (Int, String or Boolean), or __typename (lit).
type offsetField struct {
	key  []byte // as fieldEncoder's
	lit  []byte // __typename's value; nil for a value
	off  uintptr
	kind reflect.Kind
}

// valueStruct compiles the selection sel of an object type t held as the struct type gt when
// every field it selects is a built-in scalar held by value (or __typename): such an element
// cannot be null, and its fields are read at their offsets (structList).
func (c compiler) valueStruct(t *ast.Type, sel ast.SelectionSet, gt reflect.Type) ([]offsetField, bool) {
	def := c.w.schema.Types[t.NamedType]
	if t.Elem != nil || def == nil || def.Kind != ast.Object || gt.Kind() != reflect.Struct || !isPlain(gt) {
		return nil, false
	}
	encs, ok := c.fields(def, sel, gt)
	if !ok {
		return nil, false
	}
	fields := make([]offsetField, len(encs))
	for i, f := range encs {
		fields[i] = offsetField{key: f.key, lit: f.lit}
		if f.enc == nil {
			continue
		}
		sf := gt.Field(f.index)
		switch k := sf.Type.Kind(); {
		case !f.scalar:
			return nil, false
		case k == reflect.Int || k == reflect.Int32 || k == reflect.Int64 || k == reflect.String || k == reflect.Bool:
			// fields checked that the GraphQL scalar is the one this kind is written as
			fields[i].off, fields[i].kind = sf.Offset, k
		default:
			return nil, false
		}
	}
	return fields, true
}

// structList writes a slice of structs of size bytes each, every one with fields, as a list:
// each field read at its offset from the slice's array, without a reflect.Value per element
// and per field (a nested list of a few hundred elements cost a light question several µs so).
func structList(fields []offsetField, size uintptr, nonNull bool) encoder {
	return func(b []byte, v reflect.Value) ([]byte, bool) {
		if v.IsNil() && !nonNull { // gqlgen writes a nil slice of a non-null list as []
			return append(b, "null"...), true
		}
		b = append(b, '[')
		n := v.Len()
		var base unsafe.Pointer
		if n > 0 {
			base = v.UnsafePointer()
		}
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			p := unsafe.Add(base, uintptr(i)*size)
			b = append(b, '{')
			for j := range fields {
				f := &fields[j]
				b = append(b, f.key...)
				switch f.kind {
				case reflect.Int:
					b = strconv.AppendInt(b, int64(*(*int)(unsafe.Add(p, f.off))), 10)
				case reflect.Int32:
					b = strconv.AppendInt(b, int64(*(*int32)(unsafe.Add(p, f.off))), 10)
				case reflect.Int64:
					b = strconv.AppendInt(b, *(*int64)(unsafe.Add(p, f.off)), 10)
				case reflect.String:
					b = jsonscalar.AppendString(b, *(*string)(unsafe.Add(p, f.off)))
				case reflect.Bool:
					b = strconv.AppendBool(b, *(*bool)(unsafe.Add(p, f.off)))
				default:
					b = append(b, f.lit...)
				}
			}
			b = append(b, '}')
		}
		return append(b, ']'), true
	}
}
