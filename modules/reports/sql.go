package reports

import (
	"strconv"
	"strings"

	"github.com/emsanalytics/emsquery/modules/records"
)

// catalogColumn returns a column of the records catalog, which owns every record column's SQL
// expression and join; a missing name is a programming error.
func catalogColumn(name string) records.Column {
	c, ok := records.LookupColumn(name)
	if !ok {
		panic("reports: column " + name + " is not in the records catalog")
	}
	return c
}

// oxygenRoutes is the record's distinct oxygen routes, ascending, as a text[] ('{}' when none);
// record is the SQL expression of the record's id. main_report evaluates it for a page's rows
// only, one index probe each.
func oxygenRoutes(record string) string {
	return `ARRAY(SELECT DISTINCT o.route FROM fact_oxygen AS o WHERE o.record_id = ` + record +
		` AND o.route IS NOT NULL ORDER BY o.route)`
}

// RouteSeparator joins a row's oxygen routes in one CSV field.
const RouteSeparator = "; "

// oxygenRoutesJoin gives the export every record's routes, joined with RouteSeparator in the
// order of oxygenRoutes (NULL when none), as ox.routes. One aggregate over fact_oxygen joined by
// hash beats a probe per row once an export has more than some 100,000 rows (measured: 1M
// records 3.5 s instead of 5.0 s; one month, 44,000 records, 0.65 s instead of 0.45 s), and
// large exports are the ones whose time matters.
const oxygenRoutesJoin = ` LEFT JOIN (SELECT record_id, string_agg(DISTINCT route, '` + RouteSeparator + `' ORDER BY route) AS routes` +
	` FROM fact_oxygen WHERE route IS NOT NULL GROUP BY record_id) AS ox ON ox.record_id = ` + recordID

// reportColumn is one column of the main report: the GraphQL field and CSV header name, its
// SQL for main_report (typed, scanned into MainReportRow) and for the export (the text the CSV
// shows: booleans as true/false, the routes joined with RouteSeparator).
type reportColumn struct {
	name string
	sql  string
	csv  string // "" = sql
}

var (
	colOccurredAt = catalogColumn("occurred_at")
	colStation    = catalogColumn("station")
	colUrgency    = catalogColumn("degree_of_urgency")
	colDistance   = catalogColumn("distance")
	colResponse   = catalogColumn("response_time_s")
	colMunicip    = catalogColumn("municipality")
	colTransport  = catalogColumn("transported")
	colCallsign   = catalogColumn("callsign")
	colResourceID = catalogColumn("resource_id")
	colAge        = catalogColumn("age")
	colGender     = catalogColumn("gender")

	// reportJoins are the catalog columns the report selects; they decide the LEFT JOINs.
	reportJoins = []records.Column{colCallsign, colResourceID, colAge, colGender}
)

// recordID is the record's key over the record query's alias.
const recordID = records.AliasRecord + ".record_id"

// reportColumns are the main report's columns, in the order of MainReportRow and of the CSV.
// oxygen_routes is last: main_report computes it for the page's rows only.
var reportColumns = []reportColumn{
	{name: "record_id", sql: recordID},
	// Text in the ISO form the pool's DateStyle (ISO, YMD) gives: "YYYY-MM-DD HH:MM:SS", a
	// fraction only when there is one; COPY writes the value in the same form.
	{name: "occurred_at", sql: colOccurredAt.Expr() + "::text", csv: colOccurredAt.Expr()},
	{name: "station", sql: colStation.Expr()},
	{name: "callsign", sql: colCallsign.Expr()},
	{name: "resource_id", sql: colResourceID.Expr()},
	{name: "degree_of_urgency", sql: colUrgency.Expr()},
	{name: "distance", sql: colDistance.Expr()},
	{name: "response_time_s", sql: colResponse.Expr()},
	{name: "municipality", sql: colMunicip.Expr()},
	{name: "transported", sql: colTransport.Expr(), csv: colTransport.Expr() + "::text"},
	{name: "patient_age", sql: colAge.Expr()},
	{name: "patient_gender", sql: colGender.Expr()},
	{name: "oxygen_routes", sql: oxygenRoutes(recordID), csv: "ox.routes"},
}

// ColumnNames are the main report's column names: MainReportRow's fields and the CSV header.
func ColumnNames() []string {
	names := make([]string, len(reportColumns))
	for i, c := range reportColumns {
		names[i] = c.name
	}
	return names
}

// reportOrder is the report's stable order.
var reportOrder = colOccurredAt.Expr() + ", " + recordID

// limitClause renders the page as LIMIT/OFFSET with placeholders.
func limitClause(p Page, args *records.Args) string {
	var b strings.Builder
	if p.Limit != All {
		b.WriteString(" LIMIT " + args.Add(p.Limit) + "::bigint")
	}
	if p.Offset > 0 {
		b.WriteString(" OFFSET " + args.Add(p.Offset) + "::bigint")
	}
	return b.String()
}

