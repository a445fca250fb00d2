package patients_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	patientsQuery = `{ patients { sk_patient age date_of_birth gender weight } }`
	oxygensQuery  = `query($f: [String!]) { oxygens(distinct_fields: $f) { sk_oxygen record_id route flow_rate administered_at } }`
)

// oxygenColumns are fact_oxygen's columns, read from the database's catalogue: the names
// distinct_fields must accept.
func oxygenColumns(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT column_name::text FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = 'fact_oxygen' ORDER BY ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(cols) == 0 {
		t.Fatal("fact_oxygen has no columns")
	}
	return cols
}

// TestPatientsOnFixture: every dim_patient row ordered by sk_patient, NULLs as null.
func TestPatientsOnFixture(t *testing.T) {
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, nil)

	want := expectedPatients(t, pool)
	allNull := false
	for _, p := range want {
		allNull = allNull || servicetest.IsNull(p["age"]) && servicetest.IsNull(p["date_of_birth"]) && servicetest.IsNull(p["gender"]) && servicetest.IsNull(p["weight"])
	}
	if !allNull {
		t.Fatal("the fixture should hold a patient with every nullable column NULL")
	}
	servicetest.AssertJSON(t, "patients", svc.Field(t, "/graphql", patientsQuery, nil, "patients"), want)
}

// TestOxygensOnFixture: all rows without distinct_fields; with them, one object per distinct
// combination ordered by the columns as given, the other fields null; repeated names answered
// once; unknown names refused without touching the tables.
func TestOxygensOnFixture(t *testing.T) {
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, nil)
	ctx := context.Background()

	all := expectedOxygens(t, pool, nil)
	if len(all) == 0 {
		t.Fatal("fixture holds no oxygen rows")
	}

	t.Run("all rows", func(t *testing.T) {
		for _, vars := range []map[string]any{nil, {"f": nil}, {"f": []string{}}} {
			servicetest.AssertJSON(t, fmt.Sprintf("oxygens with %v", vars), svc.Field(t, "/graphql", oxygensQuery, vars, "oxygens"), all)
		}
		// The argument omitted altogether, not just null.
		got := svc.Field(t, "/graphql", `{ oxygens { sk_oxygen record_id route flow_rate administered_at } }`, nil, "oxygens")
		servicetest.AssertJSON(t, "oxygens without argument", got, all)
	})

	cases := [][]string{
		{"route"},
		{"route", "flow_rate"},
		{"flow_rate", "route"},
		{"route", "route"},
		{"route", "flow_rate", "route", "flow_rate"},
		{"administered_at", "route"},
	}
	for _, c := range oxygenColumns(t, pool) {
		cases = append(cases, []string{c})
	}
	for _, fields := range cases {
		t.Run(strings.Join(fields, ","), func(t *testing.T) {
			want := expectedOxygens(t, pool, fields)
			got := svc.Field(t, "/graphql", oxygensQuery, map[string]any{"f": fields}, "oxygens")
			servicetest.AssertJSON(t, "oxygens", got, want)
		})
	}

	t.Run("route answers each route once, NULL last", func(t *testing.T) {
		got := svc.Field(t, "/graphql", `{ oxygens(distinct_fields: ["route"]) { route sk_oxygen } }`, nil, "oxygens")
		var rows []struct {
			Route    *string `json:"route"`
			SkOxygen *int64  `json:"sk_oxygen"`
		}
		if err := json.Unmarshal(got, &rows); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i, r := range rows {
			if r.SkOxygen != nil {
				t.Errorf("row %d: sk_oxygen = %d, want null", i, *r.SkOxygen)
			}
			if r.Route == nil {
				if i != len(rows)-1 {
					t.Errorf("null route at %d of %d, want last", i, len(rows))
				}
				continue
			}
			if seen[*r.Route] {
				t.Errorf("route %q twice", *r.Route)
			}
			seen[*r.Route] = true
		}
		if len(rows) == 0 || rows[len(rows)-1].Route != nil {
			t.Errorf("the fixture's NULL route is missing or not last: %s", got)
		}
	})

	countRows := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM fact_oxygen`).Scan(&n); err != nil {
			t.Fatalf("fact_oxygen after bad input: %v", err)
		}
		return n
	}
	before := countRows()
	accepted := oxygenColumns(t, pool)
	for _, bad := range [][]string{
		{"unknown"},
		{"route; DROP TABLE fact_oxygen"},
		{"route", "route; DROP TABLE fact_oxygen; --"},
		{`route" FROM fact_oxygen; DROP TABLE fact_oxygen; --`},
		{"Route"},
		{""},
		{"station"},
	} {
		t.Run("refused "+fmt.Sprintf("%q", bad), func(t *testing.T) {
			resp := svc.GraphQL(t, "/graphql", oxygensQuery, map[string]any{"f": bad})
			if len(resp.Errors) != 1 {
				t.Fatalf("want one error, got %s", resp.Raw)
			}
			e := resp.Errors[0]
			if e.Code() != "BAD_USER_INPUT" {
				t.Errorf("code %q, want BAD_USER_INPUT: %s", e.Code(), resp.Raw)
			}
			name := bad[len(bad)-1]
			if !strings.Contains(e.Message, fmt.Sprintf("%q", name)) {
				t.Errorf("message does not name %q: %s", name, e.Message)
			}
			for _, c := range accepted {
				if !strings.Contains(e.Message, c) {
					t.Errorf("message does not list accepted name %s: %s", c, e.Message)
				}
			}
			if string(resp.Data) != "null" {
				t.Errorf("data = %s, want null", resp.Data)
			}
		})
	}
	if after := countRows(); after != before {
		t.Errorf("fact_oxygen has %d rows after the bad requests, had %d", after, before)
	}
	servicetest.AssertJSON(t, "oxygens after bad input", svc.Field(t, "/graphql", oxygensQuery, nil, "oxygens"), expectedOxygens(t, pool, nil))
}

