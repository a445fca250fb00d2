package patients_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/internal/dbtest"
	"github.com/emsanalytics/emsquery/internal/gqltest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/modules/patients"
)

// The patients resolver writes each row's JSON (patients and oxygens) from the bytes the database sent (integers and
// text as text, dates and floats in binary): its answers, on rows with awkward values, are
// gqlgen's byte for byte, whatever the database's DateStyle and extra_float_digits.
func TestDirectJSONPatientsFromDatabaseMatchGqlgen(t *testing.T) {
	fixture := servicetest.NewDB(t)
	pool := fixture.Pool(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO dim_patient (sk_patient, age, date_of_birth, gender, weight) VALUES
		 (-9223372036854775808, -2147483648, '-infinity', '', -9999.9),
		 (-1, 0, '4713-11-24 BC', 'quote " and \ backslash', -0.1),
		 (0, NULL, '0001-12-31 BC', E'tab\tcr\rlf\nnul\x01 unit\x1f del\x7f', 0),
		 (1, 2147483647, '0001-01-01', '<script>&amp;</script>', 0.1),
		 (2, 42, '1999-12-31', E'line\u2028para\u2029end', 72.5),
		 (3, 7, '2000-01-01', 'Ålesund Sør, Tromsø, 東京, 🚑', 9999.9),
		 (4, 100, '2000-02-29', NULL, NULL),
		 (5, NULL, NULL, 'female', 123.4),
		 (6, 1, '9999-12-31', 'male', 1000),
		 (7, 2, '10000-01-01', 'other', 0.3),
		 (8, 3, '5874897-12-31', 'x', 100000 / 1000.0),
		 (9, 4, 'infinity', 'y', 33.3),
		 (9223372036854775807, NULL, NULL, NULL, NULL)`,
		`INSERT INTO dim_patient (sk_patient, age, date_of_birth, gender, weight)
		 SELECT 100 + i, i % 120, date '1900-01-01' + i * 7, 'g' || (i % 13), (i % 20000 - 10000) / 10.0
		 FROM generate_series(1, 20000) AS i`,
		// fact_oxygen's record_id refers to fact_record, which this test leaves empty.
		`ALTER TABLE fact_oxygen DROP CONSTRAINT fact_oxygen_record_id_fkey`,
		`INSERT INTO fact_oxygen (sk_oxygen, record_id, route, flow_rate, administered_at) VALUES
		 (-9223372036854775808, -9223372036854775808, '', -999.9, '-infinity'),
		 (-1, 0, 'quote " and \ backslash', -0.1, '4713-01-01 00:00:00 BC'),
		 (0, 1, E'tab\tcr\rlf\nnul\x01 unit\x1f del\x7f', 0, '0001-12-31 23:59:59.999999 BC'),
		 (1, 2, '<script>&amp;</script>', 0.1, '1999-12-31 23:59:59.5'),
		 (2, 3, E'line\u2028para\u2029end', 15, '2000-01-01 00:00:00'),
		 (3, 4, 'Ålesund Sør, 東京, 🚑', 999.9, '2024-02-29 12:34:56.000001'),
		 (4, 5, NULL, NULL, NULL),
		 (5, 6, 'mask', 2.5, '1969-12-31 23:59:59.123'),
		 (6, 7, 'nasal cannula', 100, '9999-12-31 23:59:59'),
		 (7, 8, 'x', 3.3, '10000-01-01 00:00:00'),
		 (8, 9, 'y', 0.3, '294276-12-31 23:59:59.999999'),
		 (9, 9223372036854775807, 'z', 1, 'infinity'),
		 (9223372036854775807, 10, NULL, NULL, NULL)`,
		`INSERT INTO fact_oxygen (sk_oxygen, record_id, route, flow_rate, administered_at)
		 SELECT 100 + i, i / 3, 'r' || (i % 7), (i % 2000) / 10.0, timestamp '1990-01-01' + i * interval '1234.567 seconds'
		 FROM generate_series(1, 20000) AS i`,
		`ALTER DATABASE "` + fixture.Name + `" SET DateStyle = 'SQL, DMY'`,
		`ALTER DATABASE "` + fixture.Name + `" SET extra_float_digits = 0`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	db := dbtest.Open(t, fixture)
	es := gqlpublic.Executable(gqlpublic.Config{Resolvers: gqltest.RealPatients{FakePublic: &gqltest.FakePublic{}, R: patients.NewResolver(patients.NewRepository(db), 1000)}})
	queries := []string{
		`{ patients { sk_patient age date_of_birth gender weight } }`,
		`{ patients { weight date_of_birth } }`,
		`{ p: patients { id: sk_patient __typename a: age a2: age sk_patient } }`,
		`{ patients { ...P } } fragment P on Patient { gender weight ... on Patient { age } }`,
		`query Q($yes: Boolean!, $no: Boolean!) { patients { sk_patient age @skip(if: $yes) gender @include(if: $no) weight @include(if: $yes) } }`,
		`{ patients(limit: 5) { sk_patient date_of_birth } }`,
		`{ patients(limit: 1000, after: 2) { sk_patient age date_of_birth gender weight } }`,
		`{ patients(after: 120) { sk_patient age date_of_birth gender weight } }`,
		`{ a: patients(limit: 3) { sk_patient } b: patients(limit: 2, after: 3) { sk_patient gender } }`,
		`{ oxygens { sk_oxygen record_id route flow_rate administered_at } }`,
		`{ o: oxygens(limit: 1000, after: 2) { at: administered_at flow_rate __typename route } }`,
		`query Q($yes: Boolean!) { oxygens(after: 120) { sk_oxygen route @skip(if: $yes) ...O } } fragment O on Oxygen { administered_at @include(if: $yes) }`,
		`{ oxygens(distinct_fields: ["route"]) { route flow_rate } }`,
	}
	t.Run("values", func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
	// A value gqlgen refuses (a NaN weight): an error of the field, as gqlgen's is of the element.
	for _, q := range []string{
		`INSERT INTO dim_patient (sk_patient, weight) VALUES (100000, 'NaN')`,
		`INSERT INTO fact_oxygen (sk_oxygen, record_id, flow_rate) VALUES (100000, 1, 'NaN')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("NaN", func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
	for _, q := range []string{`{ patients { sk_patient weight } }`, `{ oxygens { sk_oxygen flow_rate } }`} {
		body := fmt.Sprintf(`{"query": %q}`, q)
		if _, _, b, cut := gqltest.AnswerCut(t, gqltest.Server(es, true), body); !cut && (!json.Valid(b) || !bytes.Contains(b, []byte(`"errors"`))) {
			t.Errorf("%s: a NaN: want an error, got %.300s", q, b)
		}
	}
}
