package systemtest

// Each root field's declared tables (contract 6.13, the modules' FieldTables) are the tables its
// statements read: the database refuses a field's statements when one of its declared tables
// may not be read and only then; and with CACHE__CHANGES=replication a change to a declared
// table ends the field's kept answer while a change to any other leaves it kept.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/app"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/answercache"
)

// questionFilters reach both dimensions the record filters may join.
const questionFilters = `use_or: true, filters: [{column: "callsign", operator: IS_NULL}, {column: "gender", operator: IS_NULL}]`

// fieldQuestions ask each root field of each endpoint so that its statements read every table
// they can: the filters join the dimensions, the intervals reach first_oxygen.
var fieldQuestions = map[string]map[string]string{
	"/graphql": {
		"records_count":         `{ records_count { count } }`,
		"distinct_values":       `{ distinct_values(columns: ["callsign", "gender"], start_date: "2024-03-01", end_date: "2024-03-31", ` + questionFilters + `) { column value } }`,
		"unique_counts":         `{ unique_counts(columns: ["callsign", "gender"], start_date: "2024-03-01", end_date: "2024-03-31", ` + questionFilters + `) { column value count } }`,
		"record_series":         `{ record_series(start_date: "2024-03-01", end_date: "2024-03-31", bucket: DAY, group_by: "callsign", ` + questionFilters + `) { bucket count } }`,
		"record_stats":          `{ record_stats(start_date: "2024-03-01", end_date: "2024-03-31", measure: "age", group_by: ["callsign"], ` + questionFilters + `) { __typename } }`,
		"resources":             `{ resources { sk_resource } }`,
		"station_resources":     stationResources,
		"patients":              `{ patients { sk_patient } }`,
		"oxygens":               `{ oxygens { sk_oxygen } }`,
		"interval_stats":        `{ interval_stats(start_date: "2024-03-01", end_date: "2024-03-31", from: CALL, to: FIRST_OXYGEN, group_by: ["callsign", "gender"], ` + questionFilters + `) { __typename } }`,
		"demand_grid":           `{ demand_grid(start_date: "2024-03-01", end_date: "2024-03-31", ` + questionFilters + `) { hours } }`,
		"period_comparison":     `{ period_comparison(start_date: "2024-03-01", end_date: "2024-03-31", from: CALL, to: FIRST_OXYGEN, group_by: "callsign", ` + questionFilters + `) { current_start } }`,
		"unit_hour_utilization": `{ unit_hour_utilization(start_date: "2024-03-01", end_date: "2024-03-31", per_resource: true) { unit_hours } }`,
	},
	"/serve/graphql": {
		"main_report":         `{ main_report(start_date: "2024-03-01", end_date: "2024-03-31", ` + questionFilters + `) { total rows { record_id oxygen_routes } } }`,
		"main_report_summary": `{ main_report_summary(start_date: "2024-03-01", end_date: "2024-03-31", ` + questionFilters + `) { records } }`,
	},
	"/lookups/graphql": {
		"stations":       `{ stations { station_id } }`,
		"callsigns":      `{ callsigns }`,
		"urgencies":      `{ urgencies }`,
		"municipalities": `{ municipalities }`,
		"oxygen_routes":  `{ oxygen_routes }`,
		"genders":        `{ genders }`,
		"columns":        `{ columns { name } }`,
		"time_points":    `{ time_points { name available } }`,
	},
}

// followedTables are the tables the change source follows, fact_unit_shift included (WithMeasures).
var followedTables = []string{"dim_station", "dim_resource", "dim_patient", "fact_record", "fact_oxygen", "fact_unit_shift"}

// fieldQuestion is one root field's question.
type fieldQuestion struct{ route, field, query string }

// everyFieldQuestion is fieldQuestions in a fixed order, each field of app.EndpointTables with
// its question (a field without one fails the test).
func everyFieldQuestion(t *testing.T) []fieldQuestion {
	t.Helper()
	var out []fieldQuestion
	for route, declared := range app.EndpointTables {
		for field := range declared {
			q, ok := fieldQuestions[route][field]
			if !ok {
				t.Errorf("%s %s: no question in fieldQuestions", route, field)
				continue
			}
			out = append(out, fieldQuestion{route, field, q})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].route+out[i].field < out[j].route+out[j].field })
	return out
}

func (q fieldQuestion) declares(table string) bool {
	return slices.Contains(app.EndpointTables[q.route][q.field], table)
}

func hasErrors(r reply) bool {
	return r.status != http.StatusOK || strings.Contains(string(r.body), `"errors"`)
}

