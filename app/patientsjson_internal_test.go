package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/modules/patients"
	"github.com/emsanalytics/emsquery/platform/config"
	"github.com/emsanalytics/emsquery/platform/database"
)

// realPatients answers patients with the module's resolver on a real database, the rest with
// fakePublic.
type realPatients struct {
	*fakePublic
	r *patients.Resolver
}

func (f realPatients) Query() gqlpublic.QueryResolver { return f }

func (f realPatients) Patients(ctx context.Context, limit, after *int) ([]*patients.Patient, error) {
	return f.r.Patients(ctx, limit, after)
}

// The patients resolver writes each row's JSON from the bytes the database sent (integers and
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
		`ALTER DATABASE "` + fixture.Name + `" SET DateStyle = 'SQL, DMY'`,
		`ALTER DATABASE "` + fixture.Name + `" SET extra_float_digits = 0`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	db := realDB(t, fixture)
	es := gqlpublic.NewExecutableSchema(gqlpublic.Config{Resolvers: realPatients{&fakePublic{}, patients.NewResolver(patients.NewRepository(db), 1000)}})
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
	}
	t.Run("values", func(t *testing.T) { compareAnswers(t, es, queries) })
	// A value gqlgen refuses (a NaN weight): the resolver falls back, and the answer, with its
	// error, is still gqlgen's.
	if _, err := pool.Exec(ctx, `INSERT INTO dim_patient (sk_patient, weight) VALUES (100000, 'NaN')`); err != nil {
		t.Fatal(err)
	}
	t.Run("NaN", func(t *testing.T) { compareAnswers(t, es, queries) })
	body := fmt.Sprintf(`{"query": %q}`, `{ patients { sk_patient weight } }`)
	if _, _, b := answer(t, server(es, true), body); !json.Valid(b) || !bytes.Contains(b, []byte(`"errors"`)) {
		t.Errorf("a NaN weight: want gqlgen's error, got %.300s", b)
	}
}

// realDB opens the service's database pool on fixture, as the service would, closed at the
// end of the test.
func realDB(t *testing.T, fixture servicetest.DB) *database.DB {
	t.Helper()
	db, cleanup, err := database.Open(config.Database{
		Hosts: config.Hosts{fixture.Host}, Ports: config.Ports{config.Port(fixture.Port)}, Name: fixture.Name, Username: fixture.User,
		Password: config.Secret(fixture.Password), Schema: "public", PoolSize: 1, MaxOverflow: 1,
		PoolTimeout: config.Seconds(30 * time.Second), PoolRecycle: config.Seconds(time.Hour),
	}, config.Limits{StatementTimeout: config.Seconds(30 * time.Second), ExportTimeout: config.Seconds(time.Minute)},
		slog.New(slog.NewTextHandler(io.Discard, nil)), noop.NewMeterProvider(), tracenoop.NewTracerProvider())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return db
}
