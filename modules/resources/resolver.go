package resources

import (
	"context"

	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqljson"
	"github.com/emsanalytics/emsquery/platform/keyset"
)

// Resource is one dim_resource row: a version of a resource.
type Resource struct {
	SkResource int64   `json:"sk_resource"`
	ResourceID int32   `json:"resource_id"`
	Callsign   string  `json:"callsign"`
	StationID  *int32  `json:"station_id"`
	Station    *string `json:"station"`
	ValidFrom  string  `json:"valid_from"`
	ValidTo    *string `json:"valid_to"`
}

// StationResources is one station with the resource versions stationed there.
type StationResources struct {
	StationID   int32             `json:"station_id"`
	StationName string            `json:"station_name"`
	Resources   []StationResource `json:"resources"`
}

// StationResource is one resource version in a station's list.
type StationResource struct {
	ResourceID int32 `json:"resource_id"`
}

// Resolver answers the resources root fields of /graphql.
type Resolver struct {
	repo    *Repository
	maxPage keyset.MaxPage
}

func NewResolver(repo *Repository, maxPage keyset.MaxPage) *Resolver {
	return &Resolver{repo: repo, maxPage: maxPage}
}

func (r *Resolver) Resources(ctx context.Context, limit *int, after *int) ([]*Resource, error) {
	page, err := keyset.Parse(limit, after, r.maxPage)
	if err != nil {
		return nil, err
	}
	// When the selection allows, the JSON is written as the rows are read and gqlgen gets an
	// empty list to marshal in its place: no row is kept, and no value allocated per field.
	if l := gqljson.NewList[Resource](ctx); l != nil {
		// Each row's values go from the database's bytes to JSON, without Go values between,
		// when every selected field allows it.
		rows := func(yield func([][]byte) bool) (bool, error) {
			return r.repo.EachResourceRow(ctx, page, func(row [][]byte) bool {
				// A NULL where the decoding path scans into a non-nullable value (the schema's
				// NOT NULL columns, whether selected or not) fails that path's scan: the answer
				// must be that failure, not a list written without the column.
				if len(row) != len(resourceFormats) || row[0] == nil || row[1] == nil || row[2] == nil || row[5] == nil {
					return false
				}
				return yield(row)
			})
		}
		done, err := l.Fill(rows, appendResourceField,
			func(yield func(*Resource) bool) (bool, error) { return r.repo.EachResource(ctx, page, yield) })
		if err != nil {
			return nil, err
		}
		if done {
			return []*Resource{}, nil
		}
		// A value gqlgen must judge (see gqljson.List.Add): read the list again the usual way.
	}
	rows, err := r.repo.Resources(ctx, page)
	if err != nil {
		return nil, err
	}
	return pointers(rows), nil
}

// appendResourceField writes, for gqljson.List.Fill, column i of a row of EachResourceRow, whose
// bytes are v (never NULL), as the JSON of Resource's struct field i (resourcesSQL selects them
// in the order of the struct), exactly as gqljson writes the Go value EachResource would decode.
func appendResourceField(b []byte, i int, v []byte) ([]byte, bool) {
	switch i {
	case 0, 1, 3: // sk_resource, resource_id, station_id: integers as text, the digits strconv.AppendInt writes
		return append(b, v...), true
	case 2, 4: // callsign, station
		return gqljson.AppendString(b, v), true
	case 5, 6: // valid_from, valid_to
		b = append(b, '"')
		b, ok := database.AppendDate(b, v)
		return append(b, '"'), ok
	}
	return b, false
}

func (r *Resolver) StationResources(ctx context.Context) ([]*StationResources, error) {
	if l := gqljson.NewList[StationResources](ctx); l != nil { // as Resources
		complete, err := r.repo.EachStationResources(ctx, l.Add)
		if err != nil {
			return nil, err
		}
		if complete && l.Done() {
			return []*StationResources{}, nil
		}
	}
	rows, err := r.repo.StationResources(ctx)
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
