// Package gqljson writes the JSON of a GraphQL query's root field straight from the Go value its
// resolver returned, when that value is made of plain objects, lists and built-in scalars.
//
// gqlgen marshals a list of objects by starting a goroutine per element and building, for every
// field of every element, a field context, a context value, closures and a marshaler, all kept
// until the response is written. For the service's large lists (patients, oxygens: hundreds of
// thousands of rows) that costs ten times the database's own time and gigabytes of memory under
// concurrency. This package replaces that step, and only that step: parsing, validation,
// complexity limits, the resolvers, their errors and the response envelope stay gqlgen's.
//
// How: Fields (a gqlgen field middleware) sees a root field's resolved value before gqlgen
// marshals it. When every selected field can be written here exactly as gqlgen would write it,
// it encodes the value to JSON now, and gives gqlgen an equivalent value without its lists to
// marshal instead (an empty list, or the object with empty lists). RootFields (a gqlgen root
// field middleware) then answers the field with the JSON encoded here. Anything else (a type not
// allowed, an enum or custom scalar, a field with arguments, @defer, a null where the schema
// forbids one, a NaN) leaves the value to gqlgen untouched, so the answer, errors included, is
// always gqlgen's own; the package's tests compare both byte for byte.
//
// Only object types named when the Writer is built are written here: their Go types must bind
// every GraphQL field to a struct field with the same json tag (gqlgen's struct_tag: json), with
// no method or resolver of that name.
package gqljson

