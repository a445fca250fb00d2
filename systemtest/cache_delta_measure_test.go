//go:build measure

package systemtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/demodata"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// TestFollowedCountsMeasure measures what following saves: on the demo data
// (FOLLOW_MEASURE_RECORDS records, default 300,000) with CACHE__CHANGES=replication, each
// counting question is asked once (its counts read), then loads of 1,000 new records follow;
// after each load every question is answered again, by the followed service from its counts
// and by a service without the cache from the database. It logs, per question, the answer's
// time both ways and the database time the fresh service spent (pg_stat_statements), and fails
// when an answer differs or the followed service ran a statement on fact_record.
//
//	go test -tags measure -count=1 -timeout 30m -run '^TestFollowedCountsMeasure$' -v ./systemtest
func TestFollowedCountsMeasure(t *testing.T) {
	records := 300_000
	if s := os.Getenv("FOLLOW_MEASURE_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		records = n
	}
	c := pgtest.SharedWith(t, deltaCluster)
	db := servicetest.NewDBOn(t, c)
	ctx := context.Background()
	cfg, err := c.ConnConfig(db.Name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := demodata.New(demodata.Config{Records: records, Seed: demodata.DefaultSeed})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := demodata.Load(ctx, conn, d, demodata.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	t.Logf("%d records loaded in %s", records, time.Since(start).Round(time.Second))
	if err := c.Exec(ctx, db.Name, `CREATE PUBLICATION emsquery FOR TABLE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen`); err != nil {
		t.Fatal(err)
	}
	e := newDeltaEnvOn(t, c, db, true)

	const year = `start_date: "2024-01-01", end_date: "2024-12-31"`
	qs := []question{
		{"/graphql", `{ records_count { count } }`, "records_count"},
		{"/graphql", `{ unique_counts(columns: ["station", "degree_of_urgency", "municipality", "transported"], ` + year + `) { column value count } }`, "unique_counts"},
		{"/graphql", `{ distinct_values(columns: ["station", "municipality", "response_time_s"], ` + year + `, filters: [{column: "transported", operator: EQUALS, value: "true"}]) { column value } }`, "distinct_values"},
		{"/graphql", `{ record_series(` + year + `, bucket: DAY, group_by: "degree_of_urgency") { bucket value count } }`, "record_series"},
		// Without distinct_patients: a summary's patients are about as many as its records,
		// more than a followed question may count (follow.MaxViewKeys).
		{"/serve/graphql", `{ main_report_summary(` + year + `) { records distinct_resources average_distance average_response_time_s transported transported_share by_urgency { value count } by_station { value count } } }`, "main_report_summary"},
	}
	timed := func(f func() reply) (reply, time.Duration) {
		s := time.Now()
		r := f()
		return r, time.Since(s)
	}
	for _, q := range qs {
		_, first := timed(func() reply { return gql(t, e.follow, q.path, q.query, nil) })
		t.Logf("%-20s first answer (counts read): %s", q.field, first.Round(time.Millisecond))
	}
	var maxID int64
	if err := e.writer.QueryRow(ctx, `SELECT max(record_id) FROM fact_record`).Scan(&maxID); err != nil {
		t.Fatal(err)
	}
	const loads = 3
	sum := map[string][2]time.Duration{}
	var freshDB float64
	for i := range loads {
		if _, err := e.writer.Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station_id, station, sk_resource, sk_patient, degree_of_urgency, distance, response_time_s, municipality, transported)
SELECT $1 + row_number() OVER (ORDER BY record_id), occurred_at + interval '1 minute', station_id, station, sk_resource, sk_patient, degree_of_urgency, distance, response_time_s, municipality, transported
FROM (SELECT * FROM fact_record WHERE record_id <= $2 ORDER BY record_id DESC LIMIT 1000) AS s`, maxID+int64(i)*1000, maxID); err != nil {
			t.Fatal(err)
		}
		e.resetStatements(t)
		time.Sleep(staleness + 200*time.Millisecond)
		for _, q := range qs {
			f, tf := timed(func() reply { return gql(t, e.follow, q.path, q.query, nil) })
			g, tg := timed(func() reply { return gql(t, e.fresh, q.path, q.query, nil) })
			if string(f.body) != string(g.body) {
				t.Fatalf("load %d, %s: followed %.300s, fresh %.300s", i+1, q.field, f.body, g.body)
			}
			s := sum[q.field]
			sum[q.field] = [2]time.Duration{s[0] + tf, s[1] + tg}
		}
		if st := e.recordStatements(t); len(st) > 0 {
			t.Errorf("load %d: the followed service ran on fact_record:\n%s", i+1, strings.Join(st, "\n"))
		}
		var ms float64
		if err := e.writer.QueryRow(ctx, `SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements
WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND query ILIKE '%fact_record%' AND query NOT ILIKE '%INSERT%'`).Scan(&ms); err != nil {
			t.Fatal(err)
		}
		freshDB += ms
	}
	var b strings.Builder
	fmt.Fprintf(&b, "after each of %d loads of 1,000 records, on %d records (mean per load):\n", loads, records)
	fmt.Fprintf(&b, "%-20s %12s %12s\n", "field", "followed", "recomputed")
	for _, q := range qs {
		s := sum[q.field]
		fmt.Fprintf(&b, "%-20s %12s %12s\n", q.field, (s[0] / loads).Round(10*time.Microsecond), (s[1] / loads).Round(10*time.Microsecond))
	}
	fmt.Fprintf(&b, "database time on fact_record per load: followed 0 statements; recomputed %.1f ms", freshDB/loads)
	t.Log(b.String())
}
