package measures

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// UnitHours is one object of unit_hour_utilization (contract 6.12.6).
type UnitHours struct {
	ResourceID *int32   `json:"resource_id"`
	UnitHours  float64  `json:"unit_hours"`
	Responses  int64    `json:"responses"`
	Transports int64    `json:"transports"`
	Uhu        *float64 `json:"uhu"`
}

// PlainJSON declares UnitHours written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars and plain types, without resolvers.
func (UnitHours) PlainJSON() {}

// The statements of unit_hour_utilization. A shift's hours inside the range are those of
// [shift_start, shift_end) inside [start_date, end_date + 1 day): the shifts that overlap it,
// clipped to it. The records are those of the range, as every field selects them.
const (
	// All units: the hours of every shift, and every record of the range.
	unitHoursAllSQL = `SELECT (SELECT coalesce(sum(extract(epoch FROM least(s.shift_end, $2::date + 1) - greatest(s.shift_start, $1::date))), 0)::float8 / 3600
          FROM fact_unit_shift s WHERE s.shift_end > $1::date AND s.shift_start < $2::date + 1),
       count(*), count(*) FILTER (WHERE r.transported)
  FROM fact_record r WHERE r.occurred_at >= $1::date AND r.occurred_at < $2::date + 1`
	// Per unit: one row per resource_id with shift hours in the range, with the records whose
	// sk_resource leads to that resource_id.
	unitHoursPerResourceSQL = `WITH h AS (
  SELECT s.resource_id, sum(extract(epoch FROM least(s.shift_end, $2::date + 1) - greatest(s.shift_start, $1::date)))::float8 / 3600 AS hours
    FROM fact_unit_shift s WHERE s.shift_end > $1::date AND s.shift_start < $2::date + 1
   GROUP BY s.resource_id
), rec AS (
  SELECT res.resource_id, count(*) AS n, count(*) FILTER (WHERE r.transported) AS t
    FROM fact_record r JOIN dim_resource res ON res.sk_resource = r.sk_resource
   WHERE r.occurred_at >= $1::date AND r.occurred_at < $2::date + 1 AND res.resource_id IN (SELECT resource_id FROM h)
   GROUP BY res.resource_id
)
SELECT h.resource_id, h.hours, coalesce(rec.n, 0), coalesce(rec.t, 0) FROM h LEFT JOIN rec ON rec.resource_id = h.resource_id
 ORDER BY h.resource_id`
)

const opUnitHours = "unit hour utilization"

// UnitHourUtilization answers unit_hour_utilization over the days start..end.
func (r *Repository) UnitHourUtilization(ctx context.Context, startDate, endDate string, perResource bool, lim Limits) ([]*UnitHours, error) {
	f, err := r.ext.get(ctx)
	if err != nil {
		return nil, err
	}
	if !f.shifts {
		return nil, apierr.BadInput("unit_hour_utilization needs the table %s (resource_id integer, shift_start and shift_end timestamp): %s", tableShift, f.shiftsLack)
	}
	start, err := records.ParseDate("start_date", startDate)
	if err != nil {
		return nil, err
	}
	end, err := records.ParseDate("end_date", endDate)
	if err != nil {
		return nil, err
	}
	if start.After(end) {
		return nil, apierr.BadInput("start_date %s is after end_date %s", startDate, endDate)
	}
	args := records.Args{start, end}
	if !perResource {
		var u UnitHours
		if err := r.db.QueryRow(ctx, opUnitHours, unitHoursAllSQL, args, &u.UnitHours, &u.Responses, &u.Transports); err != nil {
			return nil, err
		}
		u.setUHU()
		return []*UnitHours{&u}, nil
	}
	return collect(ctx, r.db, opUnitHours, unitHoursPerResourceSQL, args, lim, func(row pgx.CollectableRow) (*UnitHours, error) {
		var (
			u  UnitHours
			id int32
		)
		if err := row.Scan(&id, &u.UnitHours, &u.Responses, &u.Transports); err != nil {
			return nil, err
		}
		u.ResourceID = &id
		u.setUHU()
		return &u, nil
	})
}

// setUHU is transports per unit hour, null without unit hours.
func (u *UnitHours) setUHU() {
	if u.UnitHours > 0 {
		v := float64(u.Transports) / u.UnitHours
		u.Uhu = &v
	}
}
