package resources

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/keyset"
)

// Repository reads dim_resource and dim_station.
type Repository struct {
	db *database.DB
}

func NewRepository(db *database.DB) *Repository { return &Repository{db: db} }

// The operations of the statements here, as db.client.operation.duration names them.
const (
	opResources        = "resources"
	opStationResources = "station resources"
)

// Resources returns the dim_resource rows of page ordered by sk_resource.
func (r *Repository) Resources(ctx context.Context, page keyset.Page) ([]Resource, error) {
	const q = `SELECT sk_resource, resource_id, callsign, station_id, station, valid_from, valid_to
FROM dim_resource
WHERE sk_resource > $1
ORDER BY sk_resource
LIMIT $2`
	var (
		// Scan targets, reused for every row: scanning into the Resource's own pointer fields
		// would allocate through pgx's generic pointer plan.
		stationID pgtype.Int4
		station   pgtype.Text
		from, to  pgtype.Date
	)
	return database.Collect(ctx, r.db, opResources, q, page.Args(), func(row pgx.CollectableRow) (Resource, error) {
		var res Resource
		if err := row.Scan(&res.SkResource, &res.ResourceID, &res.Callsign, &stationID, &station, &from, &to); err != nil {
			return res, err
		}
		if stationID.Valid {
			id := stationID.Int32
			res.StationID = &id
		}
		if station.Valid {
			name := station.String
			res.Station = &name
		}
		res.ValidFrom = database.FormatDate(from)
		if to.Valid {
			s := database.FormatDate(to)
			res.ValidTo = &s
		}
		return res, nil
	})
}

// StationResources returns every dim_station row ordered by station_id, each with the
// resource_id of its dim_resource rows ordered by resource_id then sk_resource (duplicates
// kept), in one statement: the LEFT JOIN keeps stations without resources, whose aggregate the
// FILTER leaves NULL and COALESCE turns into an empty array.
func (r *Repository) StationResources(ctx context.Context) ([]StationResources, error) {
	const q = `SELECT s.station_id, s.station_name,
       COALESCE(array_agg(r.resource_id ORDER BY r.resource_id, r.sk_resource)
                FILTER (WHERE r.sk_resource IS NOT NULL), '{}') AS resource_ids
FROM dim_station s
LEFT JOIN dim_resource r ON r.station_id = s.station_id
GROUP BY s.station_id
ORDER BY s.station_id`
	var ids []int32 // reused between rows: the scan overwrites it
	return database.Collect(ctx, r.db, opStationResources, q, nil, func(row pgx.CollectableRow) (StationResources, error) {
		var st StationResources
		ids = ids[:0]
		if err := row.Scan(&st.StationID, &st.StationName, &ids); err != nil {
			return st, err
		}
		st.Resources = make([]StationResource, len(ids))
		for i, id := range ids {
			st.Resources[i].ResourceID = id
		}
		return st, nil
	})
}
