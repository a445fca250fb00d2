package systemtest

// Counting answers follow loads (contract 6.13): with CACHE__CHANGES=replication, the kept and
// live answers of records_count, record_series, distinct_values, unique_counts and
// main_report_summary over fact_record columns are brought up to date from the changed rows,
// with no statement on fact_record, and are byte for byte what a service without the cache
// (CACHE__ENABLED=false) computes, after random loads of INSERT, UPDATE and DELETE that bring
// new text values sorting between the known ones under an ICU collation.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// deltaCluster has wal_level = logical and pg_stat_statements, which says which statements the
// followed service ran.
var deltaCluster = pgtest.Options{Conf: logicalCluster.Conf +
	"\nshared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = 'top'\npg_stat_statements.max = 10000"}

// question is one counting question and the endpoint it goes to.
type question struct{ path, query, field string }

const (
	wide  = `start_date: "2024-01-01", end_date: "2025-12-31"`
	march = `start_date: "2024-03-01", end_date: "2024-03-31"`
)

// followedQuestions are followed questions of the five fields, in several shapes: every column
// and filter of fact_record, the filters the rows alone decide (dates, equality, lists, null
// tests, ranges of numbers and times).
var followedQuestions = []question{
	{"/graphql", `{ records_count { count } }`, "records_count"},
	{"/graphql", `{ records_count(station: "Central") { count } }`, "records_count"},
	{"/graphql", `{ records_count(station: "bravo") { count } }`, "records_count"},
	{"/graphql", `{ distinct_values(columns: ["station", "degree_of_urgency", "transported", "distance", "response_time_s", "municipality", "occurred_at", "station_id"], ` + wide + `) { column value } }`, "distinct_values"},
	{"/graphql", `{ distinct_values(columns: ["station", "station"], ` + march + `, filters: [{column: "municipality", operator: NOT_EQUALS, value: "Oslo"}]) { column value } }`, "distinct_values"},
	{"/graphql", `{ unique_counts(columns: ["station", "degree_of_urgency", "station_id", "transported"], ` + march + `, filters: [{column: "degree_of_urgency", operator: IN, values: ["A", "B", "a", "Ä"]}]) { column value count } }`, "unique_counts"},
	{"/graphql", `{ unique_counts(columns: ["municipality", "distance"], ` + wide + `, use_or: true, filters: [{column: "station", operator: EQUALS, value: "Central"}, {column: "response_time_s", operator: GREATER_THAN, value: "600"}, {column: "transported", operator: IS_NULL}]) { column value count } }`, "unique_counts"},
	{"/graphql", `{ record_series(start_date: "2024-02-25", end_date: "2024-04-05", bucket: DAY, group_by: "station") { bucket column value count } }`, "record_series"},
	{"/graphql", `{ record_series(` + wide + `, bucket: MONTH) { bucket column value count } }`, "record_series"},
	{"/graphql", `{ record_series(` + wide + `, bucket: HOUR_OF_DAY, group_by: "transported", filters: [{column: "distance", operator: LESS_THAN_OR_EQUAL, value: "50"}]) { bucket value count } }`, "record_series"},
	{"/graphql", `{ record_series(` + march + `, bucket: WEEK, group_by: "degree_of_urgency", filters: [{column: "occurred_at", operator: GREATER_THAN, value: "2024-03-05 12:00"}, {column: "station_id", operator: NOT_IN, values: ["3"]}]) { bucket value count } }`, "record_series"},
	{"/graphql", `{ record_series(` + wide + `, bucket: DAY_OF_WEEK, group_by: "distance") { bucket value count } }`, "record_series"},
	{"/graphql", `{ record_series(start_date: "2024-03-09", end_date: "2024-03-11", bucket: HOUR, group_by: "municipality", filters: [{column: "response_time_s", operator: GREATER_THAN_OR_EQUAL, value: "100"}, {column: "response_time_s", operator: LESS_THAN, value: "1000"}]) { bucket value count } }`, "record_series"},
	{"/graphql", `{ record_series(start_date: "2023-11-15", end_date: "2025-02-01", bucket: QUARTER, group_by: "station_id") { bucket value count } }`, "record_series"},
	{"/graphql", `{ record_series(` + wide + `, bucket: YEAR, filters: [{column: "transported", operator: EQUALS, value: "false"}]) { bucket count } }`, "record_series"},
	{"/graphql", `{ record_series(start_date: "2024-02-26", end_date: "2024-04-03", bucket: MONTH_OF_YEAR, group_by: "degree_of_urgency", use_or: true, filters: [{column: "distance", operator: GREATER_THAN, value: "10.5"}, {column: "degree_of_urgency", operator: IS_NULL}]) { bucket value count } }`, "record_series"},
	{"/graphql", `{ unique_counts(columns: ["occurred_at", "response_time_s"], start_date: "2024-03-10", end_date: "2024-03-20", filters: [{column: "occurred_at", operator: LESS_THAN_OR_EQUAL, value: "2024-03-15 23:59:59.5"}]) { column value count } }`, "unique_counts"},
	{"/serve/graphql", `{ main_report_summary(` + wide + `) { records distinct_resources distinct_patients average_distance average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`, "main_report_summary"},
	{"/serve/graphql", `{ main_report_summary(` + march + `, filters: [{column: "station", operator: NOT_IN, values: ["Central"]}, {column: "distance", operator: IS_NOT_NULL}]) { records distinct_resources average_distance transported_share by_station { value count } } }`, "main_report_summary"},
	{"/serve/graphql", `{ main_report_summary(start_date: "2025-01-01", end_date: "2025-01-31") { records average_response_time_s by_urgency { value count } } }`, "main_report_summary"},
	{"/serve/graphql", `{ main_report_summary(` + wide + `, use_or: true, filters: [{column: "station", operator: IN, values: ["bravo", "Bravo", "Ålesund Sør, \"Kai\" 1's"]}, {column: "transported", operator: EQUALS, value: "true"}]) { records distinct_resources distinct_patients average_distance average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`, "main_report_summary"},
}

