package gqljson

import (
	"errors"
	"io"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

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

// flush writes the current chunk to the sink: handing it over when the sink takes it whole
// (swapper), which spares copying a streamed list's JSON once more.
func (c *chunked) flush() {
	if s, ok := c.sink.(swapper); ok && c.err == nil && len(c.b) > 0 {
		c.b, c.err = s.Swap(c.b)
		c.b = c.b[:0]
		return
	}
	if c.err == nil && len(c.b) > 0 {
		_, c.err = c.sink.Write(c.b)
	}
	c.b = c.b[:0]
}

// swapper is a sink that takes a whole chunk instead of copying it (Swap takes b and returns
// the buffer to fill next, nil with an error): the GraphQL path's streamed answers.
type swapper interface {
	Swap(b []byte) ([]byte, error)
}

// cut follows an element of elemLen bytes: it starts a new chunk when the current one is
// (nearly) full, and otherwise doubles the current one (up to a chunk) when two more such
// elements might not fit, since append alone grows large slices by a quarter at a time, which
// copies and allocates a list's JSON about five times over.
func (c *chunked) cut(elemLen int) {
	switch {
	case c.sink != nil && (len(c.b) >= streamChunk-streamChunk/8 || cap(c.b) >= streamChunk && cap(c.b)-len(c.b) < 2*elemLen):
		c.flush() // written: a streamed chunk never grows past streamChunk
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
	enc  encoder
	flat []fieldEncoder // the elements' fields, when every one is a scalar (see Rows)
	keys []shortKey     // flat's keys, for addRaw
	// compileFlat compiles flat on the first call of Rows.
	compileFlat func() []fieldEncoder
	nonNull     bool // the elements' GraphQL type
	out         chunked
	n           int
	bad         bool
	size        *atomic.Int64 // the field's Writer.lastSize
	json        [][]byte      // the list's JSON, once Done
}

// NewList returns a List for root field fc of operation oc, whose value is a list of T (or of
// *T), or nil when its JSON cannot be written here: T not Plain, or a selection this package
// does not write (see Writer.Value).
func NewList[T any](w *Writer, oc *graphql.OperationContext, fc *graphql.FieldContext) *List[T] {
	t := fc.Field.Definition.Type
	if t.Elem == nil {
		return nil
	}
	enc, ok := w.compile(oc, fc.Field.Field, t.Elem, fc.Field.Selections, reflect.TypeFor[T]())
	if !ok {
		return nil
	}
	l := &List[T]{enc: enc, nonNull: t.Elem.NonNull, size: w.lastSize[fc.Field.Name]}
	// The flat fields are compiled when a resolver asks for them (Rows), and kept between
	// requests as the encoder is.
	l.compileFlat = func() []fieldEncoder {
		k := compiledKey{field: fc.Field.Field, t: t.Elem, gt: reflect.TypeFor[T](), flat: true}
		return w.keep(oc, fc.Field.Field, fc.Field.Selections, k, func() *compiled {
			def := w.schema.Types[t.Elem.NamedType]
			if t.Elem.Elem != nil || def == nil || def.Kind != ast.Object || reflect.TypeFor[T]().Kind() != reflect.Struct {
				return &compiled{}
			}
			fields, ok := compiler{w: w, oc: oc}.fields(def, fc.Field.Selections, reflect.TypeFor[T]())
			if !ok || slices.ContainsFunc(fields, func(f fieldEncoder) bool { return f.enc != nil && !f.scalar }) {
				return &compiled{}
			}
			return &compiled{flat: fields}
		}).flat
	}
	return l
}

// begin starts the list's JSON, in a chunk as large as the field's last list (Writer.lastSize)
// unless WriteTo gave it one: a reused one (heldChunks) when that is small.
func (l *List[T]) begin() {
	if l.out.b == nil {
		room := firstChunk
		if l.size != nil {
			room = min(max(room, int(l.size.Load())+int(l.size.Load())/8), chunkSize)
		}
		if room <= heldChunk {
			l.out.b = (*heldChunks.Get().(*[]byte))[:0]
		} else {
			l.out.b = make([]byte, 0, room)
		}
	}
	l.out.b = append(l.out.b, '[')
}

// heldChunk is the size of the chunks a held list (Fill) starts in when its field's last list
// fitted: most lists held whole (the small dimension tables, a page) fit in one.
const heldChunk = 16 << 10

// heldChunks are held lists' first chunks, given back once their answer was written (Release):
// a light question's list otherwise allocated its JSON's size on every request, the largest
// part of what the collector had to reclaim.
var heldChunks = sync.Pool{New: func() any { b := make([]byte, 0, heldChunk); return &b }}

// Release gives back the chunks of JSON a list held (JSON) once nothing uses them any more:
// the answer that holds them was written (every writer copies what it is given, as io.Writer
// requires). A chunk that was not one of heldChunks' is left to the collector.
func Release(chunks [][]byte) {
	for _, c := range chunks {
		if cap(c) == heldChunk {
			c = c[:0]
			heldChunks.Put(&c)
		}
	}
}

// streamChunks are the chunks of streamed lists (WriteTo), reused from one list to the next:
// a streamed list otherwise grew its chunk from firstChunk to streamChunk, most of a light
// request's allocations (a small whole table, such as the resources, is streamed too).
var streamChunks = sync.Pool{New: func() any { b := make([]byte, 0, streamChunk); return &b }}

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

// Rows reports whether rows may be written (Fill's rows): every field selected in the elements
// is a built-in scalar (or __typename).
func (l *List[T]) Rows() bool {
	if l.compileFlat != nil {
		l.flat, l.compileFlat = l.compileFlat(), nil
		l.keys = make([]shortKey, len(l.flat))
		for i, f := range l.flat {
			l.keys[i].n = copy(l.keys[i].b[:], f.key)
			if len(f.key) > keyRoom {
				l.keys[i].n = -1
			}
		}
	}
	return l.flat != nil
}

// keyRoom is what a shortKey holds: most keys (`,"date_of_birth":`) are shorter.
const keyRoom = 32

// shortKey is a field's key in a fixed array, which addRaw copies whole, in two moves, and then
// counts n bytes of (n < 0: a longer key, appended): appending a key called memmove, a tenth of
// a whole-table list's processor time with the values' appends.
type shortKey struct {
	b [keyRoom]byte
	n int
}

// addRaw writes one element as Add would write a T whose fields hold the values of row, a row
// as the database sent it, field writing the JSON of column i's bytes v as Fill says (a NULL
// column, or nothing appended, is null); false as for Add. One call per column: a whole-table
// list writes millions of them.
func (l *List[T]) addRaw(row [][]byte, field func(b []byte, i int, v []byte) ([]byte, bool)) bool {
	if l.bad {
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
		f, k := &l.flat[i], &l.keys[i]
		if n := len(b); k.n >= 0 && cap(b)-n >= keyRoom {
			b = b[:n+keyRoom]
			*(*[keyRoom]byte)(b[n:]) = k.b
			b = b[:n+k.n]
		} else {
			b = append(b, f.key...)
		}
		if f.enc == nil {
			b = append(b, f.lit...)
			continue
		}
		if f.index >= len(row) {
			l.bad = true
			return false
		}
		n := len(b)
		if v := row[f.index]; v != nil {
			var ok bool
			if b, ok = field(b, f.index, v); !ok {
				l.bad = true
				return false
			}
		}
		if len(b) == n { // nothing appended: null
			if f.nonNull {
				l.bad = true
				return false
			}
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

// Fill writes the whole list and ends it (Done): from rows when every selected field is a
// scalar (Rows), the element's field i from the row's column i (its struct fields and the
// columns in the same order): a NULL column as null, any other by field, which appends the JSON
// of column i's bytes v exactly as the List would write the field's Go value (strconv.AppendInt
// for an Int, jsonscalar's AppendFloat for a Float and AppendString for a String,
// strconv.AppendBool for a Boolean; false where the List would refuse the value); otherwise
// from values, element by element (Add). rows and values call their yield for each row or
// element until it returns false, and report whether they came to the end; rows may be nil.
// done is false (and err nil) when the list holds a value GraphQL cannot answer
// (ErrUnwritable).
func (l *List[T]) Fill(rows func(yield func(row [][]byte) bool) (bool, error),
	field func(b []byte, i int, v []byte) ([]byte, bool),
	values func(yield func(*T) bool) (bool, error)) (done bool, err error) {
	l.begin()
	var complete bool
	if rows != nil && l.Rows() {
		complete, err = rows(func(row [][]byte) bool { return l.addRaw(row, field) })
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

// WriteTo writes the whole list to sink as it reads it (see Fill for rows, field and values),
// chunk by chunk (streamChunk), reusing one buffer: the list is never held in memory whatever
// its length. A refused value is ErrUnwritable; a failed write, its error.
func (l *List[T]) WriteTo(sink io.Writer, rows func(yield func(row [][]byte) bool) (bool, error),
	field func(b []byte, i int, v []byte) ([]byte, bool),
	values func(yield func(*T) bool) (bool, error)) error {
	l.out.sink = sink
	chunk := streamChunks.Get().(*[]byte)
	l.out.b = (*chunk)[:0]
	defer func() {
		// The sink copied what it was given (io.Writer); a chunk grown past streamChunk (one
		// element larger than that) is left to the collector.
		if cap(l.out.b) == streamChunk {
			*chunk = l.out.b[:0]
			streamChunks.Put(chunk)
		}
		l.out.b = nil
	}()
	done, err := l.Fill(rows, field, values)
	switch {
	case l.out.err != nil:
		return l.out.err
	case err != nil:
		return err
	case !done:
		return ErrUnwritable
	}
	return nil
}

// Done ends the list: its JSON is then JSON() (or, written to a sink, its last chunk is
// written); false after a refused element.
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
	l.json = l.out.done()
	if l.size != nil {
		l.size.Store(int64(len(l.json[0])))
	}
	return true
}

// JSON is the list's JSON in chunks, after Fill (or Done) wrote it whole.
func (l *List[T]) JSON() [][]byte { return l.json }
