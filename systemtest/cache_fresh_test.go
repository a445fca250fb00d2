package systemtest

// Freshness of answers from memory (contract 6.5): every committed change to the tables (INSERT,
// UPDATE, DELETE, a table replaced by rename, TRUNCATE) is in every answer that starts more than
// CACHE__MAX_STALENESS after the commit, on a primary and on a streaming hot standby (after it
// replayed the change), and an answer never goes back to before the change once it showed it;
// a NOTIFY makes answers fresh at once.

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/answercache"
)

// staleness is CACHE__MAX_STALENESS in the freshness tests.
const staleness = time.Second

// change is one kind of committed change, and a question whose answer it changes: the records
// of one station (all when station is empty).
type change struct {
	name    string
	sql     string // one transaction on the primary
	station string
}

// changes are applied one after the other to the fixture, each changing its question's answer.
var changes = []change{
	{"INSERT", `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (900001, '2024-03-10 12:00', 1, 'Central')`, ""},
	{"UPDATE", `UPDATE fact_record SET station = 'North Harbour', station_id = 2 WHERE record_id = 3`, "Central"},
	{"DELETE", `DELETE FROM fact_record WHERE record_id = 900001`, ""},
	{"table replaced by rename", `CREATE TABLE fact_record_new (LIKE fact_record INCLUDING ALL);
		INSERT INTO fact_record_new SELECT * FROM fact_record WHERE record_id % 2 = 0;
		ALTER TABLE fact_record RENAME TO fact_record_old;
		ALTER TABLE fact_record_new RENAME TO fact_record`, ""},
	{"TRUNCATE", `TRUNCATE fact_record CASCADE`, ""},
}

const stationCount = `query StationCount($s: String) { records_count(station: $s) { count } }`

func countVars(station string) map[string]any {
	if station == "" {
		return nil
	}
	return map[string]any{"s": station}
}

