package reports

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/modules/records"
)

// ServeResolver answers the root fields of /serve/graphql.
type ServeResolver struct {
	repo   *Repository
	limits Limits
}

func NewServeResolver(repo *Repository, limits Limits) *ServeResolver {
	return &ServeResolver{repo: repo, limits: limits}
}

func (r *ServeResolver) MainReport(ctx context.Context, startDate string, endDate string, filters []*records.Filter, useOr *bool, limit *int, offset *int) (*MainReport, error) {
	a, err := GraphQLArgs(r.limits, startDate, endDate, filters, useOr, limit, offset)
	if err != nil {
		return nil, err
	}
	wantRows, wantTotal := selected(ctx)
	return r.repo.MainReport(ctx, a, wantRows, wantTotal)
}

func (r *ServeResolver) MainReportSummary(ctx context.Context, startDate string, endDate string, filters []*records.Filter, useOr *bool) (*MainReportSummary, error) {
	f, err := r.limits.Records.Records(startDate, endDate, useOr, filters)
	if err != nil {
		return nil, err
	}
	return r.repo.Summary(ctx, f, summaryParts(ctx))
}

// summaryParts says which parts of MainReportSummary the query asks for.
func summaryParts(ctx context.Context) SummaryParts {
	if graphql.GetFieldContext(ctx) == nil {
		return SummaryParts{Figures: true, ByUrgency: true, ByStation: true, Resources: true, Patients: true, Distance: true, Response: true}
	}
	var p SummaryParts
	for _, f := range graphql.CollectFieldsCtx(ctx, nil) {
		switch f.Name {
		case "by_urgency":
			p.ByUrgency = true
		case "by_station":
			p.ByStation = true
		case "__typename":
		default:
			p.Figures = true
			switch f.Name {
			case "distinct_resources":
				p.Resources = true
			case "distinct_patients":
				p.Patients = true
			case "average_distance":
				p.Distance = true
			case "average_response_time_s":
				p.Response = true
			}
		}
	}
	return p
}

// selected says whether the query asks for MainReport's rows and total, so that a client that
// wants only the count reads no row, and one that pages without the total does not count.
func selected(ctx context.Context) (rows, total bool) {
	if graphql.GetFieldContext(ctx) == nil {
		return true, true
	}
	for _, f := range graphql.CollectFieldsCtx(ctx, nil) {
		switch f.Name {
		case "rows":
			rows = true
		case "total":
			total = true
		}
	}
	return rows, total
}

// LookupsResolver answers the root fields of /lookups/graphql.
type LookupsResolver struct {
	repo *Repository
}

func NewLookupsResolver(repo *Repository) *LookupsResolver { return &LookupsResolver{repo: repo} }

func (r *LookupsResolver) Stations(ctx context.Context) ([]*Station, error) {
	rows, err := r.repo.Stations(ctx)
	if err != nil {
		return nil, err
	}
	return pointers(rows), nil
}

func (r *LookupsResolver) Callsigns(ctx context.Context) ([]string, error) {
	return r.repo.Callsigns(ctx)
}

func (r *LookupsResolver) Urgencies(ctx context.Context) ([]string, error) {
	return r.repo.Urgencies(ctx)
}

func (r *LookupsResolver) Municipalities(ctx context.Context) ([]string, error) {
	return r.repo.Municipalities(ctx)
}

func (r *LookupsResolver) OxygenRoutes(ctx context.Context) ([]string, error) {
	return r.repo.OxygenRoutes(ctx)
}

func (r *LookupsResolver) Genders(ctx context.Context) ([]string, error) {
	return r.repo.Genders(ctx)
}

// Columns lists the records catalog: the one list of queryable columns, with the operators each
// accepts.
func (r *LookupsResolver) Columns(ctx context.Context) ([]*QueryableColumn, error) {
	cols := records.Columns()
	out := make([]QueryableColumn, len(cols))
	for i, c := range cols {
		out[i] = QueryableColumn{Name: c.Name, Type: columnType(c.Type), Operators: c.Operators()}
	}
	return pointers(out), nil
}

// pointers returns pointers into rows: the []*T gqlgen wants, with one allocation.
func pointers[T any](rows []T) []*T {
	out := make([]*T, len(rows))
	for i := range rows {
		out[i] = &rows[i]
	}
	return out
}
