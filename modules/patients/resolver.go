package patients

import (
	"context"

	"github.com/emsanalytics/emsquery/platform/gqljson"
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
	repo *Repository
}

func NewResolver(repo *Repository) *Resolver { return &Resolver{repo: repo} }

func (r *Resolver) Patients(ctx context.Context) ([]*Patient, error) {
	// The list can be hundreds of thousands of rows: when the selection allows, its JSON is
	// written as the rows are read, and gqlgen gets an empty list to marshal in its place.
	if l := gqljson.NewList[Patient](ctx); l != nil {
		complete, err := r.repo.EachPatient(ctx, l.Add)
		if err != nil {
			return nil, err
		}
		if complete && l.Done() {
			return []*Patient{}, nil
		}
		// A value gqlgen must judge (see gqljson.List.Add): read the list again the usual way.
	}
	rows, err := r.repo.Patients(ctx)
	if err != nil {
		return nil, err
	}
	return pointers(rows), nil
}

func (r *Resolver) Oxygens(ctx context.Context, distinctFields []string) ([]*Oxygen, error) {
	cols, err := parseOxygenColumns(distinctFields)
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		if l := gqljson.NewList[Oxygen](ctx); l != nil { // as Patients
			complete, err := r.repo.EachOxygen(ctx, l.Add)
			if err != nil {
				return nil, err
			}
			if complete && l.Done() {
				return []*Oxygen{}, nil
			}
		}
	}
	rows, err := r.repo.Oxygens(ctx, cols)
	if err != nil {
		return nil, err
	}
	return pointers(rows), nil
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
