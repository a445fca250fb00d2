package patients

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
	"github.com/emsanalytics/emsquery/platform/jsonscalar"
	"github.com/emsanalytics/emsquery/platform/keyset"
)

// Repository reads dim_patient and fact_oxygen.
type Repository struct {
	db *database.DB
}

func NewRepository(db *database.DB) *Repository { return &Repository{db: db} }

// The operations of the statements here, as db.client.operation.duration names them.
const (
	opPatients = "patients"
	opOxygens  = "oxygens"
)

// patientsSQL reads a page (keyset.Page.Args) of dim_patient. weight is read as float8: the database converts numeric to
// float8 exactly as pgx would (correctly rounded from the decimal), and decoding numeric in Go
// costs more than the rest of the row together.
const patientsSQL = `SELECT sk_patient, age, date_of_birth, gender, weight::float8 FROM dim_patient WHERE sk_patient > $1 ORDER BY sk_patient LIMIT $2`

// patientRowsSQL is patientsSQL for the rows read raw (EachPatientRow), weight as the numeric it
// is: the database converts a numeric to float8 by printing it and parsing the text, which for
// 1,000,000 patients cost it 0.61 s of processor time against 0.43 s for the numeric's text
// (and 0.45 s for the hand-written SELECT *). appendPatientField writes the float64 nearest to
// the text (jsonscalar.AppendDecimal): the float8 the database would have sent.
const patientRowsSQL = `SELECT sk_patient, age, date_of_birth, gender, weight FROM dim_patient WHERE sk_patient > $1 ORDER BY sk_patient LIMIT $2`

// EachPatient reads the dim_patient rows of page ordered by sk_patient and hands each to fn without
// keeping it: the Patient and the values its Age, DateOfBirth and Weight point to are reused for
// the next row (Gender's string is not: it is interned or new). It returns false when fn refused
// a row; the rows after it are read but not handed on. This is the one place dim_patient's rows
// are decoded; Patients keeps what it hands on.
func (r *Repository) EachPatient(ctx context.Context, page keyset.Page, fn func(*Patient) bool) (bool, error) {
	var (
		// Scan targets, reused for every row (each would be allocated per row otherwise).
		sk      int64
		age     pgtype.Int4
		born    pgtype.Date
		gender  rawText
		weight  pgtype.Float8
		p       Patient
		ageV    int32
		weightV float64
		bornV   string
		genders interner
		ok      = true
	)
	dest := []any{&sk, &age, &born, &gender, &weight}
	err := r.db.ForEachRow(ctx, opPatients, patientsSQL, page.Args(), dest, func() error {
		if !ok {
			return nil
		}
		p = Patient{SkPatient: sk, Gender: genders.text(gender)}
		if age.Valid {
			ageV, p.Age = age.Int32, &ageV
		}
		if born.Valid {
			bornV, p.DateOfBirth = jsonscalar.FormatDate(born), &bornV
		}
		if weight.Valid {
			weightV, p.Weight = weight.Float64, &weightV
		}
		ok = fn(&p)
		return nil
	})
	return ok, err
}

// patientFormats are the formats EachPatientRow asks for patientRowsSQL's columns in: the
// integers, the text and the numeric as text, whose bytes are their JSON or nearly (a text
// value is the same bytes in either format; a numeric's text depends on no setting); the date
// in binary, whose text would depend on the session's DateStyle.
var patientFormats = []int16{pgx.TextFormatCode, pgx.TextFormatCode, pgx.BinaryFormatCode, pgx.TextFormatCode, pgx.TextFormatCode}

// EachPatientRow reads the dim_patient rows of page ordered by sk_patient, as EachPatient does,
// and hands each to fn as the database sent it: patientRowsSQL's columns in patientFormats, nil for
// NULL, valid only until fn returns. It returns false when fn refused a row, as EachPatient.
func (r *Repository) EachPatientRow(ctx context.Context, page keyset.Page, fn func(row [][]byte) bool) (bool, error) {
	return r.db.ForEachRawRow(ctx, opPatients, patientRowsSQL, page.Args(), patientFormats, fn)
}

