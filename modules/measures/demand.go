package measures

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/stats"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// DemandGrid is demand_grid's answer (contract 6.12.3).
type DemandGrid struct {
	Hours int64         `json:"hours"`
	Total *int64        `json:"total"`
	Cells []*DemandCell `json:"cells"`
}

// PlainJSON declares DemandGrid written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars and plain types, without resolvers.
func (DemandGrid) PlainJSON() {}

// DemandCell is one hour of the week.
type DemandCell struct {
	DayOfWeek   int32              `json:"day_of_week"`
	HourOfDay   int32              `json:"hour_of_day"`
	Hours       int64              `json:"hours"`
	Count       *int64             `json:"count"`
	MeanPerHour *float64           `json:"mean_per_hour"`
	MaxPerHour  *int64             `json:"max_per_hour"`
	Percentiles []stats.Percentile `json:"percentiles"`
	Suppressed  bool               `json:"suppressed"`
}

// PlainJSON declares DemandCell written to JSON by the GraphQL path itself (gqljson.Plain): its
// fields are json-tagged built-in scalars and plain types, without resolvers.
func (DemandCell) PlainJSON() {}

// The statement of demand_grid: the hour instances of the range (generate_series over
// timestamps without time zone: wall-clock hours, so a daylight-saving night changes nothing),
// the selected records counted per instance (date_trunc('hour')), and each hour of the week
// aggregating its instances' counts, zeros included. The records are read once, grouped by
// hour; the rest is at most LIMITS__MAX_SERIES_POINTS rows. Hours of the week the range does not
// reach (a range under a week) have no row: demandCells adds them, with no instance. (Joining
// the instances to a 7 x 24 grid in the statement gives the same cells, but a plan with 39
// expressions for PostgreSQL to JIT-compile on a year of records instead of 25.)
const demandSQL = `WITH inst AS (
  SELECT h FROM generate_series(%[1]s::date::timestamp, %[2]s::date::timestamp + interval '23 hours', interval '1 hour') AS h
), counted AS (
  SELECT date_trunc('hour', r.occurred_at) AS h, count(*) AS n FROM %[3]s WHERE %[4]s GROUP BY 1
)
SELECT extract(isodow FROM inst.h)::integer, extract(hour FROM inst.h)::integer, count(*),
       coalesce(sum(counted.n), 0)::bigint, coalesce(max(counted.n), 0)%[5]s
  FROM inst LEFT JOIN counted ON counted.h = inst.h
 GROUP BY 1, 2 ORDER BY 1, 2`

type demandRow struct {
	day, hour   int32
	hours, n    int64
	max         *int64
	percentiles []float64
}

const opDemandGrid = "demand grid"

// DemandGrid counts the records f selects per hour of the week, and suppresses small counts.
func (r *Repository) DemandGrid(ctx context.Context, f records.RecordFilter, percentiles []float64, k threshold, lim Limits) (*DemandGrid, error) {
	if err := checkFractions("percentiles", percentiles); err != nil {
		return nil, err
	}
	start, err := records.ParseDate("start_date", f.StartDate)
	if err != nil {
		return nil, err
	}
	end, err := records.ParseDate("end_date", f.EndDate)
	if err != nil {
		return nil, err
	}
	if !start.After(end) {
		if n := ((end.Unix()-start.Unix())/86400 + 1) * 24; n > int64(lim.SeriesPoints) {
			return nil, apierr.BadInput("demand_grid: %d hours exceed LIMITS__MAX_SERIES_POINTS=%d; choose a shorter period", n, lim.SeriesPoints)
		}
	}
	var args records.Args
	cond, err := f.Compile(&args)
	if err != nil {
		return nil, err
	}
	pct := ""
	if len(percentiles) > 0 {
		pct = ", percentile_cont(" + args.Add(percentiles) + "::float8[]) WITHIN GROUP (ORDER BY coalesce(counted.n, 0))"
	}
	q := fmt.Sprintf(strings.ReplaceAll(demandSQL, "\n", " "), args.Add(start), args.Add(end), cond.From(), cond.SQL, pct)
	rows, err := collect(ctx, r.db, opDemandGrid, q, args, Limits{}, func(row pgx.CollectableRow) (demandRow, error) {
		var x demandRow
		dest := []any{&x.day, &x.hour, &x.hours, &x.n, &x.max}
		if len(percentiles) > 0 {
			dest = append(dest, &x.percentiles)
		}
		return x, row.Scan(dest...)
	})
	if err != nil {
		return nil, err
	}
	return demandAnswer(demandCells(rows), percentiles, k), nil
}

// demandCells is the 168 hours of the week in order, Monday 0:00 first: the statement's rows,
// and an hour it has no row for with no instance (no count, no maximum, no percentiles).
func demandCells(rows []demandRow) []demandRow {
	cells := make([]demandRow, 0, 7*24)
	i := 0
	for day := int32(1); day <= 7; day++ {
		for hour := int32(0); hour < 24; hour++ {
			if i < len(rows) && rows[i].day == day && rows[i].hour == hour {
				cells = append(cells, rows[i])
				i++
				continue
			}
			cells = append(cells, demandRow{day: day, hour: hour})
		}
	}
	return cells
}

// demandAnswer is the grid as published under k (contract 6.12.4): a small cell is
// suppressed; when exactly one is, the unsuppressed cell of the smallest non-zero count is
// too (the first in cell order), so that the total less the others does not give it; the
// total is withheld when small, or when there is no such cell to suppress.
func demandAnswer(rows []demandRow, percentiles []float64, k threshold) *DemandGrid {
	g := &DemandGrid{Cells: make([]*DemandCell, len(rows))}
	var total int64
	suppressed := 0
	for i, x := range rows {
		g.Hours += x.hours
		total += x.n
		c := &DemandCell{DayOfWeek: x.day, HourOfDay: x.hour, Hours: x.hours, Suppressed: k.small(x.n)}
		if c.Suppressed {
			suppressed++
		}
		c.Percentiles = make([]stats.Percentile, len(percentiles))
		for j, p := range percentiles {
			c.Percentiles[j].P = p
		}
		g.Cells[i] = c
	}
	complement := true
	if suppressed == 1 {
		best := -1
		for i, x := range rows {
			if !g.Cells[i].Suppressed && x.n > 0 && (best < 0 || x.n < rows[best].n) {
				best = i
			}
		}
		if best >= 0 {
			g.Cells[best].Suppressed = true
		} else {
			complement = false
		}
	}
	if !k.small(total) && complement {
		g.Total = &total
	}
	for i, x := range rows {
		c := g.Cells[i]
		if c.Suppressed {
			continue
		}
		n := x.n
		c.Count = &n
		if x.hours == 0 {
			continue
		}
		mean := float64(x.n) / float64(x.hours)
		c.MeanPerHour = &mean
		c.MaxPerHour = x.max
		for j := range c.Percentiles {
			if j < len(x.percentiles) {
				v := x.percentiles[j]
				c.Percentiles[j].Value = &v
			}
		}
	}
	return g
}
