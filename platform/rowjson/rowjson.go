// Package rowjson is what a module's repository and resolver use to answer a list root field
// from a statement: the repository describes the statement's rows and how each column becomes
// JSON (a Source, beside its SQL and its column order), the resolver makes one call (List).
// How the list is then written (platform/gqljson's encoders, streamed while the response is
// sent or held until it is) is not the modules' concern: they never import platform/gqljson.
package rowjson

import (
	"context"
	"errors"

	"github.com/emsanalytics/emsquery/platform/gqljson"
)

// Source is a list's statement as its repository runs it, and how its rows become JSON.
type Source[T any] struct {
	// Rows, when set, runs the statement and hands each row to yield as the database sent it
	// (a column's bytes, nil for NULL), valid until yield returns; its columns are T's struct
	// fields in order. It returns false when yield refused a row.
	Rows func(ctx context.Context, yield func(row [][]byte) bool) (bool, error)
	// Column appends the JSON of column i of a row (never NULL), exactly as the list would
	// write T's struct field i holding the value; false when it cannot (the list then fails).
	Column func(b []byte, i int, v []byte) ([]byte, bool)
	// Values runs the statement and hands each row decoded to yield (the T may be reused for
	// the next row); false when yield refused one.
	Values func(ctx context.Context, yield func(*T) bool) (bool, error)
	// All, when set, returns every row decoded and kept, for a selection gqljson does not write
	// (@defer): needed when Values reuses what a T points to between rows.
	All func(ctx context.Context) ([]T, error)
}

// errNoValues is a Source without Values used where the selection needs them: a bug.
var errNoValues = errors.New("rowjson: the list's source has no decoded values")

// List answers a root field whose value is a list of T from src. When the field's selection
// can be written by platform/gqljson (the usual case), the rows go to JSON as they are read:
// while the response is sent when stream (a whole table: nothing of it is held in memory),
// now otherwise (a page), and the empty list returned takes the written JSON's place. A row
// holding a value GraphQL cannot answer (a null where the schema forbids one, a NaN) is an
// error of the field. Otherwise the rows are decoded for gqlgen to write.
func List[T any](ctx context.Context, src Source[T], stream bool) ([]*T, error) {
	if l := gqljson.NewList[T](ctx); l != nil {
		rows := func(yield func(row [][]byte) bool) (bool, error) { return src.Rows(ctx, yield) }
		if src.Rows == nil || src.Column == nil {
			rows = nil
		}
		values := func(yield func(*T) bool) (bool, error) {
			if src.Values == nil {
				return false, errNoValues
			}
			return src.Values(ctx, yield)
		}
		if stream {
			l.Stream(rows, src.Column, values)
			return []*T{}, nil
		}
		done, err := l.Fill(rows, src.Column, values)
		switch {
		case err != nil:
			return nil, err
		case !done:
			return nil, gqljson.ErrUnwritable
		}
		return []*T{}, nil
	}
	if src.All != nil {
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
	if src.Values == nil {
		return nil, errNoValues
	}
	out := []*T{}
	_, err := src.Values(ctx, func(v *T) bool {
		c := *v
		out = append(out, &c)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendString appends the JSON string of a text column's bytes, as the list writes a string.
func AppendString(b, v []byte) []byte { return gqljson.AppendString(b, v) }

// AppendFloat appends the JSON of f as the list writes a Float; false for NaN and infinities.
func AppendFloat(b []byte, f float64) ([]byte, bool) { return gqljson.AppendFloat(b, f) }
