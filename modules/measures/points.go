package measures

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
)

// TimePoint is the GraphQL enum TimePoint: a NEMSIS time element of a record (contract 6.12.1).
type TimePoint string

const (
	Call           TimePoint = "CALL"
	UnitNotified   TimePoint = "UNIT_NOTIFIED"
	EnRoute        TimePoint = "EN_ROUTE"
	ArrivedOnScene TimePoint = "ARRIVED_ON_SCENE"
	AtPatient      TimePoint = "AT_PATIENT"
	FirstOxygen    TimePoint = "FIRST_OXYGEN"
	LeftScene      TimePoint = "LEFT_SCENE"
	AtDestination  TimePoint = "AT_DESTINATION"
	TransferOfCare TimePoint = "TRANSFER_OF_CARE"
	BackInService  TimePoint = "BACK_IN_SERVICE"
)

// pointSpec is one row of contract 6.12.1's table. A point of the core schema has its SQL
// (over the record query's alias r); an optional one has its column of fact_record, present
// when the database has it (6.12.6).
type pointSpec struct {
	p      TimePoint
	column string // optional points: the fact_record column
	sql    string // core points: the expression
}

// points are the time points in timeline order: a point's position is its place in it.
var points = []pointSpec{
	{p: Call, sql: "r.occurred_at"},
	{p: UnitNotified, column: "unit_notified_at"},
	{p: EnRoute, column: "en_route_at"},
	{p: ArrivedOnScene, sql: "r.occurred_at + r.response_time_s * interval '1 second'"},
	{p: AtPatient, column: "at_patient_at"},
	{p: FirstOxygen, sql: "(SELECT min(o.administered_at) FROM fact_oxygen o WHERE o.record_id = r.record_id)"},
	{p: LeftScene, column: "left_scene_at"},
	{p: AtDestination, column: "at_destination_at"},
	{p: TransferOfCare, column: "transfer_of_care_at"},
	{p: BackInService, column: "back_in_service_at"},
}

func (p TimePoint) position() int {
	for i, s := range points {
		if s.p == p {
			return i
		}
	}
	return -1
}

// IsValid reports whether p is one of the enum's values.
func (p TimePoint) IsValid() bool { return p.position() >= 0 }

func (p TimePoint) String() string { return string(p) }

// MarshalGQL writes the enum value.
func (p TimePoint) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(p))) }

// UnmarshalGQL reads the enum value.
func (p *TimePoint) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok || !TimePoint(s).IsValid() {
		names := make([]string, len(points))
		for i, s := range points {
			names[i] = string(s.p)
		}
		return apierr.BadInput("%v is not a TimePoint; accepted: %s", v, strings.Join(names, ", "))
	}
	*p = TimePoint(s)
	return nil
}

// Tables and columns of the optional extensions (contract 6.12.6): the time columns are of
// fact_record; fact_unit_shift is a table of its own.
const (
	tableRecord = "fact_record"
	tableShift  = "fact_unit_shift"
)

// shiftColumns are fact_unit_shift's columns and the type each must have.
var shiftColumns = []struct{ name, typ string }{
	{"resource_id", "integer"},
	{"shift_start", "timestamp without time zone"},
	{"shift_end", "timestamp without time zone"},
}

// found is what the catalog said at start-up.
type found struct {
	columns map[string]bool // fact_record's time columns of the right type
	shifts  bool            // fact_unit_shift with its three columns of the right types
	// shiftsLack says what fact_unit_shift lacks, for the error of unit_hour_utilization.
	shiftsLack string
}

// Extensions is what the database has of the optional extensions, read from the catalog
// (pg_attribute) once: at start-up, or, when the database could not be read then, at the first
// request that needs it. Adding a column takes a restart, as the contract says.
type Extensions struct {
	db  *database.DB
	log *slog.Logger

	mu    sync.Mutex
	found *found
}

// opTimePoints names the catalog statement.
const opTimePoints = "time points"

// startupRead bounds the read at start-up: a database that does not answer delays the start
// by at most this much (the service starts while the database is down, as everywhere else).
const startupRead = 3 * time.Second

// NewExtensions reads the catalog before the service listens, so that the first answers know
// the extensions; when the database cannot be read then, the first request that needs them
// reads them.
func NewExtensions(db *database.DB, log *slog.Logger) *Extensions {
	s := &Extensions{db: db, log: log}
	ctx, cancel := context.WithTimeout(context.Background(), startupRead)
	defer cancel()
	if _, err := s.get(ctx); err != nil {
		log.Warn("the optional time columns and fact_unit_shift could not be read at start-up; the first request that needs them reads them", "error", err.Error())
	}
	return s
}

// get returns what the catalog says, reading it when not yet read.
func (s *Extensions) get(ctx context.Context) (*found, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.found != nil {
		return s.found, nil
	}
	f, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	s.found = f
	return f, nil
}

type catalogColumn struct {
	Table  string
	Column string
	Type   string
}

