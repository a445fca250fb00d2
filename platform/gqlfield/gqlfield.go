// Package gqlfield is what a module's resolver answers a GraphQL field with: List over a
// repository's Source for a list root field, Live for a subscription. It knows no transport
// (no Fiber, fasthttp or net/http): the GraphQL execution (platform/gqlexec) gives each root
// field a Place in the answer being made, and List fills it with the field's JSON, or with
// what writes that JSON when the answer reaches the field.
package gqlfield

import (
	"context"
	"errors"
	"io"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqljson"
)

// Source is a list's statement as its module's repository runs it, and how its rows become
// JSON: the repository describes it beside its SQL and its column order, the resolver answers
// with List. Its Go type T declares itself written here (gqljson.Plain).
type Source[T any] struct {
	// Rows, when set, runs the statement and hands each row to yield as the database sent it
	// (a column's bytes, nil for NULL), valid until yield returns; its columns are T's struct
	// fields in order. It returns false when yield refused a row.
	Rows func(ctx context.Context, yield func(row [][]byte) bool) (bool, error)
	// Column appends the JSON of column i of a row (never NULL), exactly as T's struct field i
	// holding the value is written (platform/jsonscalar); false when it cannot.
	Column func(b []byte, i int, v []byte) ([]byte, bool)
	// Values runs the statement and hands each row decoded to yield (the T and what it points
	// to may be reused for the next row); false when yield refused one.
	Values func(ctx context.Context, yield func(*T) bool) (bool, error)
	// All returns every row decoded and kept, for a selection gqljson does not write (@defer).
	All func(ctx context.Context) ([]T, error)
	// Large says the table can be large enough (a row per mission or more) that sending it
	// whole takes longer than LIMITS__STATEMENT_TIMEOUT at a slow reader's pace: streamed, its
	// statement then runs with LIMITS__EXPORT_TIMEOUT (database.Streamed), at the cost of a
	// transaction of its own (two round trips more, nothing next to such a table).
	Large bool
}

// errNoSource is a Source without what the selection needs: a bug.
var errNoSource = errors.New("gqlfield: the list's source cannot answer this selection")

// Place is one root field's place in the answer being made, given by the GraphQL execution to
// the field's resolver through its context (WithPlace): List fills it with the field's JSON
// (Hold), or with what writes it when the answer is written (Stream).
type Place struct {
	w     *gqljson.Writer
	field *ast.Field
	// admit is asked before a list is streamed: it holds a connection at its client's pace,
	// and takes one of LIMITS__MAX_STREAMED_ANSWERS (nil: no bound).
	admit  func() error
	json   [][]byte
	stream func(io.Writer) error
}

// NewPlace is the place of root field field, whose JSON w writes; admit (may be nil) admits a
// streamed list.
func NewPlace(w *gqljson.Writer, field *ast.Field, admit func() error) *Place {
	return &Place{w: w, field: field, admit: admit}
}

type placeKey struct{}

// WithPlace is the context of the root field's resolver, which p is the place of.
func WithPlace(ctx context.Context, p *Place) context.Context {
	return context.WithValue(ctx, placeKey{}, p)
}

// PlaceOf is the place of ctx's root field, nil if none (not a root field, or gqlgen writes it).
func PlaceOf(ctx context.Context) *Place {
	p, _ := ctx.Value(placeKey{}).(*Place)
	return p
}

// Writer is the encoder of the field's JSON.
func (p *Place) Writer() *gqljson.Writer { return p.w }

// For says whether p is the place of field and still empty.
func (p *Place) For(field *ast.Field) bool { return p != nil && p.field == field && !p.Filled() }

// Filled says whether the field's JSON (or what writes it) is in place.
func (p *Place) Filled() bool { return p.json != nil || p.stream != nil }

// Hold puts the field's JSON, in chunks, in its place.
func (p *Place) Hold(json [][]byte) { p.json = json }

// JSON is the field's JSON held, nil when it is streamed or not written here.
func (p *Place) JSON() [][]byte { return p.json }

// Stream is what writes the field's JSON when the answer reaches it, nil if nothing does.
func (p *Place) Stream() func(io.Writer) error { return p.stream }

// List answers a root field whose value is a list of T from src: the resolver's one call.
// When gqljson can write the field's selection (the usual case), the rows go to JSON as they
// are read: while the response is written when stream (a whole table: nothing of it is held in
// memory, contract 6.10), now otherwise (a page); the empty list returned stands in gqlgen's
// response for that JSON. A row holding a value GraphQL cannot answer (a null where the schema
// forbids one, a NaN) is an error of the field (gqljson.ErrUnwritable). Otherwise the rows
// are decoded for gqlgen to write.
func List[T any](ctx context.Context, src Source[T], stream bool) ([]*T, error) {
	p := PlaceOf(ctx)
	fc := graphql.GetFieldContext(ctx)
	oc := graphql.GetOperationContext(ctx)
	if p != nil && fc != nil && oc != nil && fc.Object == "Query" && p.For(fc.Field.Field) {
		if l := gqljson.NewList[T](p.w, oc, fc); l != nil {
			// Read while it is sent, a large table's statement runs for the client's pace.
			sctx := ctx
			if stream && src.Large {
				sctx = database.Streamed(ctx)
			}
			var rows func(yield func(row [][]byte) bool) (bool, error)
			if src.Rows != nil && src.Column != nil {
				rows = func(yield func(row [][]byte) bool) (bool, error) { return src.Rows(sctx, yield) }
			}
			values := func(yield func(*T) bool) (bool, error) {
				if src.Values == nil {
					return false, errNoSource
				}
				return src.Values(sctx, yield)
			}
			if stream {
				// Sent at its client's pace, the list holds a connection as long as its client
				// reads: it is admitted first, or the request is refused.
				if p.admit != nil {
					if err := p.admit(); err != nil {
						return nil, err
					}
				}
				p.stream = func(w io.Writer) error { return l.WriteTo(w, rows, src.Column, values) }
				return []*T{}, nil
			}
			done, err := l.Fill(rows, src.Column, values)
			switch {
			case err != nil:
				return nil, err
			case !done:
				return nil, gqljson.ErrUnwritable
			}
			p.json = l.JSON()
			return []*T{}, nil
		}
	}
	if src.All == nil {
		return nil, errNoSource
	}
	rows, err := src.All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*T, len(rows))
	for i := range rows {
		out[i] = &rows[i]
	}
	return out, nil
}

// Live is a subscription resolver's answer: the value its query's resolver returned (or its
// error), as the one-value channel gqlgen's subscription execution reads. The stream's feed
// (platform/gqllive) runs the operation again at each data change; each run is one answer.
func Live[T any](v T, err error) (<-chan T, error) {
	if err != nil {
		return nil, err
	}
	ch := make(chan T, 1)
	ch <- v
	close(ch)
	return ch, nil
}
