package resources_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/internal/dbtest"
	"github.com/emsanalytics/emsquery/internal/gqltest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/modules/resources"
)

// The resources resolver writes each row's JSON from the bytes the database sent (integers and
// text as text, dates in binary): its answers, on rows with awkward values, are gqlgen's byte
// for byte, whatever the database's DateStyle.
func TestDirectJSONResourcesFromDatabaseMatchGqlgen(t *testing.T) {
	fixture := servicetest.NewDB(t)
	pool := fixture.Pool(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO dim_station (station_id, station_name) VALUES
		 (-2147483648, 'min'), (1, 'quote " and \ backslash'), (2, 'Ålesund Sør, 東京, 🚑'), (2147483647, 'max')`,
		`INSERT INTO dim_resource (sk_resource, resource_id, callsign, station_id, station, valid_from, valid_to) VALUES
		 (-9223372036854775808, -2147483648, '', -2147483648, '', '-infinity', '4713-11-24 BC'),
		 (-1, 0, 'quote " and \ backslash', 1, 'quote " and \ backslash', '0001-12-31 BC', '0001-01-01'),
		 (0, 1, E'tab\tcr\rlf\nnul\x01 unit\x1f del\x7f', NULL, NULL, '1999-12-31', NULL),
		 (1, 2, '<script>&amp;</script>', 2, E'line\u2028para\u2029end', '2000-02-29', '9999-12-31'),
		 (2, 2, 'Ålesund Sør, Tromsø, 東京, 🚑', 2, 'Ålesund Sør, 東京, 🚑', '10000-01-01', '5874897-12-31'),
		 (3, 2147483647, 'A1', NULL, 'not stationed but named', '2024-03-01', 'infinity'),
		 (9223372036854775807, 3, 'Z9', 2147483647, NULL, '2000-01-01', NULL)`,
		`INSERT INTO dim_resource (sk_resource, resource_id, callsign, station_id, station, valid_from, valid_to)
		 SELECT 100 + i, i % 500, 'unit ' || i, CASE WHEN i % 7 = 0 THEN NULL ELSE 1 + i % 2 END,
		        CASE WHEN i % 5 = 0 THEN NULL ELSE 's' || (i % 3) END, date '1900-01-01' + i * 3,
		        CASE WHEN i % 4 = 0 THEN NULL ELSE date '1900-01-01' + i * 3 + 30 END
		 FROM generate_series(1, 5000) AS i`,
		`ALTER DATABASE "` + fixture.Name + `" SET DateStyle = 'SQL, DMY'`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	db := dbtest.Open(t, fixture)
	es := gqlpublic.Executable(gqlpublic.Config{Resolvers: gqltest.RealResources{FakePublic: &gqltest.FakePublic{}, R: resources.NewResolver(resources.NewRepository(db), 1000)}})
	queries := []string{
		`{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`,
		`{ resources { valid_to station callsign } }`,
		`{ r: resources { id: sk_resource __typename a: station a2: station sk_resource } }`,
		`{ resources { ...R } } fragment R on Resource { valid_from station_id ... on Resource { callsign } }`,
		`query Q($yes: Boolean!, $no: Boolean!) { resources { sk_resource callsign @skip(if: $yes) station @include(if: $no) valid_to @include(if: $yes) } }`,
		`{ resources(limit: 5) { sk_resource valid_from } }`,
		`{ resources(limit: 1000, after: 2) { sk_resource resource_id callsign station_id station valid_from valid_to } }`,
		`{ resources(after: 120) { sk_resource resource_id callsign station_id station valid_from valid_to } }`,
		`{ a: resources(limit: 3) { sk_resource } b: resources(limit: 2, after: 0) { sk_resource callsign } }`,
		`{ station_resources { station_id station_name resources { resource_id } } }`,
	}
	t.Run("values", func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
	// The buffers a held list and its answer's envelope are made in are reused once the answer
	// is written: answers made at the same time, of lists of different lengths, never mix.
	t.Run("concurrent", func(t *testing.T) {
		direct, plain := gqltest.Server(es, true), gqltest.Server(es, false)
		want := make([][]byte, len(queries))
		for i, q := range queries {
			_, _, want[i] = gqltest.Answer(t, plain, fmt.Sprintf(`{"query": %q}`, q))
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for n := range 15 * len(queries) {
					i := (n*(g+1) + g) % len(queries)
					if _, _, got := gqltest.Answer(t, direct, fmt.Sprintf(`{"query": %q}`, queries[i])); !gqltest.SameAnswer(got, want[i]) {
						t.Errorf("query %s, asked with 3 others at once:\n%.500s\nwant\n%.500s", queries[i], got, want[i])
						return
					}
				}
			})
		}
		wg.Wait()
	})
	// A NULL callsign, which the schema forbids but an ETL could write where the constraint is
	// missing: the decoding path fails on it whether callsign is selected or not, and so does
	// the raw path: an error answer while nothing was sent, a cut body after.
	for _, q := range []string{
		`ALTER TABLE dim_resource ALTER COLUMN callsign DROP NOT NULL`,
		`INSERT INTO dim_resource (sk_resource, resource_id, callsign, valid_from) VALUES (100000, 4, NULL, '2024-01-01')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	t.Run("NULL", func(t *testing.T) { gqltest.CompareAnswers(t, es, queries) })
	body := fmt.Sprintf(`{"query": %q}`, `{ resources { sk_resource callsign } }`)
	if _, _, b, cut := gqltest.AnswerCut(t, gqltest.Server(es, true), body); !cut {
		t.Errorf("a NULL callsign after the first 64 KiB of a streamed list: want the body cut, got %.300s", b)
	}
	body = fmt.Sprintf(`{"query": %q}`, `{ resources(after: 99999) { sk_resource callsign } }`)
	if _, _, b, cut := gqltest.AnswerCut(t, gqltest.Server(es, true), body); cut || !json.Valid(b) || !bytes.Contains(b, []byte(`"errors"`)) {
		t.Errorf("a NULL callsign before anything was sent: want an error answer, got cut=%v %.300s", cut, b)
	}
}