import (
	"context"
	"errors"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// Writer holds the schema and the object types whose values it may write.
type Writer struct {
	schema *ast.Schema
	types  map[string]bool
	bulk   map[string]bool // root fields limited by gate
	gate   chan struct{}
	// lastSize is, per root field, the size of the first chunk of the JSON a List wrote last:
	// the next List of that field starts with that much room (a table's size changes little
	// between requests), instead of growing to it step by step.
	lastSize map[string]*atomic.Int64
	// compiled are the encoders of root fields compiled before (see compile).
	compiled  sync.Map // compiledKey -> *compiled
	nCompiled atomic.Int64
}

// New returns a Writer for the object types named (GraphQL type names) of schema.
func New(schema *ast.Schema, objectTypes ...string) *Writer {
	w := &Writer{schema: schema, types: map[string]bool{}, lastSize: map[string]*atomic.Int64{}}
	for _, t := range objectTypes {
		if def := schema.Types[t]; def != nil && def.Kind == ast.Object {
			w.types[t] = true
		}
	}
	if schema.Query != nil {
		for _, f := range schema.Query.Fields {
			w.lastSize[f.Name] = new(atomic.Int64)
		}
	}
	return w
}

// LimitBulk lets at most n of the named root fields (those that answer whole tables, which
// hold their JSON in memory until it is sent) be resolved and written at once, whatever the
// number of requests: with more, memory grows with concurrency, not throughput (they are
// bound by processor time). The others wait for their turn, or until their request ends.
func (w *Writer) LimitBulk(n int, fields ...string) {
	w.gate = make(chan struct{}, max(n, 1))
	w.bulk = map[string]bool{}
	for _, f := range fields {
		w.bulk[f] = true
	}
}

type slotKey struct{}

// slot carries one root field's JSON from Fields (or a List) to RootFields.
type slot struct {
	w     *Writer
	field *ast.Field
	json  [][]byte // the value's JSON, in chunks; nil while not written here
	// stream, instead of json, writes the value's JSON while the response is sent (List.Stream).
	stream func(w io.Writer) error
}

// RootFields is a graphql.RootFieldMiddleware: install it with handler.Server.AroundRootFields.
func (w *Writer) RootFields(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	rfc := graphql.GetRootFieldContext(ctx)
	if rfc == nil || rfc.Field.Field == nil || !w.mayWrite(rfc.Field.Definition) {
		return next(ctx)
	}
	if w.bulk[rfc.Field.Name] {
		select {
		case w.gate <- struct{}{}:
			defer func() { <-w.gate }()
		case <-ctx.Done(): // the resolver fails on the context, with gqlgen's error
		}
	}
	s := &slot{w: w, field: rfc.Field.Field}
	m := next(context.WithValue(ctx, slotKey{}, s))
	held, _ := ctx.Value(heldKey{}).(*held)
	if s.stream != nil {
		stream := s.stream
		s.stream = nil
		if held == nil { // not through Transport: written into gqlgen's response, as it comes
			return graphql.WriterFunc(func(out io.Writer) { _ = stream(out) })
		}
		return graphql.WriterFunc(func(out io.Writer) {
			_, _ = out.Write(held.addStream(ctx, stream))
		})
	}
	if s.json == nil {
		return m
	}
	return graphql.WriterFunc(func(out io.Writer) {
		chunks := s.json
		s.json = nil
		if held != nil {
			// Through Transport: the JSON goes to the client without passing through gqlgen's
			// response buffer and the transport's json.Marshal; a token holds its place.
			_, _ = out.Write(held.add(chunks))
			return
		}
		for _, c := range chunks {
			_, _ = out.Write(c)
		}
	})
}

// Fields is a graphql.FieldMiddleware: install it with handler.Server.AroundFields.
func (w *Writer) Fields(ctx context.Context, next graphql.Resolver) (any, error) {
	res, err := next(ctx)
	if err != nil || res == nil {
		return res, err
	}
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Object != "Query" {
		return res, err
	}
	s, _ := ctx.Value(slotKey{}).(*slot)
	if s == nil || s.field != fc.Field.Field || s.json != nil || s.stream != nil { // a List wrote it
		return res, err
	}
	oc := graphql.GetOperationContext(ctx)
	if oc == nil {
		return res, err
	}
	v := reflect.ValueOf(res)
	t := fc.Field.Definition.Type
	var out chunked
	if v.Kind() == reflect.Slice && t.Elem != nil {
		// A list, element by element, so that its JSON is cut into chunks as it grows.
		elem, ok := w.compile(oc, fc.Field.Field, t.Elem, fc.Field.Selections, v.Type().Elem())
		if !ok {
			return res, err
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
					return res, err
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
			return res, err
		}
		if out.b, ok = enc(out.b, v); !ok {
			return res, err
		}
	}
	placeholder, ok := stripped(v)
	if !ok {
		return res, err
	}
	s.json = out.done()
	return placeholder, nil
}

// chunkSize is the size of the chunks JSON is written in: large enough for few writes, small
// enough that growing a chunk copies little and a list of any length costs its JSON's size
// plus at most one chunk.
const chunkSize = 256 << 10

// chunked is JSON written in chunks, kept (full) or, with a sink, written to it as each chunk
// fills and its buffer reused.
type chunked struct {
	full [][]byte
	b    []byte
	sink io.Writer
	err  error // the sink's
}

// flush writes the current chunk to the sink.
func (c *chunked) flush() {
	if c.err == nil && len(c.b) > 0 {
		_, c.err = c.sink.Write(c.b)
	}
	c.b = c.b[:0]
}

// cut follows an element of elemLen bytes: it starts a new chunk when the current one is
// (nearly) full, and otherwise doubles the current one (up to a chunk) when two more such
// elements might not fit, since append alone grows large slices by a quarter at a time, which
// copies and allocates a list's JSON about five times over.
func (c *chunked) cut(elemLen int) {
	switch {
	case c.sink != nil && len(c.b) >= streamChunk-streamChunk/8:
		c.flush()
	case c.sink != nil && cap(c.b)-len(c.b) < 2*elemLen:
		b := make([]byte, len(c.b), min(max(2*cap(c.b), firstChunk), streamChunk))
		copy(b, c.b)
		c.b = b
	case len(c.b) >= chunkSize-chunkSize/8:
		c.full = append(c.full, c.b)
		c.b = make([]byte, 0, chunkSize)
	case cap(c.b)-len(c.b) < 2*elemLen:
		b := make([]byte, len(c.b), min(max(2*cap(c.b), firstChunk), chunkSize))
		copy(b, c.b)
		c.b = b
	}
}

// streamChunk is the size of the chunks a streamed List writes (List.Stream): about what one
// write to the client takes, reused for the whole list.
const streamChunk = 64 << 10

// firstChunk is where a List starts: most lists (the dimension tables) are far smaller than a
// chunk, and the doubling in cut reaches a chunk in a few steps for the large ones.
const firstChunk = 4 << 10

// reserve grows the current chunk once to hold about n bytes (at most a chunk): a list's JSON
// estimated from its first element, so that it is not grown step by step (append grows large
// slices by a quarter at a time, which for a list of a few hundred objects copied and allocated
// its JSON five times over).
func (c *chunked) reserve(n int) {
	n = min(n+n/8, chunkSize)
	if cap(c.b) < n {
		b := make([]byte, len(c.b), n)
		copy(b, c.b)
		c.b = b
	}
}

func (c *chunked) done() [][]byte {
	return append(c.full, c.b)
}

// List writes the JSON of a root field's list element by element, as its resolver reads the
// elements, so that the list is never held as Go values: see NewList.
type List[T any] struct {
	s    *slot
	enc  encoder
	flat []fieldEncoder // the elements' fields, when every one is a scalar (see AddRow)
	// compileFlat compiles flat on the first call of Rows.
	compileFlat func() []fieldEncoder
	nonNull     bool // the elements' GraphQL type
	out         chunked
	n           int
	bad         bool
	size        *atomic.Int64 // the field's Writer.lastSize
}

// NewList returns a List for the root field being resolved in ctx, whose value is a list of T
// (or of *T), or nil when its JSON cannot be written here: no Writer installed, not a root
// field, T not an allowed object type, or a selection this package does not write. The
// resolver then returns its value as usual. Otherwise it calls Add for each element, then Done,
// and returns an empty list of its type, which gqlgen marshals in place of the JSON written.
func NewList[T any](ctx context.Context) *List[T] {
	s, _ := ctx.Value(slotKey{}).(*slot)
	fc := graphql.GetFieldContext(ctx)
	oc := graphql.GetOperationContext(ctx)
	if s == nil || fc == nil || oc == nil || fc.Object != "Query" || s.field != fc.Field.Field || s.json != nil {
		return nil
	}
	t := fc.Field.Definition.Type
	if t.Elem == nil {
		return nil
	}
	enc, ok := s.w.compile(oc, fc.Field.Field, t.Elem, fc.Field.Selections, reflect.TypeFor[T]())
	if !ok {
		return nil
	}
	l := &List[T]{s: s, enc: enc, nonNull: t.Elem.NonNull, size: s.w.lastSize[fc.Field.Name]}
	// The flat fields are compiled when a resolver asks for them (Rows), and kept between
	// requests as the encoder is.
	l.compileFlat = func() []fieldEncoder {
		k := compiledKey{field: fc.Field.Field, t: t.Elem, gt: reflect.TypeFor[T](), flat: true}
		return s.w.keep(oc, fc.Field.Field, fc.Field.Selections, k, func() *compiled {
			def := s.w.schema.Types[t.Elem.NamedType]
			if t.Elem.Elem != nil || def == nil || def.Kind != ast.Object || reflect.TypeFor[T]().Kind() != reflect.Struct {
				return &compiled{}
			}
			fields, ok := compiler{w: s.w, oc: oc}.fields(def, fc.Field.Selections, reflect.TypeFor[T]())
			if !ok || slices.ContainsFunc(fields, func(f fieldEncoder) bool { return f.enc != nil && !f.scalar }) {
				return &compiled{}
			}
			return &compiled{flat: fields}
		}).flat
	}
	room := firstChunk
	if l.size != nil {
		room = min(max(room, int(l.size.Load())+int(l.size.Load())/8), chunkSize)
	}
	l.out.b = make([]byte, 0, room)
	l.out.b = append(l.out.b, '[')
	return l
}

// Add writes one element; false when it holds a value gqlgen would refuse (a null where the
// schema forbids one, a NaN): the resolver must then stop and return its value as usual, so
// that gqlgen answers, errors included.
func (l *List[T]) Add(v *T) bool {
	if l.bad {
		return false
	}
	if l.n > 0 {
		l.out.b = append(l.out.b, ',')
	}
	l.n++
	if v == nil {
		if l.nonNull {
			l.bad = true
			return false
		}
		l.out.b = append(l.out.b, "null"...)
		return true
	}
	var ok bool
	before := len(l.out.b)
	if l.out.b, ok = l.enc(l.out.b, reflect.ValueOf(v).Elem()); !ok {
		l.bad = true
		return false
	}
	l.out.cut(len(l.out.b) - before)
	if l.out.err != nil {
		l.bad = true
		return false
	}
	return true
}

// FieldFunc appends to b the JSON of the field of T whose struct field index is i, for the
// element AddRow is writing, exactly as the List would write that field's Go value:
// strconv.AppendInt for an Int, AppendFloat for a Float, AppendString for a String,
// strconv.AppendBool for a Boolean. Appending nothing means the value is nil (null); false means
// the List would refuse the value (AppendFloat's false).
type FieldFunc func(b []byte, i int) ([]byte, bool)

// Rows reports whether AddRow may be used: every field selected in the elements is a built-in
// scalar (or __typename).
func (l *List[T]) Rows() bool {
	if l.compileFlat != nil {
		l.flat, l.compileFlat = l.compileFlat(), nil
	}
	return l.flat != nil
}

// AddRow writes one element as Add would write a T whose fields hold the values field writes,
// for a resolver that has the values in another form (a row as the database sent it) and would
// otherwise build a T only to have it read back. false as for Add, and when Rows is false.
func (l *List[T]) AddRow(field FieldFunc) bool {
	if l.bad || !l.Rows() {
		l.bad = true
		return false
	}
	b := l.out.b
	if l.n > 0 {
		b = append(b, ',')
	}
	l.n++
	before := len(b)
	b = append(b, '{')
	for i := range l.flat {
		f := &l.flat[i]
		b = append(b, f.key...)
		if f.enc == nil {
			b = append(b, f.lit...)
			continue
		}
		n := len(b)
		var ok bool
		if b, ok = field(b, f.index); !ok || len(b) == n && f.nonNull {
			l.bad = true
			return false
		}
		if len(b) == n {
			b = append(b, "null"...)
		}
	}
	l.out.b = append(b, '}')
	l.out.cut(len(l.out.b) - before)
	if l.out.err != nil {
		l.bad = true
		return false
	}
	return true
}

// Fill writes the whole list and hands it over (Done): from rows when every selected field is a
// scalar (Rows), the element's field i from the row's column i (its struct fields and the
// columns in the same order): a NULL column as null, any other by field, which appends the JSON
// of column i's bytes v as a FieldFunc would; otherwise from values, element by element (Add).
// rows and values call their yield for each row or element until it returns false, and report
// whether they came to the end. done is false (and err nil) when the list could not be written
// here: a value gqlgen must judge; the resolver then answers the usual way.
func (l *List[T]) Fill(rows func(yield func(row [][]byte) bool) (bool, error),
	field func(b []byte, i int, v []byte) ([]byte, bool),
	values func(yield func(*T) bool) (bool, error)) (done bool, err error) {
	var complete bool
	if rows != nil && l.Rows() {
		var row [][]byte
		f := func(b []byte, i int) ([]byte, bool) {
			switch {
			case i >= len(row):
				return b, false
			case row[i] == nil:
				return b, true // nothing appended: null
			}
			return field(b, i, row[i])
		}
		complete, err = rows(func(r [][]byte) bool {
			row = r
			return l.AddRow(f)
		})
	} else {
		complete, err = values(l.Add)
	}
	if err != nil {
		return false, err
	}
	return complete && l.Done(), nil
}

// ErrUnwritable is the error of a list holding a value GraphQL cannot answer: a null where the
// schema forbids one, a NaN or an infinity.
var ErrUnwritable = errors.New("a value of the list cannot be written as JSON (a null where the schema forbids one, NaN or an infinity)")

// Stream has the list written while the response is sent, instead of now: the resolver
// returns an empty list of its type at once, and rows (or values, as for Fill) are read when
// the response reaches the list, each chunk of JSON going to the client before the next rows
// are read, so that the list is never held in memory whatever its length. An error then (the
// statement's, ErrUnwritable) ends the response: see Transport.
func (l *List[T]) Stream(rows func(yield func(row [][]byte) bool) (bool, error),
	field func(b []byte, i int, v []byte) ([]byte, bool),
	values func(yield func(*T) bool) (bool, error)) {
	l.s.stream = func(w io.Writer) error {
		l.out.sink = w
		done, err := l.Fill(rows, field, values)
		switch {
		case l.out.err != nil:
			return l.out.err
		case err != nil:
			return err
		case !done:
			return ErrUnwritable
		}
		return l.out.err
	}
}

// Done hands the list's JSON over (or, streaming, writes its last chunk); false (and nothing
// handed over) after a refused element.
func (l *List[T]) Done() bool {
	if l.bad {
		return false
	}
	if l.out.sink != nil {
		l.out.b = append(l.out.b, ']')
		l.out.flush()
		return l.out.err == nil
	}
	l.out.b = append(l.out.b, ']')
	l.s.json = l.out.done()
	if l.size != nil {
		l.size.Store(int64(len(l.s.json[0])))
	}
	return true
}

// mayWrite reports whether the field's type is, or is a list of, an allowed object type.
func (w *Writer) mayWrite(def *ast.FieldDefinition) bool {
	if def == nil || def.Type == nil {
		return false
	}
	t := def.Type
	for t.Elem != nil {
		t = t.Elem
	}
	return w.types[t.NamedType]
}

// stripped returns the value gqlgen marshals instead of v: the same value with its lists
// emptied, so that gqlgen's work is trivial and cannot differ in errors (every value kept is one
// that was just written without finding anything gqlgen would complain about).
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
	// (platform/graphqlserver) keeps documents up to 8 KiB, so a longer one is parsed anew on
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
		if !c.w.types[def.Name] || gt.Kind() != reflect.Struct {
			return nil, false
		}
		return c.object(def, sel, gt)
	case ast.Scalar:
		if gt.Implements(marshalerType) || gt.Implements(contextMarshalerType) ||
			reflect.PointerTo(gt).Implements(marshalerType) || reflect.PointerTo(gt).Implements(contextMarshalerType) {
			return nil, false
		}
		return scalar(def.Name, gt.Kind())
	}
	return nil, false
}

