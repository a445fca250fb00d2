package patients

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
)

// Repository reads dim_patient and fact_oxygen.
type Repository struct {
	db *database.DB
}

func NewRepository(db *database.DB) *Repository { return &Repository{db: db} }

// Patients returns every dim_patient row ordered by sk_patient.
func (r *Repository) Patients(ctx context.Context) ([]Patient, error) {
	const q = `SELECT sk_patient, age, date_of_birth, gender, weight FROM dim_patient ORDER BY sk_patient`
	var (
		ages    slab[int32]
		weights slab[float64]
		dates   slab[string]
		genders interner
	)
	return database.Collect(ctx, r.db, "patients", q, nil, func(row pgx.CollectableRow) (Patient, error) {
		var (
			p      Patient
			age    pgtype.Int4
			born   pgtype.Date
			gender rawText
			weight pgtype.Float8
		)
		if err := row.Scan(&p.SkPatient, &age, &born, &gender, &weight); err != nil {
			return p, err
		}
		if age.Valid {
			p.Age = ages.ptr(age.Int32)
		}
		if born.Valid {
			p.DateOfBirth = dates.ptr(formatDate(born))
		}
		p.Gender = genders.text(gender)
		if weight.Valid {
			p.Weight = weights.ptr(weight.Float64)
		}
		return p, nil
	})
}

// oxygenColumns are the columns of fact_oxygen, the only names distinct_fields accepts, in the
// order of the select list, each with the typed NULL that stands for it when it is not selected.
var oxygenColumns = [...]struct{ name, null string }{
	{"sk_oxygen", "NULL::bigint"},
	{"record_id", "NULL::bigint"},
	{"route", "NULL::text"},
	{"flow_rate", "NULL::numeric"},
	{"administered_at", "NULL::timestamp"},
}

// oxygenColumnNames lists the accepted names for error messages.
var oxygenColumnNames = func() string {
	names := make([]string, len(oxygenColumns))
	for i, c := range oxygenColumns {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}()

// parseOxygenColumns checks distinct_fields against fact_oxygen's columns and returns their
// indexes in oxygenColumns, first occurrence order, each once. Nil means all rows.
func parseOxygenColumns(fields []string) ([]int, error) {
	var (
		cols    []int
		unknown []string
	)
next:
	for _, f := range fields {
		for i, c := range oxygenColumns {
			if c.name != f {
				continue
			}
			for _, seen := range cols {
				if seen == i {
					continue next
				}
			}
			cols = append(cols, i)
			continue next
		}
		unknown = append(unknown, f)
	}
	if len(unknown) > 0 {
		quoted := make([]string, len(unknown))
		for i, u := range unknown {
			quoted[i] = strconv.Quote(u)
		}
		noun := "name"
		if len(unknown) > 1 {
			noun = "names"
		}
		return nil, apierr.BadInput("distinct_fields: unknown %s %s; accepted names (the columns of fact_oxygen): %s",
			noun, strings.Join(quoted, ", "), oxygenColumnNames)
	}
	return cols, nil
}

// Oxygens returns every fact_oxygen row ordered by sk_oxygen when cols is empty; otherwise one
// row per distinct combination of the columns cols (indexes into oxygenColumns, from
// parseOxygenColumns) ordered by them, NULL last, the other columns NULL.
func (r *Repository) Oxygens(ctx context.Context, cols []int) ([]Oxygen, error) {
	const q = `SELECT sk_oxygen, record_id, route, flow_rate, administered_at FROM fact_oxygen ORDER BY sk_oxygen`
	sql := q
	if len(cols) > 0 {
		sql = distinctOxygenSQL(cols)
	}
	var (
		ints   slab[int64]
		floats slab[float64]
		times  slab[string]
		routes interner
	)
	return database.Collect(ctx, r.db, "oxygens", sql, nil, func(row pgx.CollectableRow) (Oxygen, error) {
		var (
			o          Oxygen
			sk, record pgtype.Int8
			route      rawText
			flow       pgtype.Float8
			at         pgtype.Timestamp
		)
		if err := row.Scan(&sk, &record, &route, &flow, &at); err != nil {
			return o, err
		}
		if sk.Valid {
			o.SkOxygen = ints.ptr(sk.Int64)
		}
		if record.Valid {
			o.RecordID = ints.ptr(record.Int64)
		}
		o.Route = routes.text(route)
		if flow.Valid {
			o.FlowRate = floats.ptr(flow.Float64)
		}
		if at.Valid {
			o.AdministeredAt = times.ptr(formatTimestamp(at))
		}
		return o, nil
	})
}

// distinctOxygenSQL builds the DISTINCT query for cols. Identifiers come only from
// oxygenColumns, quoted all the same; nothing from the request reaches the text.
func distinctOxygenSQL(cols []int) string {
	selected := make([]bool, len(oxygenColumns))
	for _, i := range cols {
		selected[i] = true
	}
	var b strings.Builder
	b.WriteString("SELECT DISTINCT ")
	for i, c := range oxygenColumns {
		if i > 0 {
			b.WriteString(", ")
		}
		if selected[i] {
			b.WriteString(pgx.Identifier{c.name}.Sanitize())
		} else {
			b.WriteString(c.null)
		}
	}
	b.WriteString(" FROM fact_oxygen ORDER BY ")
	for n, i := range cols {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{oxygenColumns[i].name}.Sanitize())
		b.WriteString(" ASC NULLS LAST")
	}
	return b.String()
}
