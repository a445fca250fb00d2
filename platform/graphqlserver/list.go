package graphqlserver

import (
	"context"
	"errors"
	"io"

	"github.com/99designs/gqlgen/graphql"

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
var errNoSource = errors.New("graphqlserver: the list's source cannot answer this selection")

// List answers a root field whose value is a list of T from src: the resolver's one call.
// When gqljson can write the field's selection (the usual case), the rows go to JSON as they
// are read: while the response is sent when stream (a whole table: nothing of it is held in
// memory, contract 6.10), now otherwise (a page); the empty list returned stands in gqlgen's
// response for that JSON. A row holding a value GraphQL cannot answer (a null where the schema
// forbids one, a NaN) is an error of the field (gqljson.ErrUnwritable). Otherwise the rows
// are decoded for gqlgen to write.
func List[T any](ctx context.Context, src Source[T], stream bool) ([]*T, error) {
	s, _ := ctx.Value(slotKey{}).(*slot)
	fc := graphql.GetFieldContext(ctx)
	oc := graphql.GetOperationContext(ctx)
	if s != nil && fc != nil && oc != nil && fc.Object == "Query" && s.field == fc.Field.Field && !s.filled() {
		if l := gqljson.NewList[T](s.w, oc, fc); l != nil {
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
				// reads: one of LIMITS__MAX_STREAMED_ANSWERS, or the request is refused (taken
				// now, or when an answer made into memory outgrows it: parts.whole).
				if ps, _ := ctx.Value(partsKey{}).(*parts); ps != nil {
					if err := ps.whole(); err != nil {
						return nil, err
					}
				}
				s.stream = func(w io.Writer) error { return l.WriteTo(w, rows, src.Column, values) }
				return []*T{}, nil
			}
			done, err := l.Fill(rows, src.Column, values)
			switch {
			case err != nil:
				return nil, err
			case !done:
				return nil, gqljson.ErrUnwritable
			}
			s.json = l.JSON()
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
