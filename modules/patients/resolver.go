package patients

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqljson"
	"github.com/emsanalytics/emsquery/platform/keyset"
)

// Patient is one dim_patient row.
type Patient struct {
	SkPatient   int64    `json:"sk_patient"`
	Age         *int32   `json:"age"`
	DateOfBirth *string  `json:"date_of_birth"`
	Gender      *string  `json:"gender"`
	Weight      *float64 `json:"weight"`
}

// Oxygen is one fact_oxygen row or, with distinct fields, one distinct combination of them
// (the other fields nil).
type Oxygen struct {
	SkOxygen       *int64   `json:"sk_oxygen"`
	RecordID       *int64   `json:"record_id"`
	Route          *string  `json:"route"`
	FlowRate       *float64 `json:"flow_rate"`
	AdministeredAt *string  `json:"administered_at"`
}

// Resolver answers the patients root fields of /graphql.
type Resolver struct {
	repo    *Repository
	maxPage keyset.MaxPage
}

func NewResolver(repo *Repository, maxPage keyset.MaxPage) *Resolver {
	return &Resolver{repo: repo, maxPage: maxPage}
}

func (r *Resolver) Patients(ctx context.Context, limit *int, after *int) ([]*Patient, error) {
	page, err := keyset.Parse(limit, after, r.maxPage)
	if err != nil {
		return nil, err
	}
	// The list can be hundreds of thousands of rows: when the selection allows, its JSON is
	// written as the rows are read, and gqlgen gets an empty list to marshal in its place.
	if l := gqljson.NewList[Patient](ctx); l != nil {
		// Each row's values go from the database's bytes to JSON, without Go values between,
		// when every selected field allows it.
		done, err := l.Fill(
			func(yield func([][]byte) bool) (bool, error) { return r.repo.EachPatientRow(ctx, page, yield) },
			appendPatientField,
			func(yield func(*Patient) bool) (bool, error) { return r.repo.EachPatient(ctx, page, yield) })
		if err != nil {
			return nil, err
		}
		if done {
			return []*Patient{}, nil
		}
		// A value gqlgen must judge (see gqljson.List.Add): read the list again the usual way.
	}
	rows, err := r.repo.Patients(ctx, page)
	if err != nil {
		return nil, err
	}
	return pointers(rows), nil
}

// appendPatientField writes, for gqljson.List.Fill, column i of a row of EachPatientRow, whose
// bytes are v (never NULL), as the JSON of Patient's struct field i (patientsSQL selects them in
// the order of the struct), exactly as gqljson writes the Go value EachPatient would decode.
func appendPatientField(b []byte, i int, v []byte) ([]byte, bool) {
	switch i {
	case 0, 1: // sk_patient, age: bigint and integer as text, the digits strconv.AppendInt writes
		return append(b, v...), true
	case 2: // date_of_birth
		b = append(b, '"')
		b, ok := database.AppendDate(b, v)
		return append(b, '"'), ok
	case 3: // gender
		return gqljson.AppendString(b, v), true
	case 4: // weight: float8 in binary
		if len(v) != 8 {
			return b, false
		}
		return gqljson.AppendFloat(b, math.Float64frombits(binary.BigEndian.Uint64(v)))
	}
	return b, false
}

func (r *Resolver) Oxygens(ctx context.Context, distinctFields []string, limit *int, after *int) ([]*Oxygen, error) {
	cols, err := parseOxygenColumns(distinctFields)
	if err != nil {
		return nil, err
	}
	page, err := keyset.Parse(limit, after, r.maxPage)
	if err != nil {
		return nil, err
	}
	if len(cols) > 0 && !page.Whole() {
		return nil, apierr.BadInput("distinct_fields: one object per distinct combination is not paged; omit limit and after, or omit distinct_fields")
	}
	if len(cols) == 0 {
		if l := gqljson.NewList[Oxygen](ctx); l != nil { // as Patients
			done, err := l.Fill(
				func(yield func([][]byte) bool) (bool, error) { return r.repo.EachOxygenRow(ctx, page, yield) },
				appendOxygenField,
				func(yield func(*Oxygen) bool) (bool, error) { return r.repo.EachOxygen(ctx, page, yield) })
			if err != nil {
				return nil, err
			}
			if done {
				return []*Oxygen{}, nil
			}
		}
	}
	rows, err := r.repo.Oxygens(ctx, cols, page)
	if err != nil {
		return nil, err
	}
	return pointers(rows), nil
}

// appendOxygenField is appendPatientField for a row of EachOxygenRow (oxygensSQL selects
// Oxygen's fields in the order of the struct).
func appendOxygenField(b []byte, i int, v []byte) ([]byte, bool) {
	switch i {
	case 0, 1: // sk_oxygen, record_id: bigint as text
		return append(b, v...), true
	case 2: // route
		return gqljson.AppendString(b, v), true
	case 3: // flow_rate: float8 in binary
		if len(v) != 8 {
			return b, false
		}
		return gqljson.AppendFloat(b, math.Float64frombits(binary.BigEndian.Uint64(v)))
	case 4: // administered_at
		b = append(b, '"')
		b, ok := appendTimestamp(b, v)
		return append(b, '"'), ok
	}
	return b, false
}

// pointers returns pointers into rows: the []*T gqlgen wants, at the cost of one allocation
// instead of one per row.
func pointers[T any](rows []T) []*T {
	out := make([]*T, len(rows))
	for i := range rows {
		out[i] = &rows[i]
	}
	return out
}
