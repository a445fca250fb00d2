package resources

import (
	"context"

	"github.com/emsanalytics/emsquery/platform/gqlfield"
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

// PlainJSON declares Resource written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (Resource) PlainJSON() {}

// StationResources is one station with the resource versions stationed there.
type StationResources struct {
	StationID   int32             `json:"station_id"`
	StationName string            `json:"station_name"`
	Resources   []StationResource `json:"resources"`
}

// PlainJSON declares StationResources written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars, lists and other such types.
func (StationResources) PlainJSON() {}

// StationResource is one resource version in a station's list.
type StationResource struct {
	ResourceID int32 `json:"resource_id"`
}

// PlainJSON declares StationResource written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars.
func (StationResource) PlainJSON() {}

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
	// The whole table is streamed to the client as it is read.
	return gqlfield.List(ctx, r.repo.ResourceList(page), page.Whole())
}

func (r *Resolver) StationResources(ctx context.Context) ([]*StationResources, error) {
	return gqlfield.List(ctx, r.repo.StationResourcesList(), false)
}