// scalar is the encoder of a built-in scalar, writing what gqlgen's Marshal functions write.
func scalar(name string, k reflect.Kind) (encoder, bool) {
	switch {
	case name == "Int" && (k == reflect.Int || k == reflect.Int32 || k == reflect.Int64):
		return func(b []byte, v reflect.Value) ([]byte, bool) { return strconv.AppendInt(b, v.Int(), 10), true }, true
	case name == "Float" && k == reflect.Float64:
		return func(b []byte, v reflect.Value) ([]byte, bool) { return AppendFloat(b, v.Float()) }, true
	case name == "String" && k == reflect.String:
		return func(b []byte, v reflect.Value) ([]byte, bool) { return AppendString(b, v.String()), true }, true
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
	// scalar: the field is a built-in scalar (or a pointer to one), which AddRow may be given
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
		if f.Deferrable != nil {
			return nil, false
		}
		var key []byte
		if i != 0 {
			key = append(key, ',')
		}
		key = AppendString(key, f.Alias)
		key = append(key, ':')
		if f.Name == "__typename" {
			encs = append(encs, fieldEncoder{key: key, lit: AppendString(nil, def.Name)})
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

// AppendFloat appends f as gqlgen's MarshalFloatContext writes it (fmt's %g); false for NaN and
// infinities, which gqlgen reports as errors.
func AppendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	// A whole number of tenths (a numeric(p,1) column read as float8: weights, flow rates) from
	// 0.1 to 1e6, where %g writes no exponent, without the general search for the shortest
	// digits, which costs several times this per value of a large list. n/10 is the double
	// nearest the decimal n/10 (division is correctly rounded), so that decimal reads back as f;
	// no decimal with fewer digits is within the double's precision of it; so it is the shortest.
	if a := math.Abs(f); a >= 0.1 && a < 1e6 {
		if n := math.Round(f * 10); n/10 == f {
			i := int64(n)
			if i < 0 {
				b, i = append(b, '-'), -i
			}
			b = strconv.AppendInt(b, i/10, 10)
			if r := i % 10; r != 0 {
				b = append(b, '.', byte('0'+r))
			}
			return b, true
		}
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64), true
}

const (
	hexDigits = "0123456789ABCDEF"
	lowerHex  = "0123456789abcdef"
)

// AppendString appends s quoted as gqlgen's MarshalString writes it, then escaped as the
// transports' json.Marshal escapes it: control characters, '"' and '\\' as gqlgen escapes them;
// '<', '>', '&', U+2028 and U+2029 as \\u sequences, as json.Marshal does; every other byte
// (invalid UTF-8 included) as it is. Written here, the second escaping is done already, so
// the JSON is final: json.Marshal leaves it unchanged, and Transport writes it as it is.
//
// s may be a string or the bytes of one (a text column as the database sent it).
func AppendString[S ~string | ~[]byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !special[c] {
			continue
		}
		switch c {
		case '\t':
			b = append(b, s[start:i]...)
			b = append(b, `\t`...)
		case '\r':
			b = append(b, s[start:i]...)
			b = append(b, `\r`...)
		case '\n':
			b = append(b, s[start:i]...)
			b = append(b, `\n`...)
		case '\\':
			b = append(b, s[start:i]...)
			b = append(b, `\\`...)
		case '"':
			b = append(b, s[start:i]...)
			b = append(b, `\"`...)
		case 0xE2:
			if i+2 >= len(s) || s[i+1] != 0x80 || s[i+2]&^1 != 0xA8 {
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xF])
			i += 2
		case '<', '>', '&': // json.Marshal's escapes, in its lower-case hex
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
		default: // control characters, in gqlgen's upper-case hex
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// special marks the bytes AppendString looks at twice.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for _, c := range []byte{'"', '\\', '<', '>', '&', 0xE2} {
		t[c] = true
	}
	return t
}()