// deltaEnv is a followed service and a service without the cache on one database, and a
// writer; the fresh service and the writer log in as a role of their own, so that the followed
// service's statements are told apart in pg_stat_statements.
type deltaEnv struct {
	db            servicetest.DB
	follow, fresh *servicetest.Service
	writer        *pgxpool.Pool
	metrics       string // the followed service's scrape target
}

func newDeltaEnv(t *testing.T, identityFull bool) *deltaEnv {
	t.Helper()
	c := pgtest.SharedWith(t, deltaCluster)
	return newDeltaEnvOn(t, c, followedDB(t, c), identityFull)
}

// newDeltaEnvOn is newDeltaEnv on database db of cluster c, which has the publication.
func newDeltaEnvOn(t *testing.T, c *pgtest.Cluster, db servicetest.DB, identityFull bool) *deltaEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	role := "fresh_" + strings.ToLower(strconv.FormatUint(rand.Uint64(), 36))
	const password = "fresh-reader"
	setup := []string{
		`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`,
		// Text under an ICU collation (root): lower case before upper case, accents after the
		// letter they carry, where the database's C.UTF-8 orders by bytes.
		`ALTER TABLE fact_record ALTER COLUMN station TYPE text COLLATE "und-x-icu"`,
		`ALTER TABLE fact_record ALTER COLUMN degree_of_urgency TYPE text COLLATE "und-x-icu"`,
		fmt.Sprintf(`CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'`, pgx.Identifier{role}.Sanitize(), password),
	}
	if identityFull {
		setup = append(setup, `ALTER TABLE fact_record REPLICA IDENTITY FULL`)
	}
	for _, q := range setup {
		if err := c.Exec(ctx, db.Name, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	e := &deltaEnv{db: db}
	port := servicetest.FreePort(t)
	e.metrics = "127.0.0.1:" + strconv.Itoa(port)
	e.follow = servicetest.Start(t, db, map[string]string{
		"CACHE__CHANGES": "replication", "CACHE__MAX_STALENESS": strconv.FormatFloat(staleness.Seconds(), 'f', -1, 64),
		"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1", "OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(port),
	})
	waitCacheLive(t, e.follow)
	other := db
	other.User, other.Password = role, password
	e.fresh = servicetest.Start(t, other, map[string]string{"CACHE__ENABLED": "false"})
	cc, err := c.ConnConfig(db.Name)
	if err != nil {
		t.Fatal(err)
	}
	cc.User, cc.Password = role, password
	pc, _ := pgxpool.ParseConfig("")
	pc.ConnConfig, pc.MaxConns = cc, 2
	if e.writer, err = pgxpool.NewWithConfig(context.Background(), pc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.writer.Close)
	return e
}

// same asks q of both services and says whether the followed answer is byte for byte the
// fresh one.
func (e *deltaEnv) same(t *testing.T, q question) (follow, fresh reply, ok bool) {
	t.Helper()
	follow = gql(t, e.follow, q.path, q.query, nil)
	fresh = gql(t, e.fresh, q.path, q.query, nil)
	if fresh.status != http.StatusOK || strings.Contains(string(fresh.body), `"errors"`) {
		t.Fatalf("fresh %s: HTTP %d %.500s", q.query, fresh.status, fresh.body)
	}
	return follow, fresh, follow.status == http.StatusOK && string(follow.body) == string(fresh.body)
}

// allSame waits until every question's followed answer is the fresh one: within the staleness
// bound after a commit (contract 6.5), and exactly.
func (e *deltaEnv) allSame(t *testing.T, qs []question, what string) {
	t.Helper()
	time.Sleep(staleness + 200*time.Millisecond)
	for _, q := range qs {
		deadline := time.Now().Add(10 * time.Second)
		for {
			follow, fresh, ok := e.same(t, q)
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s\nfollowed: HTTP %d %s\nfresh:    %s", what, q.query, follow.status, follow.body, fresh.body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// resetStatements forgets the statements run so far.
func (e *deltaEnv) resetStatements(t *testing.T) {
	t.Helper()
	if _, err := e.writer.Exec(context.Background(), `SELECT pg_stat_statements_reset()`); err != nil {
		t.Fatal(err)
	}
}

// recordStatements are the statements the followed service (the cluster's superuser) ran on
// fact_record since the last reset.
func (e *deltaEnv) recordStatements(t *testing.T) []string {
	t.Helper()
	rows, err := e.writer.Query(context.Background(), `SELECT s.query FROM pg_stat_statements AS s
WHERE s.userid = (SELECT oid FROM pg_roles WHERE rolname = $1)
  AND s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND s.query ILIKE '%fact_record%'`, e.db.User)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// counter is the followed service's counter name for field (graphql.field.name).
func (e *deltaEnv) counter(t *testing.T, name, field string) float64 {
	t.Helper()
	var n float64
	for _, m := range scrapeMetrics(t, e.metrics)[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "graphql_field_name" && l.GetValue() == field {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// Text values a load brings, some sorting between the fixture's under the ICU collation
// (where "bravo" comes before "Bravo", "Ålesund" after "Alesund" and before "Bergen").
var (
	loadStations  = []string{"Central", "North Harbour", `Ålesund Sør, "Kai" 1's`, "bravo", "Bravo", "alpha", "Alesund", "Ångström", "zulu", "Zulu", "central", "Éclair", "10 Nord", "9 Sør"}
	loadUrgencies = []string{"A", "B", "C", "D", "E", "a", "b", "Ä", "ä", "AB", "Ab"}
	loadCities    = []string{"Oslo", "Bergen", "Ålesund", "oslo", "Øya", "Aal"}
)

// loader makes random loads: batches of INSERT, UPDATE and DELETE in one transaction each.
type loader struct {
	rnd  *rand.Rand
	next int64   // the next record_id
	ids  []int64 // records the loads inserted (no fact_oxygen row refers to them)
	all  []int64 // every record
}

func newLoader(t *testing.T, e *deltaEnv, seed uint64) *loader {
	t.Helper()
	l := &loader{rnd: rand.New(rand.NewPCG(seed, seed^0x5eed)), next: 800_000}
	rows, err := e.writer.Query(context.Background(), `SELECT record_id FROM fact_record ORDER BY record_id`)
	if err != nil {
		t.Fatal(err)
	}
	if l.all, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *loader) pick(vals []string) any {
	if l.rnd.IntN(8) == 0 {
		return nil
	}
	return vals[l.rnd.IntN(len(vals))]
}

// values are random values of the record columns, in the order of recordColumns.
func (l *loader) values() []any {
	day := time.Date(2024, 2, 25, 0, 0, 0, 0, time.UTC).AddDate(0, 0, l.rnd.IntN(42))
	if l.rnd.IntN(5) == 0 {
		day = time.Date(2024, 12, 28, 0, 0, 0, 0, time.UTC).AddDate(0, 0, l.rnd.IntN(14))
	}
	at := day.Add(time.Duration(l.rnd.IntN(86400)) * time.Second)
	if l.rnd.IntN(4) == 0 {
		at = at.Add(time.Duration(l.rnd.IntN(1_000_000)) * time.Microsecond)
	}
	var distance, response, transported, resource, patient, station any
	if l.rnd.IntN(6) != 0 {
		distance = fmt.Sprintf("%d.%02d", l.rnd.IntN(120), l.rnd.IntN(100))
	}
	if l.rnd.IntN(6) != 0 {
		response = int32(l.rnd.IntN(1500))
	}
	if l.rnd.IntN(5) != 0 {
		transported = l.rnd.IntN(2) == 0
	}
	if l.rnd.IntN(5) != 0 {
		resource = int64(101 + l.rnd.IntN(8))
	}
	if l.rnd.IntN(5) != 0 {
		patient = int64(201 + l.rnd.IntN(6))
	}
	if l.rnd.IntN(6) != 0 {
		station = int32(1 + l.rnd.IntN(5))
	}
	return []any{at.Format("2006-01-02 15:04:05.999999"), station, l.pick(loadStations), resource, patient,
		l.pick(loadUrgencies), distance, response, l.pick(loadCities), transported}
}

const recordColumns = `occurred_at, station_id, station, sk_resource, sk_patient, degree_of_urgency, distance, response_time_s, municipality, transported`

// batch writes one random transaction: a few inserts, updates of any record (every column but
// the key), deletes of records the loads inserted.
func (l *loader) batch(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var ins, upd, del int
	for range 1 + l.rnd.IntN(5) {
		v := l.values()
		if _, err := tx.Exec(ctx, `INSERT INTO fact_record (record_id, `+recordColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8::numeric, $9, $10, $11)`,
			append([]any{l.next}, v...)...); err != nil {
			t.Fatal(err)
		}
		l.ids, l.all = append(l.ids, l.next), append(l.all, l.next)
		l.next++
		ins++
	}
	for range l.rnd.IntN(4) {
		id := l.all[l.rnd.IntN(len(l.all))]
		v := l.values()
		if _, err := tx.Exec(ctx, `UPDATE fact_record SET (`+recordColumns+`) = ($2, $3, $4, $5, $6, $7, $8::numeric, $9, $10, $11) WHERE record_id = $1`,
			append([]any{id}, v...)...); err != nil {
			t.Fatal(err)
		}
		upd++
	}
	// A narrower update too: one column, the others as they were.
	if l.rnd.IntN(2) == 0 {
		id := l.all[l.rnd.IntN(len(l.all))]
		if _, err := tx.Exec(ctx, `UPDATE fact_record SET station = $2 WHERE record_id = $1`, id, l.pick(loadStations)); err != nil {
			t.Fatal(err)
		}
		upd++
	}
	for range l.rnd.IntN(3) {
		if len(l.ids) == 0 {
			break
		}
		i := l.rnd.IntN(len(l.ids))
		id := l.ids[i]
		l.ids = append(l.ids[:i], l.ids[i+1:]...)
		if _, err := tx.Exec(ctx, `DELETE FROM fact_record WHERE record_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		del++
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d inserts, %d updates, %d deletes", ins, upd, del)
}

// TestFollowedCountsExact: random loads, and after each one every followed answer is byte for
// byte the fresh one, while the followed service runs no statement on fact_record; the metrics
// count the answers followed by field.
func TestFollowedCountsExact(t *testing.T) {
	e := newDeltaEnv(t, true)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	l := newLoader(t, e, seed)
	// Each question asked once: its counts are read (with their snapshot) and followed from then.
	e.allSame(t, followedQuestions, "before any load")
	before := map[string]float64{}
	for _, q := range followedQuestions {
		before[q.field] = e.counter(t, "emsquery_cache_followed_total", q.field)
	}
	e.resetStatements(t)
	const loads = 12
	for i := range loads {
		what := l.batch(t, e.writer)
		e.allSame(t, followedQuestions, fmt.Sprintf("after load %d (%s)", i+1, what))
	}
	if qs := e.recordStatements(t); len(qs) > 0 {
		t.Errorf("the followed service ran %d statements on fact_record during the loads:\n%s", len(qs), strings.Join(qs, "\n"))
	}
	for _, f := range []string{"records_count", "distinct_values", "unique_counts", "record_series", "main_report_summary"} {
		if n := e.counter(t, "emsquery_cache_followed_total", f) - before[f]; n < loads {
			t.Errorf("emsquery_cache_followed_total{graphql_field_name=%q} grew by %.0f over %d loads, want at least one answer per load", f, n, loads)
		}
	}

	// A question that cannot be followed (a filter on a column of dim_resource) is computed
	// again, as before, and right.
	other := question{"/graphql", `{ unique_counts(columns: ["station"], ` + wide + `, filters: [{column: "callsign", operator: EQUALS, value: "AMB 1-1"}]) { value count } }`, "unique_counts"}
	recomputed := e.counter(t, "emsquery_cache_recomputed_total", "unique_counts")
	e.allSame(t, []question{other}, "a filter on callsign")
	l.batch(t, e.writer)
	e.allSame(t, []question{other}, "a filter on callsign after a load")
	if n := e.counter(t, "emsquery_cache_recomputed_total", "unique_counts") - recomputed; n < 2 {
		t.Errorf("emsquery_cache_recomputed_total{graphql_field_name=\"unique_counts\"} grew by %.0f, want at least 2", n)
	}
}

// TestFollowedCountsDefaultIdentity: without REPLICA IDENTITY FULL an UPDATE or a DELETE does
// not say what the row held: the answers are computed again (a statement on fact_record), still
// exact; an INSERT alone is followed.
func TestFollowedCountsDefaultIdentity(t *testing.T) {
	e := newDeltaEnv(t, false)
	qs := []question{followedQuestions[0], followedQuestions[5], followedQuestions[7], followedQuestions[17]}
	e.allSame(t, qs, "before any load")
	e.resetStatements(t)
	ctx := context.Background()
	if _, err := e.writer.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency) VALUES (810001, '2024-03-10 12:00', 'bravo', 'a')`); err != nil {
		t.Fatal(err)
	}
	e.allSame(t, qs, "after an insert")
	if st := e.recordStatements(t); len(st) > 0 {
		t.Errorf("an insert is followed, yet the service ran on fact_record:\n%s", strings.Join(st, "\n"))
	}
	for _, change := range []string{
		`UPDATE fact_record SET station = 'Bravo', degree_of_urgency = 'B' WHERE record_id = 810001`,
		`DELETE FROM fact_record WHERE record_id = 810001`,
	} {
		e.resetStatements(t)
		recomputed := map[string]float64{}
		for _, q := range qs {
			recomputed[q.field] = e.counter(t, "emsquery_cache_recomputed_total", q.field)
		}
		if _, err := e.writer.Exec(ctx, change); err != nil {
			t.Fatal(err)
		}
		e.allSame(t, qs, change)
		if st := e.recordStatements(t); len(st) == 0 {
			t.Errorf("%s without REPLICA IDENTITY FULL: no statement on fact_record, want the answers computed again", change)
		}
		for _, q := range qs {
			if n := e.counter(t, "emsquery_cache_recomputed_total", q.field); n <= recomputed[q.field] {
				t.Errorf("%s: emsquery_cache_recomputed_total{graphql_field_name=%q} stayed at %.0f", change, q.field, n)
			}
		}
	}
}

// TestFollowedCountsLive: a load pushes the followed new counts to the live streams, the same
// as the fresh answers, without a statement on fact_record.
func TestFollowedCountsLive(t *testing.T) {
	e := newDeltaEnv(t, true)
	qs := []question{followedQuestions[1], followedQuestions[5], followedQuestions[7], followedQuestions[17]}
	streams := make([]*sseStream, len(qs))
	seen := make([]string, len(qs)) // each stream's latest answer
	for i, q := range qs {
		sub := "subscription {" + strings.TrimPrefix(q.query, "{")
		s, first := open(t, e.follow, q.path, sub, e.follow.Key)
		streams[i], seen[i] = s, first.data
		if fresh := gql(t, e.fresh, q.path, q.query, nil); first.data != string(fresh.body) {
			t.Fatalf("%s: first answer %s, fresh %s", q.query, first.data, fresh.body)
		}
	}
	e.resetStatements(t)
	l := newLoader(t, e, rand.Uint64())
	for round := range 3 {
		// A load that adds a record of every question's (Central, urgency A, in March).
		ctx := context.Background()
		if _, err := e.writer.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency, distance) VALUES ($1, '2024-03-10 12:00', 'Central', 'A', 1.25)`, int64(820000+round)); err != nil {
			t.Fatal(err)
		}
		l.batch(t, e.writer)
		time.Sleep(staleness + 200*time.Millisecond)
		for i, q := range qs {
			// A stream sends an answer when it differs from the one it sent last: the load
			// may have left this one as it was.
			want := string(gql(t, e.fresh, q.path, q.query, nil).body)
			deadline := time.Now().Add(10 * time.Second)
			for seen[i] != want {
				ev, _, ok := streams[i].next(time.Until(deadline))
				if !ok {
					t.Fatalf("round %d, %s: no answer %s on the stream (last %s)", round, q.query, want, seen[i])
				}
				seen[i] = ev.data
			}
		}
	}
	if st := e.recordStatements(t); len(st) > 0 {
		t.Errorf("the live answers ran statements on fact_record:\n%s", strings.Join(st, "\n"))
	}
}