// The database says which tables a field's statements read: with SELECT on one table taken
// from the service's role, exactly the fields that declare it fail (PostgreSQL checks every
// relation a statement names when it runs it, whatever the rows).
func TestFieldTablesAreTheTablesTheirStatementsRead(t *testing.T) {
	db := servicetest.WithMeasures(t, servicetest.FixtureDB(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	db.User = "emsq_tables_" + strings.ToLower(servicetest.RandomKey()[:8])
	db.Password = servicetest.RandomKey()[:16]
	role := pgx.Identifier{db.User}.Sanitize()
	if err := db.Cluster.Exec(ctx, db.Name, "CREATE ROLE "+role+" LOGIN PASSWORD "+quoteLiteral(db.Password)+";"+
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO "+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = db.Cluster.Exec(context.Background(), db.Name, "DROP OWNED BY "+role)
		_ = db.Cluster.Exec(context.Background(), "postgres", "DROP ROLE IF EXISTS "+role)
	})
	// Every question reaches the database.
	svc := servicetest.Start(t, db, map[string]string{"CACHE__ENABLED": "false"})
	questions := everyFieldQuestion(t)
	for _, q := range questions {
		if r := gql(t, svc, q.route, q.query, nil); hasErrors(r) {
			t.Fatalf("%s %s with every table readable: HTTP %d %.500s", q.route, q.field, r.status, r.body)
		}
	}
	for _, table := range followedTables {
		ident := pgx.Identifier{table}.Sanitize()
		if err := db.Cluster.Exec(ctx, db.Name, "REVOKE SELECT ON "+ident+" FROM "+role); err != nil {
			t.Fatal(err)
		}
		for _, q := range questions {
			r := gql(t, svc, q.route, q.query, nil)
			switch failed := hasErrors(r); {
			case failed && !q.declares(table):
				t.Errorf("%s %s reads %s, which it does not declare: %.300s", q.route, q.field, table, r.body)
			case !failed && q.declares(table):
				t.Errorf("%s %s declares %s but answers without reading it", q.route, q.field, table)
			}
		}
		if err := db.Cluster.Exec(ctx, db.Name, "GRANT SELECT ON "+ident+" TO "+role); err != nil {
			t.Fatal(err)
		}
	}
}

// tableChanges commit a change to each followed table that leaves its rows as they were: the
// change source sees a committed change all the same.
var tableChanges = map[string]string{
	"dim_station":     `UPDATE dim_station SET station_name = station_name WHERE station_id = (SELECT min(station_id) FROM dim_station)`,
	"dim_resource":    `UPDATE dim_resource SET callsign = callsign WHERE sk_resource = (SELECT min(sk_resource) FROM dim_resource)`,
	"dim_patient":     `UPDATE dim_patient SET age = age WHERE sk_patient = (SELECT min(sk_patient) FROM dim_patient)`,
	"fact_record":     `UPDATE fact_record SET distance = distance WHERE record_id = (SELECT min(record_id) FROM fact_record)`,
	"fact_oxygen":     `UPDATE fact_oxygen SET route = route WHERE sk_oxygen = (SELECT min(sk_oxygen) FROM fact_oxygen)`,
	"fact_unit_shift": `INSERT INTO fact_unit_shift (resource_id, shift_start, shift_end) VALUES (999999, '2000-01-01 00:00', '2000-01-01 01:00')`,
}

// With CACHE__CHANGES=replication, a committed change to one table ends the kept answers of
// exactly the fields that declare it; every other field's answer is still from memory.
func TestFieldTablesEndTheirAnswers(t *testing.T) {
	c := pgtest.SharedWith(t, logicalCluster)
	db := servicetest.WithMeasures(t, servicetest.FixtureDBOn(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Exec(ctx, db.Name, `CREATE PUBLICATION emsquery FOR TABLE `+strings.Join(followedTables, ", ")); err != nil {
		t.Fatal(err)
	}
	svc := startFollowing(t, db, "replication")
	pool := db.Pool(t)
	questions := everyFieldQuestion(t)
	for _, table := range followedTables {
		t.Run(table, func(t *testing.T) {
			for _, q := range questions {
				servicetest.WaitFor(t, 20*time.Second, fmt.Sprintf("%s %s from memory", q.route, q.field), func() bool {
					r := gql(t, svc, q.route, q.query, nil)
					if hasErrors(r) {
						t.Fatalf("%s %s: HTTP %d %.500s", q.route, q.field, r.status, r.body)
					}
					return r.cacheStatus() == answercache.StatusHit
				})
			}
			applyChange(t, pool, tableChanges[table])
			// Past the bound every answer reflects the change: the ended ones are computed.
			time.Sleep(staleness + staleness/2)
			for _, q := range questions {
				// A bypass says nothing of the tables (no data version current for a moment,
				// on a busy machine): asked again. A miss is an answer the change ended.
				var r reply
				servicetest.WaitFor(t, 10*time.Second, fmt.Sprintf("%s %s not a bypass", q.route, q.field), func() bool {
					r = gql(t, svc, q.route, q.query, nil)
					return r.cacheStatus() != answercache.StatusBypass
				})
				switch hit := r.cacheStatus() == answercache.StatusHit; {
				case hit && q.declares(table):
					t.Errorf("%s %s reads %s, and its answer is still from memory after a change to it", q.route, q.field, table)
				case !hit && !q.declares(table):
					t.Errorf("%s %s does not read %s, and a change to it ended its answer (Cache-Status %q)", q.route, q.field, table, r.cacheStatus())
				}
			}
		})
	}
}

// Live answers follow their own tables (CACHE__CHANGES=replication): a load of fact_record
// pushes the new count to the records_count stream and computes nothing for the
// station_resources stream, which reads dim_station and dim_resource; a change to dim_station
// is the other way round.
func TestFollowLiveByTables(t *testing.T) {
	c := pgtest.SharedWith(t, logicalCluster)
	db := followedDB(t, c)
	env, target, _ := prometheusEnv(t, 0)
	env["CACHE__CHANGES"] = "replication"
	env["CACHE__MAX_STALENESS"] = "1"
	env["APP__STREAM_HEARTBEAT"] = "0.5"
	svc := servicetest.Start(t, db, env)
	waitCacheLive(t, svc)
	pool := db.Pool(t)
	recomputations := func() float64 { return scrapeValue(t, target, "emsquery_streams_recomputations_total") }
	ended := func(table string) float64 {
		return scrapeLabeled(t, target, "emsquery_cache_ended_total", `db_collection_name="`+table+`"`)
	}

	counts, refused := subscribe(t, svc, "/graphql", `subscription { records_count { count } }`, svc.Key)
	if refused != nil {
		t.Fatalf("refused: %s", refused)
	}
	defer counts.close()
	stations, refused := subscribe(t, svc, "/graphql", `subscription { station_resources { station_id station_name } }`, svc.Key)
	if refused != nil {
		t.Fatalf("refused: %s", refused)
	}
	defer stations.close()
	for name, s := range map[string]*sseStream{"records_count": counts, "station_resources": stations} {
		if _, _, ok := s.next(30 * time.Second); !ok {
			t.Fatalf("%s: no first answer", name)
		}
	}
	before := recomputations()
	endedRecords, endedStations := ended("fact_record"), ended("dim_station")

	applyChange(t, pool, `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (900101, '2024-03-10 12:00', 1, 'Central')`)
	want := countNow(t, pool, "")
	ev, _, ok := counts.next(3 * staleness)
	if !ok || !strings.Contains(ev.data, `"count":`+fmt.Sprint(want)) {
		t.Fatalf("records_count after a load of fact_record: %q (ok %v), want count %d", ev.data, ok, want)
	}
	if ev, _, ok := stations.next(3 * staleness); ok {
		t.Errorf("station_resources sent %q after a load of fact_record", ev.data)
	}
	if got := recomputations() - before; got != 1 {
		t.Errorf("%v answers computed for the streams after a load of fact_record, want 1 (records_count's)", got)
	}
	// The answer the records_count feed kept is ended, under fact_record; no dim_station answer is.
	if got := ended("fact_record") - endedRecords; got < 1 {
		t.Errorf("emsquery_cache_ended_total{fact_record} moved by %v after a load of fact_record, want at least 1", got)
	}
	if got := ended("dim_station") - endedStations; got != 0 {
		t.Errorf("emsquery_cache_ended_total{dim_station} moved by %v after a load of fact_record", got)
	}

	before = recomputations()
	applyChange(t, pool, `UPDATE dim_station SET station_name = station_name || ' (renamed)' WHERE station_id = (SELECT min(station_id) FROM dim_station)`)
	ev, _, ok = stations.next(3 * staleness)
	if !ok || !strings.Contains(ev.data, "(renamed)") {
		t.Fatalf("station_resources after a change to dim_station: %q (ok %v)", ev.data, ok)
	}
	if ev, _, ok := counts.next(3 * staleness); ok {
		t.Errorf("records_count sent %q after a change to dim_station", ev.data)
	}
	if got := recomputations() - before; got != 1 {
		t.Errorf("%v answers computed for the streams after a change to dim_station, want 1 (station_resources')", got)
	}
}

// scrapeLabeled is the sum of the series of name whose labels hold label (name="value").
func scrapeLabeled(t *testing.T, target, name, label string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("scrape %s: %q", name, line)
		}
		sum += v
	}
	return sum
}
