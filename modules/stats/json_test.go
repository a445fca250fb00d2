package stats_test

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
	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/modules/stats"
)

// The record_series resolver writes each point's JSON from the bytes the database sent (the
// counts and values as text, the buckets' starts in binary, each labelled once): its answers are
// gqlgen's byte for byte, for every bucket, with and without group_by, on values that need
// escaping, NULLs, years before 1970 and 2000, leap days and the hours of a day, whatever the
// database's DateStyle; and the limit's refusal is gqlgen's error.
func TestDirectJSONSeriesFromDatabaseMatchGqlgen(t *testing.T) {
	fixture := servicetest.NewDB(t)
	pool := fixture.Pool(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency, municipality, response_time_s)
		 SELECT i, timestamp '1899-12-30 22:00' + i * interval '97 minutes 13.5 seconds',
		        's' || (i % 3),
		        (ARRAY['A', 'quote " and \ backslash', E'tab\tline\nend', 'Ålesund Sør, 東京, 🚑', '<b>&amp;</b>', NULL])[1 + i % 6],
		        CASE WHEN i % 4 = 0 THEN NULL ELSE 'm' || (i % 5) END, i % 1000
		 FROM generate_series(1, 60000) AS i`,
		`INSERT INTO fact_record (record_id, occurred_at, degree_of_urgency) VALUES
		 (100001, '2000-02-29 23:59:59.999999', 'leap'), (100002, '1969-12-31 23:30', 'before 1970'),
		 (100003, '2000-01-01 00:00', 'y2k'), (100004, '1999-12-31 23:59:59', 'y2k eve')`,
		`ALTER DATABASE "` + fixture.Name + `" SET DateStyle = 'SQL, DMY'`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	db := dbtest.Open(t, fixture)
	lim := stats.Limits{Records: records.Limits{Columns: 10, Filters: 10, FilterValues: 100}, SeriesPoints: 5000}
	es := gqlpublic.Executable(gqlpublic.Config{Resolvers: gqltest.RealSeries{FakePublic: &gqltest.FakePublic{}, R: stats.NewResolver(stats.NewRepository(db, nil), lim)}})
	var queries []string
	for _, b := range []struct{ bucket, start, end string }{
		{"HOUR", "1969-12-31", "2000-01-02"}, // a refusal: too many buckets
		{"HOUR", "1999-12-30", "2000-01-02"},
		{"DAY", "1899-12-01", "1900-03-31"},
		{"DAY", "1999-12-01", "2000-03-31"},
		{"WEEK", "1899-12-01", "1902-12-31"},
		{"MONTH", "1899-01-01", "1911-12-31"},
		{"QUARTER", "1899-01-01", "1911-12-31"},
		{"YEAR", "1899-01-01", "2011-12-31"},
		{"HOUR_OF_DAY", "1899-01-01", "2011-12-31"},
		{"DAY_OF_WEEK", "1899-01-01", "2011-12-31"},
		{"MONTH_OF_YEAR", "1899-01-01", "2011-12-31"},
	} {
		args := fmt.Sprintf(`start_date: "%s", end_date: "%s", bucket: %s`, b.start, b.end, b.bucket)
		queries = append(queries,
			`{ record_series(`+args+`) { bucket column value count } }`,
			`{ record_series(`+args+`, group_by: "degree_of_urgency") { bucket column value count } }`,
			`{ record_series(`+args+`, group_by: "municipality", filters: [{column: "station", operator: EQUALS, value: "s1"}]) { count value bucket } }`,
		)
	}
	queries = append(queries,
		// 1,001 days times 6 values: past LIMITS__MAX_SERIES_POINTS (5,000 here).
		`{ record_series(start_date: "1899-12-01", end_date: "1902-08-27", bucket: DAY, group_by: "degree_of_urgency") { bucket value count } }`,
		// Nothing in the range: every bucket with 0; with group_by, no value and so no point.
		`{ record_series(start_date: "2030-01-01", end_date: "2030-01-31", bucket: DAY) { bucket count } }`,
		`{ record_series(start_date: "2030-01-01", end_date: "2030-01-31", bucket: DAY, group_by: "degree_of_urgency") { bucket value count } }`,
		`{ s: record_series(start_date: "1899-12-01", end_date: "1900-01-31", bucket: WEEK, group_by: "station") { b: bucket __typename c: count c2: count value } }`,
		`{ record_series(start_date: "1899-12-01", end_date: "1900-01-31", bucket: MONTH) { ...P } } fragment P on SeriesPoint { count ... on SeriesPoint { bucket column } }`,
		`query Q($yes: Boolean!, $no: Boolean!) { record_series(start_date: "1899-12-01", end_date: "1900-02-28", bucket: DAY, group_by: "municipality") { bucket value @skip(if: $yes) column @include(if: $no) count @include(if: $yes) } }`,
		`{ a: record_series(start_date: "1899-12-01", end_date: "1899-12-31", bucket: DAY) { bucket count } b: record_series(start_date: "1900-01-01", end_date: "1900-12-31", bucket: MONTH, group_by: "degree_of_urgency") { bucket value count } }`,
	)
	gqltest.CompareAnswers(t, es, queries)
	for _, q := range queries[:1] {
		body := fmt.Sprintf(`{"query": %q}`, q)
		if _, _, b := gqltest.Answer(t, gqltest.Server(es, true), body); !json.Valid(b) || !bytes.Contains(b, []byte(`LIMITS__MAX_SERIES_POINTS`)) {
			t.Errorf("%s: want the limit's error, got %.300s", q, b)
		}
	}
	body := fmt.Sprintf(`{"query": %q}`, queries[len(queries)-7])
	if _, _, b := gqltest.Answer(t, gqltest.Server(es, true), body); !bytes.Contains(b, []byte(`LIMITS__MAX_SERIES_POINTS`)) {
		t.Errorf("1,001 days times 6 values: want the limit's error, got %.300s", b)
	}
}