// read looks the two tables up in the search_path (to_regclass resolves an unqualified name as
// a query would) and lists their columns with their types. A column of the wrong type is
// logged once, by name, and ignored.
func (s *Extensions) read(ctx context.Context) (*found, error) {
	const q = `SELECT c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod)
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE a.attrelid IN (to_regclass('fact_record'), to_regclass('fact_unit_shift'))
   AND a.attnum > 0 AND NOT a.attisdropped`
	cols, err := database.Collect(ctx, s.db, opTimePoints, q, nil, pgx.RowToStructByPos[catalogColumn])
	if err != nil {
		return nil, err
	}
	types := map[string]map[string]string{}
	for _, c := range cols {
		if types[c.Table] == nil {
			types[c.Table] = map[string]string{}
		}
		types[c.Table][c.Column] = c.Type
	}
	f := &found{columns: map[string]bool{}}
	const ts = "timestamp without time zone"
	var available []string
	for _, p := range points {
		if p.column == "" {
			available = append(available, string(p.p))
			continue
		}
		typ, ok := types[tableRecord][p.column]
		switch {
		case !ok:
		case typ != ts:
			s.log.Warn(fmt.Sprintf("column %s.%s is %s, not %s: ignored, so time point %s is not available", tableRecord, p.column, typ, ts, p.p))
		default:
			f.columns[p.column] = true
			available = append(available, string(p.p))
		}
	}
	if shift, ok := types[tableShift]; !ok {
		f.shiftsLack = "the table " + tableShift + " does not exist"
	} else {
		f.shifts = true
		for _, c := range shiftColumns {
			typ, ok := shift[c.name]
			switch {
			case !ok:
				f.shifts = false
				f.shiftsLack = "the table " + tableShift + " has no column " + c.name
			case typ != c.typ:
				s.log.Warn(fmt.Sprintf("column %s.%s is %s, not %s: ignored, so unit_hour_utilization is not available", tableShift, c.name, typ, c.typ))
				f.shifts = false
				f.shiftsLack = fmt.Sprintf("the column %s.%s is %s, not %s", tableShift, c.name, typ, c.typ)
			}
		}
	}
	s.log.Info("EMS performance measures: schema read", "time_points", strings.Join(available, ","), "fact_unit_shift", f.shifts)
	return f, nil
}

// pointSQL is the SQL of a time point in this database, or the BAD_USER_INPUT of a point it
// lacks (naming the point and the column); arg names the argument.
func (f *found) pointSQL(arg string, p TimePoint) (string, error) {
	i := p.position()
	if i < 0 {
		return "", apierr.BadInput("%s: %s is not a TimePoint", arg, strconv.Quote(string(p)))
	}
	spec := points[i]
	if spec.column == "" {
		return spec.sql, nil
	}
	if !f.columns[spec.column] {
		return "", apierr.BadInput("%s: time point %s needs the column %s.%s (timestamp without time zone), which this database lacks; /lookups/graphql time_points lists the points available",
			arg, p, tableRecord, spec.column)
	}
	return pgx.Identifier{records.AliasRecord, spec.column}.Sanitize(), nil
}

// source is a point's SQL as the contract's table writes it, when available.
func (f *found) source(spec pointSpec) *string {
	if spec.column == "" {
		s := spec.sql
		return &s
	}
	if !f.columns[spec.column] {
		return nil
	}
	s := records.AliasRecord + "." + spec.column
	return &s
}

// interval is the SQL of the interval from one point to a later one, in seconds: both points
// checked (present, in timeline order). NULL when either point is.
func (f *found) interval(from, to TimePoint) (string, error) {
	a, err := f.pointSQL("from", from)
	if err != nil {
		return "", err
	}
	b, err := f.pointSQL("to", to)
	if err != nil {
		return "", err
	}
	if from.position() >= to.position() {
		return "", apierr.BadInput("from %s is not before to %s in timeline order (%s)", from, to, pointNames())
	}
	if from == Call && to == ArrivedOnScene {
		// The response interval is the stored duration itself: occurred_at is NOT NULL and
		// response_time_s whole seconds, so extract(epoch FROM (occurred_at + response_time_s
		// * interval '1 second') - occurred_at) is exactly response_time_s, NULL with it. Said
		// so, the statement does not compute it again at each of the aggregates that read it
		// (a LATERAL value is folded into every reference): period_comparison took the
		// database nearly twice the time of the same question asked by hand.
		return "r.response_time_s::float8", nil
	}
	return "extract(epoch FROM (" + b + ") - (" + a + "))::float8", nil
}

func pointNames() string {
	names := make([]string, len(points))
	for i, s := range points {
		names[i] = string(s.p)
	}
	return strings.Join(names, ", ")
}

// TimePointSource is an entry of /lookups/graphql time_points.
type TimePointSource struct {
	Name      TimePoint `json:"name"`
	Available bool      `json:"available"`
	Source    *string   `json:"source"`
}

// PlainJSON declares TimePointSource written to JSON by the GraphQL path itself (gqljson.Plain):
// its fields are json-tagged built-in scalars and an enum with its own MarshalGQL.
func (TimePointSource) PlainJSON() {}

// TimePoints lists every point in timeline order with whether this database has it.
func (s *Extensions) TimePoints(ctx context.Context) ([]*TimePointSource, error) {
	f, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*TimePointSource, len(points))
	for i, p := range points {
		src := f.source(p)
		out[i] = &TimePointSource{Name: p.p, Available: src != nil, Source: src}
	}
	return out, nil
}
