package resources

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
	"github.com/emsanalytics/emsquery/platform/jsonscalar"
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

// resourcesSQL reads a page (keyset.Page.Args) of dim_resource.
const resourcesSQL = `SELECT sk_resource, resource_id, callsign, station_id, station, valid_from, valid_to
FROM dim_resource
WHERE sk_resource > $1
ORDER BY sk_resource
LIMIT $2`

// pageArgs are resourcesSQL's arguments for page. Its plan is the primary key's index whatever
// the page, so it is prepared once per session (database.PlanOnce).
func pageArgs(page keyset.Page) []any {
	return append([]any{database.PlanOnce}, page.Args()...)
}

// EachResource reads the dim_resource rows of page ordered by sk_resource and hands each to fn without
// keeping it: the Resource and the values its StationID, Station and ValidTo point to are reused
// for the next row. It returns false when fn refused a row; the rows after it are read but not
// handed on. This is the one place dim_resource's rows are decoded.
func (r *Repository) EachResource(ctx context.Context, page keyset.Page, fn func(*Resource) bool) (bool, error) {
	var (
		// Scan targets, reused for every row (each would be allocated per row otherwise).
		sk        int64
		id        int32
		callsign  string
		stationID pgtype.Int4
		station   pgtype.Text
		from, to  pgtype.Date
		res       Resource
		idV       int32
		stationV  string
		toV       string
		ok        = true
	)
	dest := []any{&sk, &id, &callsign, &stationID, &station, &from, &to}
	err := r.db.ForEachRow(ctx, opResources, resourcesSQL, pageArgs(page), dest, func() error {
		if !ok {
			return nil
		}
		res = Resource{SkResource: sk, ResourceID: id, Callsign: callsign, ValidFrom: jsonscalar.FormatDate(from)}
		if stationID.Valid {
			idV, res.StationID = stationID.Int32, &idV
		}
		if station.Valid {
			stationV, res.Station = station.String, &stationV
		}
		if to.Valid {
			toV, res.ValidTo = jsonscalar.FormatDate(to), &toV
		}
		ok = fn(&res)
		return nil
	})
	return ok, err
}

// resourceFormats are the formats EachResourceRow asks for resourcesSQL's columns in: the
// integers and the text as text, whose bytes are their JSON or nearly (a text value is the same
// bytes in either format); the dates in binary, whose text would depend on the session's
// DateStyle.
var resourceFormats = []int16{pgx.TextFormatCode, pgx.TextFormatCode, pgx.TextFormatCode, pgx.TextFormatCode,
	pgx.TextFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode}

// EachResourceRow reads the dim_resource rows of page ordered by sk_resource, as EachResource
// does, and hands each to fn as the database sent it: resourcesSQL's columns in resourceFormats,
// nil for NULL, valid only until fn returns. It returns false when fn refused a row, as
// EachResource.
func (r *Repository) EachResourceRow(ctx context.Context, page keyset.Page, fn func(row [][]byte) bool) (bool, error) {
	return r.db.ForEachRawRow(ctx, opResources, resourcesSQL, pageArgs(page), resourceFormats, fn)
}

// ResourceList is the dim_resource rows of page as a list root field writes them (gqlfield.List):
// the rows as the database sends them, each column written to JSON by appendResourceField.
func (r *Repository) ResourceList(page keyset.Page) gqlfield.Source[Resource] {
	return gqlfield.Source[Resource]{
		Rows: func(ctx context.Context, yield func([][]byte) bool) (bool, error) {
			return r.EachResourceRow(ctx, page, func(row [][]byte) bool {
				// A NULL where the decoding path scans into a non-nullable value (the schema's
				// NOT NULL columns, whether selected or not) fails that path's scan: the answer
				// fails here too, not a list written without the column.
				if len(row) != len(resourceFormats) || row[0] == nil || row[1] == nil || row[2] == nil || row[5] == nil {
					return false
				}
				return yield(row)
			})
		},
		Column: appendResourceField,
		Values: func(ctx context.Context, yield func(*Resource) bool) (bool, error) {
			return r.EachResource(ctx, page, yield)
		},
		All: func(ctx context.Context) ([]Resource, error) { return r.Resources(ctx, page) },
	}
}

// appendResourceField writes column i of a row of EachResourceRow, whose bytes are v (never
// NULL), as the JSON of Resource's struct field i (resourcesSQL selects them in the order of the
// struct), exactly as the Go value EachResource would decode is written.
func appendResourceField(b []byte, i int, v []byte) ([]byte, bool) {
	switch i {
	case 0, 1, 3: // sk_resource, resource_id, station_id: integers as text, the digits strconv.AppendInt writes
		return append(b, v...), true
	case 2, 4: // callsign, station
		return jsonscalar.AppendString(b, v), true
	case 5, 6: // valid_from, valid_to
		b = append(b, '"')
		b, ok := jsonscalar.AppendDate(b, v)
		return append(b, '"'), ok
	}
	return b, false
}