// PatientList is the patients of page as a list root field writes them (gqlfield.List): the rows
// as the database sends them, each column written to JSON by appendPatientField.
func (r *Repository) PatientList(page keyset.Page) gqlfield.Source[Patient] {
	return gqlfield.Source[Patient]{
		Rows: func(ctx context.Context, yield func([][]byte) bool) (bool, error) {
			return r.EachPatientRow(ctx, page, yield)
		},
		Column: appendPatientField,
		Values: func(ctx context.Context, yield func(*Patient) bool) (bool, error) {
			return r.EachPatient(ctx, page, yield)
		},
		All:   func(ctx context.Context) ([]Patient, error) { return r.Patients(ctx, page) },
		Large: true,
	}
}

// appendPatientField writes column i of a row of EachPatientRow, whose bytes are v (never NULL),
// as the JSON of Patient's struct field i (patientRowsSQL selects them in the order of the struct),
// exactly as the Go value EachPatient would decode is written.
func appendPatientField(b []byte, i int, v []byte) ([]byte, bool) {
	switch i {
	case 0, 1: // sk_patient, age: bigint and integer as text, the digits strconv.AppendInt writes
		return append(b, v...), true
	case 2: // date_of_birth
		b = append(b, '"')
		b, ok := jsonscalar.AppendDate(b, v)
		return append(b, '"'), ok
	case 3: // gender
		return jsonscalar.AppendString(b, v), true
	case 4: // weight: the numeric's text
		return jsonscalar.AppendDecimal(b, v)
	}
	return b, false
}