// exportSelect is the export's query: the report's rows in the CSV's text forms. It has
// placeholders; see inline.
func exportSelect(a Args) (string, records.Args, error) {
	var args records.Args
	cond, err := a.Records.Compile(&args)
	if err != nil {
		return "", nil, err
	}
	sel := make([]string, len(reportColumns))
	for i, c := range reportColumns {
		expr := c.csv
		if expr == "" {
			expr = c.sql
		}
		sel[i] = expr + " AS " + c.name
	}
	q := "SELECT " + strings.Join(sel, ", ") +
		" FROM " + cond.From(reportJoins...) + oxygenRoutesJoin +
		" WHERE " + cond.SQL +
		" ORDER BY " + reportOrder + limitClause(a.Page, &args)
	return q, args, nil
}

// copyOptions make COPY write CSV with a header row, in UTF-8 whatever the session's
// client_encoding.
const copyOptions = "(FORMAT csv, HEADER, ENCODING 'UTF8')"

// exportSQL is the export's statement: COPY of exportSelect. It has placeholders; see inline.
func exportSQL(a Args) (string, records.Args, error) {
	q, args, err := exportSelect(a)
	if err != nil {
		return "", nil, err
	}
	return "COPY (" + q + ") TO STDOUT WITH " + copyOptions, args, nil
}

// ExportQuery is the export's SELECT with its values written in as literals, one line: what
// the export runs inside COPY, for comparisons such as the benchmark's
// psql -c "\copy (<query>) to stdout with (format csv, header)".
func ExportQuery(a Args) (string, error) {
	q, args, err := exportSelect(a)
	if err != nil {
		return "", err
	}
	return inline(q, args)
}

// pageSQL is main_report's statement. With total, it also counts every matching record in the
// same statement (one snapshot): a one-row count LEFT JOINed with the page, so the count comes
// even when the page is empty (its columns are then NULL). The routes of the page's rows are
// computed after the LIMIT, for those rows only.
//
// Columns: total (when withTotal), then reportColumns in order.
func pageSQL(a Args, withTotal bool) (string, records.Args, error) {
	var args records.Args
	cond, err := a.Records.Compile(&args)
	if err != nil {
		return "", nil, err
	}
	inner := make([]string, 0, len(reportColumns)+1)
	outer := make([]string, 0, len(reportColumns)+1)
	if withTotal {
		outer = append(outer, "t.total")
	}
	for i, c := range reportColumns {
		if c.name == "oxygen_routes" {
			outer = append(outer, "CASE WHEN pg.c0 IS NULL THEN NULL ELSE "+oxygenRoutes("pg.c0")+" END")
			continue
		}
		col := "c" + strconv.Itoa(i)
		inner = append(inner, c.sql+" AS "+col)
		outer = append(outer, "pg."+col)
	}
	inner = append(inner, colOccurredAt.Expr()+" AS ts")
	page := "SELECT " + strings.Join(inner, ", ") +
		" FROM " + cond.From(reportJoins...) +
		" WHERE " + cond.SQL +
		" ORDER BY " + reportOrder + limitClause(a.Page, &args)
	if !withTotal {
		return "SELECT " + strings.Join(outer, ", ") + " FROM (" + page + ") AS pg ORDER BY pg.ts, pg.c0", args, nil
	}
	count := "SELECT count(*) AS total FROM " + cond.From() + " WHERE " + cond.SQL
	q := "SELECT " + strings.Join(outer, ", ") +
		" FROM (" + count + ") AS t LEFT JOIN (" + page + ") AS pg ON true ORDER BY pg.ts, pg.c0"
	return q, args, nil
}

// countSQL counts the matching records.
func countSQL(f records.RecordFilter) (string, records.Args, error) {
	var args records.Args
	cond, err := f.Compile(&args)
	if err != nil {
		return "", nil, err
	}
	return "SELECT count(*) FROM " + cond.From() + " WHERE " + cond.SQL, args, nil
}

// summaryStatements are main_report_summary's statements, over the records f selects, all with
// the same args: the figures, and the two breakdowns, each value once with its count, value
// ascending, NULL last. They are what a DBA would write: plain statements that each read the
// matching records with their own plan. (One statement that kept the matching records in a CTE
// for all three wrote them to a temporary file past work_mem and read them single-threaded,
// where each breakdown alone gets a parallel scan: 800 ms against 420 + 120 + 120 ms for a year
// of 1,000,000 records.) Repository.Summary runs them as one batch, on one snapshot.
func summaryStatements(f records.RecordFilter) (figures, byUrgency, byStation string, args records.Args, err error) {
	cond, err := f.Compile(&args)
	if err != nil {
		return "", "", "", nil, err
	}
	where := ` WHERE ` + cond.SQL
	figures = `SELECT count(*), count(DISTINCT ` + colResourceID.Expr() + `), count(DISTINCT r.sk_patient), ` +
		`avg(` + colDistance.Expr() + `)::float8, avg(` + colResponse.Expr() + `)::float8, ` +
		`count(*) FILTER (WHERE ` + colTransport.Expr() + `), count(` + colTransport.Expr() + `)` +
		` FROM ` + cond.From(colResourceID) + where
	breakdown := func(c records.Column) string {
		return `SELECT ` + c.Expr() + `, count(*) FROM ` + cond.From(c) + where + ` GROUP BY 1 ORDER BY 1 NULLS LAST`
	}
	return figures, breakdown(colUrgency), breakdown(colStation), args, nil
}
