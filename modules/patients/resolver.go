package patients

import (
	"context"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
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

// PlainJSON declares Patient written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (Patient) PlainJSON() {}

// Oxygen is one fact_oxygen row or, with distinct fields, one distinct combination of them
// (the other fields nil).
type Oxygen struct {
	SkOxygen       *int64   `json:"sk_oxygen"`
	RecordID       *int64   `json:"record_id"`
	Route          *string  `json:"route"`
	FlowRate       *float64 `json:"flow_rate"`
	AdministeredAt *string  `json:"administered_at"`
}

// PlainJSON declares Oxygen written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (Oxygen) PlainJSON() {}

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
	// The whole table (hundreds of thousands of rows) is streamed to the client as it is read.
	return gqlfield.List(ctx, r.repo.PatientList(page), page.Whole())
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
		return gqlfield.List(ctx, r.repo.OxygenList(page), page.Whole())
	}
	rows, err := r.repo.Oxygens(ctx, cols, page)
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