// TestEmptyDatabase: with the schema and no rows every list is [].
func TestEmptyDatabase(t *testing.T) {
	db := servicetest.NewDB(t)
	svc := servicetest.Start(t, db, nil)
	resp := svc.GraphQL(t, "/graphql", `{
  patients { sk_patient }
  oxygens { sk_oxygen }
  distinct: oxygens(distinct_fields: ["route", "flow_rate"]) { route flow_rate }
}`, nil)
	var data map[string]json.RawMessage
	resp.DataInto(t, &data)
	for _, f := range []string{"patients", "oxygens", "distinct"} {
		if string(data[f]) != "[]" {
			t.Errorf("%s on an empty database = %s, want []", f, data[f])
		}
	}
}

// TestManyRows: a generated data set large enough to cross every internal chunk size, with
// NULLs, empty strings, many distinct texts, fractional seconds and a database whose DateStyle
// is not ISO (the service's dates must not depend on it).
func TestManyRows(t *testing.T) {
	const patients = 200_000
	db := servicetest.NewDB(t)
	pool := db.Pool(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO dim_patient (sk_patient, age, date_of_birth, gender, weight)
SELECT i,
       CASE WHEN i % 7 = 0 THEN NULL ELSE i % 110 END,
       CASE WHEN i % 5 = 0 THEN NULL ELSE date '1920-01-01' + (i % 36500) END,
       CASE i % 6 WHEN 0 THEN NULL WHEN 1 THEN 'female' WHEN 2 THEN 'male' WHEN 3 THEN 'other'
                  WHEN 4 THEN '' ELSE 'g' || (i % 1000) END,
       CASE WHEN i % 3 = 0 THEN NULL ELSE ((i % 2000) / 10.0)::numeric(5,1) END
FROM generate_series(1, ` + fmt.Sprint(patients) + `) AS i`,
		`INSERT INTO dim_station (station_id, station_name) VALUES (1, 'S')`,
		`INSERT INTO fact_record (record_id, occurred_at) SELECT i, timestamp '2024-01-01' + i * interval '1 minute' FROM generate_series(1, 100) AS i`,
		`INSERT INTO fact_oxygen (sk_oxygen, record_id, route, flow_rate, administered_at)
SELECT i, 1 + i % 100,
       CASE WHEN i % 9 = 0 THEN NULL WHEN i % 9 = 1 THEN '' ELSE 'route ' || (i % 400) END,
       CASE WHEN i % 4 = 0 THEN NULL ELSE ((i % 500) / 10.0)::numeric(4,1) END,
       CASE WHEN i % 8 = 0 THEN NULL ELSE timestamp '2024-03-01' + i * interval '1.25 second' END
FROM generate_series(1, 5000) AS i`,
		`ALTER DATABASE ` + pgx.Identifier{db.Name}.Sanitize() + ` SET DateStyle = 'SQL, DMY'`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	svc := servicetest.Start(t, db, nil)

	got := svc.Field(t, "/graphql", patientsQuery, nil, "patients")
	servicetest.AssertJSON(t, "patients", got, expectedPatients(t, pool))
	if !strings.Contains(string(got), `"gender":""`) || !strings.Contains(string(got), `"gender":null`) {
		t.Error("empty-string and NULL genders must both survive, distinctly")
	}

	for _, fields := range [][]string{nil, {"route"}, {"administered_at"}, {"flow_rate", "route"}} {
		got := svc.Field(t, "/graphql", oxygensQuery, map[string]any{"f": fields}, "oxygens")
		servicetest.AssertJSON(t, fmt.Sprintf("oxygens %v", fields), got, expectedOxygens(t, pool, fields))
	}
}

// expectedPatients reads dim_patient the way the contract describes patients.
func expectedPatients(t *testing.T, pool *pgxpool.Pool) []map[string]any {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT sk_patient, age, to_char(date_of_birth, 'YYYY-MM-DD'), gender, weight::float8
FROM dim_patient ORDER BY sk_patient`)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (map[string]any, error) {
		var (
			sk        int64
			age       *int64
			born, sex *string
			weight    *float64
		)
		err := row.Scan(&sk, &age, &born, &sex, &weight)
		return map[string]any{"sk_patient": sk, "age": age, "date_of_birth": born, "gender": sex, "weight": weight}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// administeredAtText is PostgreSQL's ISO text of a timestamp whatever the session's DateStyle:
// seconds always, a fraction (trailing zeros cut) only when there is one.
const administeredAtText = `to_char(administered_at, 'YYYY-MM-DD HH24:MI:SS') ||
       CASE WHEN date_trunc('second', administered_at) = administered_at THEN ''
            ELSE rtrim(to_char(administered_at, '.US'), '0') END`

// expectedOxygens computes oxygens(distinct_fields: fields) in SQL. fields must be columns of
// fact_oxygen (the test's own names, checked against the catalogue).
func expectedOxygens(t *testing.T, pool *pgxpool.Pool, fields []string) []map[string]any {
	t.Helper()
	cols := oxygenColumns(t, pool)
	var q string
	var distinct []string
	if len(fields) == 0 {
		q = `SELECT sk_oxygen, record_id, route, flow_rate::float8, ` + administeredAtText + ` FROM fact_oxygen ORDER BY sk_oxygen`
	} else {
		for _, f := range fields {
			known := false
			for _, c := range cols {
				known = known || c == f
			}
			if !known {
				t.Fatalf("test bug: %q is not a column of fact_oxygen", f)
			}
			dup := false
			for _, d := range distinct {
				dup = dup || d == f
			}
			if !dup {
				distinct = append(distinct, f)
			}
		}
		quoted := make([]string, len(distinct))
		for i, d := range distinct {
			quoted[i] = pgx.Identifier{d}.Sanitize()
		}
		// Distinct rows first, then the same five output columns as above, NULL where not chosen.
		sel := func(col, expr string) string {
			for _, d := range distinct {
				if d == col {
					return expr
				}
			}
			return "NULL"
		}
		q = fmt.Sprintf(`SELECT %s, %s, %s, %s, %s FROM (SELECT DISTINCT %s FROM fact_oxygen) AS d ORDER BY %s`,
			sel("sk_oxygen", "sk_oxygen"), sel("record_id", "record_id"), sel("route", "route"),
			sel("flow_rate", "flow_rate::float8"), sel("administered_at", administeredAtText),
			strings.Join(quoted, ", "), strings.Join(quoted, " NULLS LAST, ")+" NULLS LAST")
	}
	rows, err := pool.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	want, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (map[string]any, error) {
		var (
			sk, record *int64
			route, at  *string
			flow       *float64
		)
		err := row.Scan(&sk, &record, &route, &flow, &at)
		return map[string]any{"sk_oxygen": sk, "record_id": record, "route": route, "flow_rate": flow, "administered_at": at}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// TestKeysetPaging: walking patients and oxygens page by page, each time with after set to the
// last key received, returns every row exactly once, in order, whatever the keys (negative,
// zero, gaps); limit and after alone mean what they say; the limits are refused by name.
func TestKeysetPaging(t *testing.T) {
	db := servicetest.NewDB(t)
	pool := db.Pool(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO dim_patient (sk_patient, age, gender)
SELECT CASE WHEN i <= 3 THEN i - 3 ELSE i * 5 + i % 3 END, i % 90, CASE WHEN i % 4 = 0 THEN NULL ELSE 'g' || (i % 3) END
FROM generate_series(-2, 1234) AS i WHERE i % 11 <> 5`,
		`INSERT INTO dim_station (station_id, station_name) VALUES (1, 'S')`,
		`INSERT INTO fact_record (record_id, occurred_at) VALUES (1, '2024-01-01')`,
		`INSERT INTO fact_oxygen (sk_oxygen, record_id, route, flow_rate)
SELECT i * 2, 1, CASE WHEN i % 3 = 0 THEN NULL ELSE 'r' || (i % 5) END, (i % 40) / 2.0 FROM generate_series(1, 357) AS i`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	svc := servicetest.Start(t, db, map[string]string{"LIMITS__MAX_PAGE_SIZE": "100"})

	type page struct {
		field, query, key string
		want              []map[string]any
	}
	for _, p := range []page{
		{"patients", `query($limit: Int, $after: Int) { patients(limit: $limit, after: $after) { sk_patient age date_of_birth gender weight } }`, "sk_patient", expectedPatients(t, pool)},
		{"oxygens", `query($limit: Int, $after: Int) { oxygens(limit: $limit, after: $after) { sk_oxygen record_id route flow_rate administered_at } }`, "sk_oxygen", expectedOxygens(t, pool, nil)},
		{"oxygens with empty distinct_fields", `query($limit: Int, $after: Int) { oxygens(distinct_fields: [], limit: $limit, after: $after) { sk_oxygen record_id route flow_rate administered_at } }`, "sk_oxygen", expectedOxygens(t, pool, nil)},
	} {
		for _, limit := range []int{1, 7, 100} {
			t.Run(fmt.Sprintf("%s by %d", p.field, limit), func(t *testing.T) {
				field := strings.Fields(p.field)[0]
				var all []json.RawMessage
				vars := map[string]any{"limit": limit}
				for pages := 0; ; pages++ {
					if pages > len(p.want)+1 {
						t.Fatal("the walk does not end")
					}
					var rows []json.RawMessage
					if err := json.Unmarshal(svc.Field(t, "/graphql", p.query, vars, field), &rows); err != nil {
						t.Fatal(err)
					}
					if len(rows) > limit {
						t.Fatalf("page of %d rows with limit %d", len(rows), limit)
					}
					if len(rows) == 0 {
						break
					}
					all = append(all, rows...)
					var last map[string]any
					if err := json.Unmarshal(rows[len(rows)-1], &last); err != nil {
						t.Fatal(err)
					}
					vars["after"] = int(last[p.key].(float64))
				}
				b, _ := json.Marshal(all)
				servicetest.AssertJSON(t, p.field+" walked", b, p.want)
			})
		}
	}

	t.Run("after alone, limit alone", func(t *testing.T) {
		want := expectedPatients(t, pool)
		var after []map[string]any
		for _, p := range want {
			if p["sk_patient"].(int64) > 300 {
				after = append(after, p)
			}
		}
		if len(after) <= 100 || len(after) == len(want) {
			t.Fatalf("test check: %d of %d patients after 300", len(after), len(want))
		}
		servicetest.AssertJSON(t, "after 300", svc.Field(t, "/graphql", `{ patients(after: 300) { sk_patient age date_of_birth gender weight } }`, nil, "patients"), after)
		servicetest.AssertJSON(t, "first 5", svc.Field(t, "/graphql", `{ patients(limit: 5) { sk_patient age date_of_birth gender weight } }`, nil, "patients"), want[:5])
		got := svc.Field(t, "/graphql", `{ patients(after: 2147483647) { sk_patient } oxygens(after: 2147483647, limit: 3) { sk_oxygen } }`, nil, "patients")
		if string(got) != "[]" {
			t.Errorf("after the last key: %s", got)
		}
	})

	for _, tc := range []struct{ name, query, want string }{
		{"limit 0", `{ patients(limit: 0) { sk_patient } }`, "limit: 0"},
		{"negative limit", `{ oxygens(limit: -1) { sk_oxygen } }`, "limit: -1"},
		{"limit over the setting", `{ patients(limit: 101) { sk_patient } }`, "LIMITS__MAX_PAGE_SIZE=100"},
		{"oxygens limit over the setting", `{ oxygens(limit: 101, after: 3) { sk_oxygen } }`, "LIMITS__MAX_PAGE_SIZE=100"},
		{"distinct_fields with limit", `{ oxygens(distinct_fields: ["route"], limit: 10) { route } }`, "distinct_fields"},
		{"distinct_fields with after", `{ oxygens(distinct_fields: ["route"], after: 10) { route } }`, "distinct_fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := svc.GraphQL(t, "/graphql", tc.query, nil)
			if len(resp.Errors) != 1 || resp.Errors[0].Code() != "BAD_USER_INPUT" || !strings.Contains(resp.Errors[0].Message, tc.want) {
				t.Errorf("want a BAD_USER_INPUT naming %q: %s", tc.want, resp.Raw)
			}
		})
	}
}
