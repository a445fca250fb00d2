package reports

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/follow"
)

// Repository runs the reporting client's queries, or answers main_report_summary from followed
// counts (follow.go).
type Repository struct {
	db    *database.DB
	views *follow.Views // nil: nothing followed
	coll  *records.Collator
}

// NewRepository returns the repository; views (may be nil) keeps the summaries' counts up to
// date from the changed rows.
func NewRepository(db *database.DB, views *follow.Views) *Repository {
	return &Repository{db: db, views: views, coll: records.NewCollator(db, views.Generation)}
}

// The operations of the reporting client's statements, as db.client.operation.duration names
// them.
const (
	opMainReport     = "main report"
	opSummary        = "main report summary"
	opExport         = "export"
	opStations       = "stations"
	opCallsigns      = "callsigns"
	opUrgencies      = "urgencies"
	opMunicipalities = "municipalities"
	opOxygenRoutes   = "oxygen routes"
	opGenders        = "genders"
)

// MainReport returns the page a selects and, when wantTotal, the number of all matching records,
// in one statement. Without wantRows (or with limit 0) no row is read.
func (r *Repository) MainReport(ctx context.Context, a Args, wantRows, wantTotal bool) (*MainReport, error) {
	out := &MainReport{Limit: a.Page.Limit, Offset: a.Page.Offset, Rows: []MainReportRow{}}
	if !wantRows || a.Page.Limit == 0 {
		q, args, err := countSQL(a.Records)
		if err != nil {
			return nil, err
		}
		if !wantTotal {
			return out, nil
		}
		if err := r.db.QueryRow(ctx, opMainReport, q, args, &out.Total); err != nil {
			return nil, err
		}
		return out, nil
	}
	q, args, err := pageSQL(a, wantTotal)
	if err != nil {
		return nil, err
	}
	// Scan targets for every row: each scan overwrites all of row's fields, and the values its
	// pointer fields point to are new for each row.
	var (
		row   MainReportRow
		id    *int64 // NULL on the one row of an empty page with its total
		total int64
		at    *string
	)
	dest := []any{&id, &at, &row.Station, &row.Callsign, &row.ResourceID, &row.DegreeOfUrgency, &row.Distance,
		&row.ResponseTimeS, &row.Municipality, &row.Transported, &row.PatientAge, &row.PatientGender, &row.OxygenRoutes}
	if wantTotal {
		dest = append([]any{&total}, dest...)
	}
	err = r.db.ForEachRow(ctx, opMainReport, q, args, dest, func() error {
		out.Total = total
		if id == nil {
			return nil
		}
		row.RecordID, row.OccurredAt = *id, *at
		out.Rows = append(out.Rows, row)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SummaryParts are the parts of main_report_summary a query asks for: each is a statement of
// its own, and a part nobody reads is not computed.
type SummaryParts struct {
	Figures, ByUrgency, ByStation bool
	// The figures that need counts of their own when the summary is followed (follow.go):
	// distinct_resources, distinct_patients, average_distance, average_response_time_s.
	Resources, Patients, Distance, Response bool
}

// Summary computes main_report_summary over the records f selects: the parts asks for, in one
// batch (one round trip, one snapshot: the figures and the breakdowns count the same records
// even when an ETL load commits meanwhile).
func (r *Repository) Summary(ctx context.Context, f records.RecordFilter, parts SummaryParts) (*MainReportSummary, error) {
	figures, byUrgency, byStation, args, err := summaryStatements(f)
	if err != nil {
		return nil, err
	}
	if !parts.Figures && !parts.ByUrgency && !parts.ByStation {
		return &MainReportSummary{ByUrgency: []ValueCount{}, ByStation: []ValueCount{}}, nil
	}
	if s, followed, ok := r.followedSummary(ctx, f, parts); ok {
		r.views.Count(ctx, fieldSummary, followed)
		return s, nil
	}
	r.views.Count(ctx, fieldSummary, false)
	s := &MainReportSummary{ByUrgency: []ValueCount{}, ByStation: []ValueCount{}}
	var (
		b     database.Batch
		known int64
	)
	if parts.Figures {
		b.QueueRow(figures, args, &s.Records, &s.DistinctResources, &s.DistinctPatients, &s.AverageDistance,
			&s.AverageResponseTimeS, &s.Transported, &known)
	}
	if parts.ByUrgency {
		database.QueueCollect(&b, byUrgency, args, pgx.RowToStructByPos[ValueCount], &s.ByUrgency)
	}
	if parts.ByStation {
		database.QueueCollect(&b, byStation, args, pgx.RowToStructByPos[ValueCount], &s.ByStation)
	}
	if !parts.Figures && !parts.ByUrgency && !parts.ByStation {
		return s, nil
	}
	if err := r.db.RunBatch(ctx, opSummary, &b); err != nil {
		return nil, err
	}
	if known > 0 {
		share := float64(s.Transported) / float64(known)
		s.TransportedShare = &share
	}
	return s, nil
}

// Stations returns every dim_station row by name. No values, so one plan: prepared once per
// session (database.PlanOnce).
func (r *Repository) Stations(ctx context.Context) ([]Station, error) {
	const q = `SELECT station_id, station_name FROM dim_station ORDER BY station_name, station_id`
	return database.Collect(ctx, r.db, opStations, q, []any{database.PlanOnce}, pgx.RowToStructByPos[Station])
}

// The drop-down lists: distinct non-NULL values, ascending by the database's collation.
const (
	callsignsSQL      = `SELECT DISTINCT callsign FROM dim_resource ORDER BY callsign`
	urgenciesSQL      = `SELECT DISTINCT degree_of_urgency FROM fact_record WHERE degree_of_urgency IS NOT NULL ORDER BY 1`
	municipalitiesSQL = `SELECT DISTINCT municipality FROM fact_record WHERE municipality IS NOT NULL ORDER BY 1`
	oxygenRoutesSQL   = `SELECT DISTINCT route FROM fact_oxygen WHERE route IS NOT NULL ORDER BY 1`
	gendersSQL        = `SELECT DISTINCT gender FROM dim_patient WHERE gender IS NOT NULL ORDER BY 1`
)

// values runs one of the lists above. Each has no values, so one plan: it is prepared once per
// session (database.PlanOnce).
func (r *Repository) values(ctx context.Context, op, q string) ([]string, error) {
	return database.Collect(ctx, r.db, op, q, []any{database.PlanOnce}, pgx.RowTo[string])
}

func (r *Repository) Callsigns(ctx context.Context) ([]string, error) {
	return r.values(ctx, opCallsigns, callsignsSQL)
}

func (r *Repository) Urgencies(ctx context.Context) ([]string, error) {
	return r.values(ctx, opUrgencies, urgenciesSQL)
}

func (r *Repository) Municipalities(ctx context.Context) ([]string, error) {
	return r.values(ctx, opMunicipalities, municipalitiesSQL)
}

func (r *Repository) OxygenRoutes(ctx context.Context) ([]string, error) {
	return r.values(ctx, opOxygenRoutes, oxygenRoutesSQL)
}

func (r *Repository) Genders(ctx context.Context) ([]string, error) {
	return r.values(ctx, opGenders, gendersSQL)
}
