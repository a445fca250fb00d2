package resources

import (
	"math"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/emsanalytics/emsquery/internal/dbtest"
)

// appendResourceField takes Resource's struct field i for resourcesSQL's column i: the struct's
// fields and the statement's columns must stay in the same order, one format each.
func TestResourceFieldsAreTheColumnsInOrder(t *testing.T) {
	dbtest.FieldsAreColumns[Resource](t, resourcesSQL, resourceFormats)
}

// appendInt4Array decodes what pgx's own int4[] codec encodes, and refuses what it must.
func TestAppendInt4Array(t *testing.T) {
	m := pgtype.NewMap()
	encode := func(v any, oid uint32) []byte {
		t.Helper()
		b, err := m.Encode(oid, pgx.BinaryFormatCode, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, ids := range [][]int32{{}, {7}, {1001, 1001, -3, 0, math.MaxInt32, math.MinInt32}} {
		got, err := appendInt4Array([]StationResource{{ResourceID: 99}}, encode(ids, pgtype.Int4ArrayOID))
		if err != nil {
			t.Fatalf("%v: %v", ids, err)
		}
		want := []StationResource{{ResourceID: 99}}
		for _, id := range ids {
			want = append(want, StationResource{ResourceID: id})
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: got %v, want %v", ids, got, want)
		}
	}
	for name, v := range map[string][]byte{
		"short":          {0, 0, 0, 1},
		"null element":   encode([]*int32{nil}, pgtype.Int4ArrayOID),
		"int8 elements":  encode([]int64{1}, pgtype.Int8ArrayOID),
		"two dimensions": encode(pgtype.Array[int32]{Elements: []int32{1, 2}, Dims: []pgtype.ArrayDimension{{Length: 1, LowerBound: 1}, {Length: 2, LowerBound: 1}}, Valid: true}, pgtype.Int4ArrayOID),
		"truncated":      encode([]int32{1, 2}, pgtype.Int4ArrayOID)[:27],
	} {
		if _, err := appendInt4Array(nil, v); err == nil {
			t.Errorf("%s: decoded, want an error", name)
		}
	}
}
