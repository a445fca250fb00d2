package records

import (
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// ColumnType is the database type of a queryable column; a filter value is converted to it
// before it is compared.
type ColumnType string

const (
	TypeText      ColumnType = "text"
	TypeInteger   ColumnType = "integer"
	TypeNumeric   ColumnType = "numeric"
	TypeBoolean   ColumnType = "boolean"
	TypeTimestamp ColumnType = "timestamp"
)

// Table aliases of the record query: every catalog expression is written over them, and
// callers that select further columns (a report's record_id) use the same aliases.
const (
	AliasRecord   = "r"   // fact_record, always present
	AliasResource = "res" // dim_resource, LEFT JOIN on sk_resource, present when needed
	AliasPatient  = "p"   // dim_patient, LEFT JOIN on sk_patient, present when needed
)

// Column is one queryable column of contract section 2: its public name, type and where it
// lives. The catalog is the only source of identifiers in the SQL that filters build.
type Column struct {
	Name  string
	Type  ColumnType
	alias string // AliasRecord, AliasResource or AliasPatient
	field string // column name in its table
}

// Expr is the column's SQL expression over the record query's aliases, e.g. "res"."callsign".
func (c Column) Expr() string { return pgx.Identifier{c.alias, c.field}.Sanitize() }

// Joined reports whether the column comes from a dimension reached by a LEFT JOIN.
func (c Column) Joined() bool { return c.alias != AliasRecord }

// catalog is contract section 2, in its order.
var catalog = []Column{
	{Name: "station", Type: TypeText, alias: AliasRecord, field: "station"},
	{Name: "station_id", Type: TypeInteger, alias: AliasRecord, field: "station_id"},
	{Name: "degree_of_urgency", Type: TypeText, alias: AliasRecord, field: "degree_of_urgency"},
	{Name: "distance", Type: TypeNumeric, alias: AliasRecord, field: "distance"},
	{Name: "response_time_s", Type: TypeInteger, alias: AliasRecord, field: "response_time_s"},
	{Name: "municipality", Type: TypeText, alias: AliasRecord, field: "municipality"},
	{Name: "transported", Type: TypeBoolean, alias: AliasRecord, field: "transported"},
	{Name: "occurred_at", Type: TypeTimestamp, alias: AliasRecord, field: "occurred_at"},
	{Name: "callsign", Type: TypeText, alias: AliasResource, field: "callsign"},
	{Name: "resource_id", Type: TypeInteger, alias: AliasResource, field: "resource_id"},
	{Name: "gender", Type: TypeText, alias: AliasPatient, field: "gender"},
	{Name: "age", Type: TypeInteger, alias: AliasPatient, field: "age"},
}

var catalogByName = func() map[string]Column {
	m := make(map[string]Column, len(catalog))
	for _, c := range catalog {
		m[c.Name] = c
	}
	return m
}()

// Columns returns the queryable columns in the contract's order (a copy).
func Columns() []Column { return append([]Column(nil), catalog...) }

// ColumnNames returns the accepted names, comma separated, for error messages and docs.
func ColumnNames() string {
	names := make([]string, len(catalog))
	for i, c := range catalog {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// LookupColumn finds a column by its exact (case-sensitive) name.
func LookupColumn(name string) (Column, bool) {
	c, ok := catalogByName[name]
	return c, ok
}

// ResolveColumn is LookupColumn with the BAD_USER_INPUT error of contract section 2; where
// names the argument ("columns", "filters[2].column", "group_by").
func ResolveColumn(where, name string) (Column, error) {
	c, ok := catalogByName[name]
	if !ok {
		return Column{}, apierr.BadInput("%s: unknown column %s; accepted columns: %s", where, Quote(name), ColumnNames())
	}
	return c, nil
}

// ResolveColumns validates the names of a `columns` argument: at least one, each in the
// catalog. A name given twice is kept once, at its first place.
func ResolveColumns(names []string) ([]Column, error) {
	if len(names) == 0 {
		return nil, apierr.BadInput("columns: give at least one column; accepted columns: %s", ColumnNames())
	}
	out := make([]Column, 0, len(names))
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		c, err := ResolveColumn("columns["+itoa(i)+"]", n)
		if err != nil {
			return nil, err
		}
		if !seen[c.Name] {
			seen[c.Name] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// From returns the FROM clause of the record query: fact_record AS r, plus the LEFT JOINs that
// cols need (each dimension once, at most one row per record since the keys are primary keys).
// Pass every column the statement reads: the condition's and the selected ones.
func From(cols ...Column) string {
	var resource, patient bool
	for _, c := range cols {
		resource = resource || c.alias == AliasResource
		patient = patient || c.alias == AliasPatient
	}
	var b strings.Builder
	b.WriteString("fact_record AS r")
	if resource {
		b.WriteString(" LEFT JOIN dim_resource AS res ON res.sk_resource = r.sk_resource")
	}
	if patient {
		b.WriteString(" LEFT JOIN dim_patient AS p ON p.sk_patient = r.sk_patient")
	}
	return b.String()
}