// Patients returns the dim_patient rows of page ordered by sk_patient: EachPatient's rows, the values
// they point to copied into slabs.
func (r *Repository) Patients(ctx context.Context, page keyset.Page) ([]Patient, error) {
	var (
		ages    slab[int32]
		weights slab[float64]
		dates   slab[string]
		rows    = []Patient{}
	)
	_, err := r.EachPatient(ctx, page, func(p *Patient) bool {
		rows = append(rows, Patient{SkPatient: p.SkPatient, Age: ages.keep(p.Age), DateOfBirth: dates.keep(p.DateOfBirth),
			Gender: p.Gender, Weight: weights.keep(p.Weight)})
		return true
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
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

// oxygensSQL reads a page of fact_oxygen; flow_rate as float8, as patientsSQL reads weight.
const oxygensSQL = `SELECT sk_oxygen, record_id, route, flow_rate::float8, administered_at FROM fact_oxygen WHERE sk_oxygen > $1 ORDER BY sk_oxygen LIMIT $2`

// oxygenRowsSQL is oxygensSQL for the rows read raw (EachOxygenRow), flow_rate as the numeric it
// is, as patientRowsSQL reads weight.
const oxygenRowsSQL = `SELECT sk_oxygen, record_id, route, flow_rate, administered_at FROM fact_oxygen WHERE sk_oxygen > $1 ORDER BY sk_oxygen LIMIT $2`

// EachOxygen reads the fact_oxygen rows of page ordered by sk_oxygen, as Oxygens does without
// distinct fields, and hands each to fn as EachPatient does (Route is interned).
func (r *Repository) EachOxygen(ctx context.Context, page keyset.Page, fn func(*Oxygen) bool) (bool, error) {
	return r.eachOxygen(ctx, oxygensSQL, page.Args(), fn)
}

// OxygenList is the fact_oxygen rows of page as a list root field writes them, as PatientList.
func (r *Repository) OxygenList(page keyset.Page) gqlfield.Source[Oxygen] {
	return gqlfield.Source[Oxygen]{
		Rows: func(ctx context.Context, yield func([][]byte) bool) (bool, error) {
			return r.EachOxygenRow(ctx, page, yield)
		},
		Column: appendOxygenField,
		Values: func(ctx context.Context, yield func(*Oxygen) bool) (bool, error) {
			return r.EachOxygen(ctx, page, yield)
		},
		All:   func(ctx context.Context) ([]Oxygen, error) { return r.Oxygens(ctx, nil, page) },
		Large: true,
	}
}

// appendOxygenField is appendPatientField for a row of EachOxygenRow (oxygenRowsSQL selects
// Oxygen's fields in the order of the struct).
func appendOxygenField(b []byte, i int, v []byte) ([]byte, bool) {
	switch i {
	case 0, 1: // sk_oxygen, record_id: bigint as text
		return append(b, v...), true
	case 2: // route
		return jsonscalar.AppendString(b, v), true
	case 3: // flow_rate: the numeric's text
		return jsonscalar.AppendDecimal(b, v)
	case 4: // administered_at
		b = append(b, '"')
		b, ok := appendTimestamp(b, v)
		return append(b, '"'), ok
	}
	return b, false
}

// oxygenFormats are the formats EachOxygenRow asks for oxygenRowsSQL's columns in, as
// patientFormats: the integers, the text and the numeric as text, the timestamp in binary (its
// text would depend on the session's DateStyle).
var oxygenFormats = []int16{pgx.TextFormatCode, pgx.TextFormatCode, pgx.TextFormatCode, pgx.TextFormatCode, pgx.BinaryFormatCode}

// EachOxygenRow reads the fact_oxygen rows of page ordered by sk_oxygen, as EachOxygen does, and
// hands each to fn as the database sent it, as EachPatientRow does (oxygenRowsSQL's columns in
// oxygenFormats).
func (r *Repository) EachOxygenRow(ctx context.Context, page keyset.Page, fn func(row [][]byte) bool) (bool, error) {
	return r.db.ForEachRawRow(ctx, opOxygens, oxygenRowsSQL, page.Args(), oxygenFormats, fn)
}

// eachOxygen runs q, oxygensSQL or a distinctOxygenSQL (the same columns), and hands each row to
// fn as EachPatient does. This is the one place fact_oxygen's rows are decoded.
func (r *Repository) eachOxygen(ctx context.Context, q string, args []any, fn func(*Oxygen) bool) (bool, error) {
	var (
		sk, record   pgtype.Int8
		route        rawText
		flow         pgtype.Float8
		at           pgtype.Timestamp
		o            Oxygen
		skV, recordV int64
		flowV        float64
		atV          string
		routes       interner
		ok           = true
	)
	dest := []any{&sk, &record, &route, &flow, &at}
	err := r.db.ForEachRow(ctx, opOxygens, q, args, dest, func() error {
		if !ok {
			return nil
		}
		o = Oxygen{Route: routes.text(route)}
		if sk.Valid {
			skV, o.SkOxygen = sk.Int64, &skV
		}
		if record.Valid {
			recordV, o.RecordID = record.Int64, &recordV
		}
		if flow.Valid {
			flowV, o.FlowRate = flow.Float64, &flowV
		}
		if at.Valid {
			atV, o.AdministeredAt = formatTimestamp(at), &atV
		}
		ok = fn(&o)
		return nil
	})
	return ok, err
}

// Oxygens returns the fact_oxygen rows of page ordered by sk_oxygen when cols is empty; otherwise one
// row per distinct combination of the columns cols (indexes into oxygenColumns, from
// parseOxygenColumns) ordered by them, NULL last, the other columns NULL. The rows are
// eachOxygen's, the values they point to copied into slabs.
func (r *Repository) Oxygens(ctx context.Context, cols []int, page keyset.Page) ([]Oxygen, error) {
	q, args := oxygensSQL, page.Args()
	if len(cols) > 0 {
		q, args = distinctOxygenSQL(cols), nil
	}
	var (
		ints   slab[int64]
		floats slab[float64]
		times  slab[string]
		rows   = []Oxygen{}
	)
	_, err := r.eachOxygen(ctx, q, args, func(o *Oxygen) bool {
		rows = append(rows, Oxygen{SkOxygen: ints.keep(o.SkOxygen), RecordID: ints.keep(o.RecordID), Route: o.Route,
			FlowRate: floats.keep(o.FlowRate), AdministeredAt: times.keep(o.AdministeredAt)})
		return true
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
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