// countNow is the question's answer computed by SQL on pool.
func countNow(t *testing.T, pool *pgxpool.Pool, station string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM fact_record WHERE $1 = '' OR station = $1`, station).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// countReply is records_count's count in a reply.
func countReply(t *testing.T, r reply) int64 {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("HTTP %d: %s", r.status, r.body)
	}
	return countOf(t, &servicetest.GraphQLResponse{Status: r.status, Data: dataOf(t, r.body), Raw: r.body})
}

// keptThen waits until the question's answer comes from memory and checks it is want.
func keptThen(t *testing.T, svc *servicetest.Service, station string, want int64) {
	t.Helper()
	var r reply
	servicetest.WaitFor(t, 20*time.Second, "answer from memory", func() bool {
		r = gql(t, svc, "/graphql", stationCount, countVars(station))
		return r.cacheStatus() == answercache.StatusHit
	})
	if got := countReply(t, r); got != want {
		t.Fatalf("answer from memory %d, want %d", got, want)
	}
}

// freshWithin asks the question again and again from the moment the change became visible
// (visible) until past the bound, and fails on an answer from before the change that started
// after visible+bound, or on one from before the change after one from after it.
func freshWithin(t *testing.T, svc *servicetest.Service, station string, before, after int64, visible time.Time, bound time.Duration) {
	t.Helper()
	if before == after {
		t.Fatalf("the change leaves the answer at %d", before)
	}
	deadline := visible.Add(bound)
	var firstNew time.Duration = -1
	for {
		start := time.Now()
		got := countReply(t, gql(t, svc, "/graphql", stationCount, countVars(station)))
		switch {
		case got == after:
			if firstNew < 0 {
				firstNew = start.Sub(visible)
			}
		case got != before:
			t.Fatalf("answer %d, neither %d (before the change) nor %d (after)", got, before, after)
		case firstNew >= 0:
			t.Fatalf("answer %d from before the change after %d from after it: it went back in time", before, after)
		case start.After(deadline):
			t.Fatalf("answer %d from before the change in a request that started %s after it became visible; bound %s",
				got, start.Sub(visible).Round(time.Millisecond), bound)
		}
		if start.After(deadline.Add(200 * time.Millisecond)) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("first answer after the change in a request that started %s after it", firstNew.Round(time.Millisecond))
}

// applyChange runs a change's SQL in one transaction on the primary.
func applyChange(t *testing.T, primary *pgxpool.Pool, sql string) {
	t.Helper()
	ctx := context.Background()
	tx, err := primary.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, stmt := range strings.Split(sql, ";") {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCacheFreshAfterEveryKindOfChange(t *testing.T) {
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": strconv.FormatFloat(staleness.Seconds(), 'f', -1, 64)})
	waitCacheLive(t, svc)
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			before := countNow(t, pool, c.station)
			keptThen(t, svc, c.station, before)
			applyChange(t, pool, c.sql)
			visible := time.Now() // the commit returned
			freshWithin(t, svc, c.station, before, countNow(t, pool, c.station), visible, staleness)
		})
	}
}

func TestCacheFreshOnAHotStandby(t *testing.T) {
	primaryCluster := pgtest.New(t, pgtest.Options{})
	db := servicetest.FixtureDBOn(t, primaryCluster)
	primary := db.Pool(t)
	standbyCluster := pgtest.NewStandby(t, primaryCluster)
	ctx := context.Background()
	if err := standbyCluster.WaitForReplay(ctx, primaryCluster); err != nil {
		t.Fatal(err)
	}
	standby := db
	standby.Cluster, standby.Port = standbyCluster, standbyCluster.Port()
	svc := servicetest.Start(t, standby, map[string]string{"CACHE__MAX_STALENESS": strconv.FormatFloat(staleness.Seconds(), 'f', -1, 64)})
	waitCacheLive(t, svc)
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			before := countNow(t, primary, c.station)
			keptThen(t, svc, c.station, before)
			applyChange(t, primary, c.sql)
			if err := standbyCluster.WaitForReplay(ctx, primaryCluster); err != nil {
				t.Fatal(err)
			}
			visible := time.Now() // the standby has replayed the change
			freshWithin(t, svc, c.station, before, countNow(t, primary, c.station), visible, staleness)
		})
	}
	servicetest.WaitFor(t, 5*time.Second, "the line that says notifications cannot be received on a standby", func() bool {
		return strings.Contains(svc.Output(), "hot standby cannot listen")
	})
}

// On a primary, what moves the write-ahead log without changing data (VACUUM, a checkpoint, a
// switch to a new WAL file) leaves the answers in memory: the data version is the snapshot of the
// writing transactions, not the WAL position. A change after them still shows within the bound.
// The cluster is the test's own: the snapshot is the whole cluster's, and other tests write to
// the shared one.
func TestCacheKeptWhileNothingChanges(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDBOn(t, pgtest.New(t, pgtest.Options{}))
	pool := db.Pool(t)
	ctx := context.Background()
	// Statistics first, so that autovacuum has no ANALYZE left to do (an ANALYZE writes its
	// statistics in a transaction of its own, a change like any other).
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": strconv.FormatFloat(staleness.Seconds(), 'f', -1, 64)})
	waitCacheLive(t, svc)
	before := countNow(t, pool, "")
	keptThen(t, svc, "", before)
	var walBefore, walAfter string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&walBefore); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"VACUUM fact_record", "CHECKPOINT", "SELECT pg_switch_wal()"} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&walAfter); err != nil {
		t.Fatal(err)
	}
	if walAfter == walBefore {
		t.Fatalf("the WAL position stayed at %s: the test shows nothing", walBefore)
	}
	time.Sleep(2 * staleness) // several polls
	for i := range 3 {
		r := gql(t, svc, "/graphql", stationCount, nil)
		if got := countReply(t, r); got != before || r.cacheStatus() != answercache.StatusHit {
			t.Fatalf("request %d after VACUUM, CHECKPOINT and pg_switch_wal: %d %q; want %d from memory", i+1, got, r.cacheStatus(), before)
		}
	}
	c := changes[0] // an INSERT
	applyChange(t, pool, c.sql)
	visible := time.Now()
	freshWithin(t, svc, c.station, before, countNow(t, pool, c.station), visible, staleness)
}

// With a bound of an hour, an answer stays in memory after a change (the data version is read
// every half hour); a NOTIFY on the channel makes the next answer fresh.
func TestCacheFreshAtOnceAfterNotify(t *testing.T) {
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": "3600"})
	waitCacheLive(t, svc)
	for i, notify := range []string{`NOTIFY emsquery_refresh`, `SELECT pg_notify('emsquery_refresh', 'load 42 done')`} {
		station := ""
		if i == 1 {
			station = "North Harbour"
		}
		before := countNow(t, pool, station)
		keptThen(t, svc, station, before)
		applyChange(t, pool, `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (`+strconv.Itoa(910000+i)+`, '2024-03-10 12:00', 2, 'North Harbour')`)
		after := countNow(t, pool, station)
		r := gql(t, svc, "/graphql", stationCount, countVars(station))
		if got := countReply(t, r); got != before || r.cacheStatus() != answercache.StatusHit {
			t.Fatalf("right after the change (no NOTIFY yet): %d %q; want %d from memory", got, r.cacheStatus(), before)
		}
		notified := strings.Count(svc.Output(), "cache: notification received")
		if _, err := pool.Exec(context.Background(), notify); err != nil {
			t.Fatal(err)
		}
		// The notification reaches the service a moment after the NOTIFY's commit returns.
		servicetest.WaitFor(t, 10*time.Second, "notification logged", func() bool {
			return strings.Count(svc.Output(), "cache: notification received") > notified
		})
		r = gql(t, svc, "/graphql", stationCount, countVars(station))
		if got := countReply(t, r); got != after || r.cacheStatus() != answercache.StatusMiss {
			t.Errorf("after %s: %d %q; want %d computed", notify, got, r.cacheStatus(), after)
		}
	}
}

// With several hosts the cache watches each (contract 6.5, 6.6): here the service starts while
// the standby is down, so under prefer-standby it first reads from the primary, and then the
// standby takes the reads back. With the standby's replay paused, a change on the primary makes
// the primary's version move while the standby still answers as before: answers stay the old
// ones (the standby has not replayed the change) and once the standby replays it, they are
// fresh within the bound. A watch on the primary alone would keep the stale answer for good.
func TestCacheFreshWithSeveralHosts(t *testing.T) {
	t.Parallel()
	primary := pgtest.New(t, pgtest.Options{})
	db := servicetest.FixtureDBOn(t, primary)
	pool := db.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	standby := pgtest.NewStandby(t, primary)
	if err := standby.WaitForReplay(ctx, primary); err != nil {
		t.Fatal(err)
	}
	if err := standby.Stop(); err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Start(t, db, map[string]string{
		"DATABASE__HOST":                 db.Host + "," + standby.Host(),
		"DATABASE__PORT":                 strconv.Itoa(db.Port) + "," + strconv.Itoa(standby.Port()),
		"DATABASE__TARGET_SESSION_ATTRS": "prefer-standby",
		// One connection, released after every request: it goes back to the standby soon.
		"DATABASE__POOL_SIZE":    "1",
		"DATABASE__MAX_OVERFLOW": "0",
		"CACHE__MAX_STALENESS":   strconv.Itoa(int(staleness / time.Second)),
	})
	if got, want := countReply(t, gql(t, svc, "/graphql", stationCount, nil)), countNow(t, pool, ""); got != want {
		t.Fatalf("records_count %d on the primary, want %d", got, want)
	}
	if err := standby.Start(); err != nil {
		t.Fatal(err)
	}
	// Questions never asked before are computed, so the connection is used and released.
	i := 0
	servicetest.WaitFor(t, 40*time.Second, "the service's reads back on the standby", func() bool {
		i++
		gql(t, svc, "/graphql", stationCount, countVars("no such station "+strconv.Itoa(i)))
		return serviceSessions(t, primary, db.Name) == 0 && serviceSessions(t, standby, db.Name) > 0
	})

	if err := standby.Exec(ctx, "postgres", "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	before := countNow(t, pool, "")
	keptThen(t, svc, "", before)
	applyChange(t, pool, changes[0].sql)
	after := countNow(t, pool, "")
	// The primary's version moved; the standby, which serves, still answers as before.
	time.Sleep(2 * staleness)
	if got := countReply(t, gql(t, svc, "/graphql", stationCount, nil)); got != before {
		t.Fatalf("records_count %d with the standby's replay paused, want %d (what the standby has)", got, before)
	}
	if err := standby.Exec(ctx, "postgres", "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatal(err)
	}
	if err := standby.WaitForReplay(ctx, primary); err != nil {
		t.Fatal(err)
	}
	freshWithin(t, svc, "", before, after, time.Now(), staleness+500*time.Millisecond)
}