// Resources returns the dim_resource rows of page ordered by sk_resource.
func (r *Repository) Resources(ctx context.Context, page keyset.Page) ([]Resource, error) {
	rows := []Resource{}
	_, err := r.EachResource(ctx, page, func(res *Resource) bool {
		rows = append(rows, Resource{SkResource: res.SkResource, ResourceID: res.ResourceID, Callsign: res.Callsign,
			StationID: kept(res.StationID), Station: kept(res.Station), ValidFrom: res.ValidFrom, ValidTo: kept(res.ValidTo)})
		return true
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// kept returns a pointer to a copy of *p (nil for nil): for a value reused after the call.
func kept[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// stationResourcesSQL reads every dim_station row ordered by station_id, each with the
// resource_id of its dim_resource rows ordered by resource_id then sk_resource (duplicates
// kept), in one statement: the LEFT JOIN keeps stations without resources, whose aggregate the
// FILTER leaves NULL and COALESCE turns into an empty array.
const stationResourcesSQL = `SELECT s.station_id, s.station_name,
       COALESCE(array_agg(r.resource_id ORDER BY r.resource_id, r.sk_resource)
                FILTER (WHERE r.sk_resource IS NOT NULL), '{}') AS resource_ids
FROM dim_station s
LEFT JOIN dim_resource r ON r.station_id = s.station_id
GROUP BY s.station_id
ORDER BY s.station_id`

// stationResourceFormats are the formats EachStationResources asks for stationResourcesSQL's
// columns in: binary, decoded here (int4 and int4[]; the name's bytes are the same in either).
// pgx's scan of the array allocated its dimensions and header on every row, about a third of
// the light question's allocations.
var stationResourceFormats = []int16{pgx.BinaryFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode}

// EachStationResources hands each station with its resources to fn as EachResource does: the
// StationResources, its Resources slice and the bytes of its StationName are reused for the next
// row. A NULL where the schema has none (a station's id or name, a resource_id) is an error, as
// pgx's scan into the Go types would make it.
func (r *Repository) EachStationResources(ctx context.Context, fn func(*StationResources) bool) (bool, error) {
	var (
		st  = StationResources{Resources: []StationResource{}} // never nil: the list is non-null
		ok  = true
		bad error
	)
	// No values, so one plan: prepared once per session (database.PlanOnce).
	_, err := r.db.ForEachRawRow(ctx, opStationResources, stationResourcesSQL, []any{database.PlanOnce}, stationResourceFormats, func(row [][]byte) bool {
		if !ok {
			return true // read to the end, handed on no more
		}
		if bad = decodeStationResources(&st, row); bad != nil {
			return false
		}
		ok = fn(&st)
		return true
	})
	switch {
	case err != nil:
		return false, err
	case bad != nil:
		return false, fmt.Errorf("%s: %w", opStationResources, bad)
	}
	return ok, nil
}

// decodeStationResources sets st from a row of stationResourcesSQL in stationResourceFormats,
// reusing st.Resources' array.
func decodeStationResources(st *StationResources, row [][]byte) error {
	if len(row) != 3 || len(row[0]) != 4 || row[1] == nil || row[2] == nil {
		return errors.New("a station without its id or name, or a row of the wrong shape")
	}
	st.StationID = int32(binary.BigEndian.Uint32(row[0]))
	// The name's bytes as they are, valid until the next row as the rest of st: a copy per row
	// was most of the light question's allocations. What keeps a row copies it (StationResources).
	st.StationName = unsafe.String(unsafe.SliceData(row[1]), len(row[1]))
	var err error
	st.Resources, err = appendInt4Array(st.Resources[:0], row[2])
	return err
}

// appendInt4Array appends the elements of v, an int4[] of at most one dimension in
// PostgreSQL's binary format (array_recv: ndim, a null flag, the element type, each
// dimension's length and lower bound, then each element's length and bytes), to dst as
// StationResources' resource_ids. A NULL element or another element type is an error.
func appendInt4Array(dst []StationResource, v []byte) ([]StationResource, error) {
	const int4OID = 23
	if len(v) < 12 {
		return dst, errors.New("int4[]: short header")
	}
	ndim, elem := binary.BigEndian.Uint32(v[0:4]), binary.BigEndian.Uint32(v[8:12])
	if ndim == 0 {
		return dst, nil
	}
	if ndim != 1 || elem != int4OID || len(v) < 20 {
		return dst, fmt.Errorf("int4[]: %d dimensions of type %d, want one of int4", ndim, elem)
	}
	n := int(binary.BigEndian.Uint32(v[12:16]))
	body := v[20:]
	if n < 0 || len(body) != 8*n {
		return dst, errors.New("int4[]: elements do not match the length")
	}
	dst = slices.Grow(dst, n)
	for i := 0; i < n; i++ {
		e := body[8*i:]
		if int32(binary.BigEndian.Uint32(e)) != 4 {
			return dst, errors.New("int4[]: a NULL or malformed element")
		}
		dst = append(dst, StationResource{ResourceID: int32(binary.BigEndian.Uint32(e[4:]))})
	}
	return dst, nil
}

// StationResourcesList is the stations with their resources as the root field writes them.
func (r *Repository) StationResourcesList() gqlfield.Source[StationResources] {
	return gqlfield.Source[StationResources]{
		Values: r.EachStationResources,
		All:    r.StationResources,
	}
}

// StationResources returns every station with its resources (see stationResourcesSQL).
func (r *Repository) StationResources(ctx context.Context) ([]StationResources, error) {
	rows := []StationResources{}
	_, err := r.EachStationResources(ctx, func(st *StationResources) bool {
		rows = append(rows, StationResources{StationID: st.StationID, StationName: strings.Clone(st.StationName), Resources: slices.Clone(st.Resources)})
		return true
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}
