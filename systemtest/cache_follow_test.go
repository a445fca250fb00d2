package systemtest

// Answers follow their tables (contract 6.13) with CACHE__CHANGES=replication: writes elsewhere
// on the server end no kept answer, a change to a followed table is in every answer that starts
// more than CACHE__MAX_STALENESS after it, a definition change ends every kept answer, and a
// lost replication stream serves nothing stale and is logged when it recovers.

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/answercache"
)

// logicalCluster is a cluster with wal_level = logical, shared by these tests.
var logicalCluster = pgtest.Options{Conf: "wal_level = logical\nmax_replication_slots = 20\nmax_wal_senders = 20"}

// followedDB is a fixture database on a logical cluster with the DBA's publication
// (docs/replication.md); the service's user (the cluster's superuser) has REPLICATION.
func followedDB(t *testing.T, c *pgtest.Cluster) servicetest.DB {
	t.Helper()
	db := servicetest.FixtureDBOn(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Exec(ctx, db.Name, `CREATE PUBLICATION emsquery FOR TABLE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen`); err != nil {
		t.Fatal(err)
	}
	return db
}

func startFollowing(t *testing.T, db servicetest.DB, source string) *servicetest.Service {
	t.Helper()
	svc := servicetest.Start(t, db, map[string]string{
		"CACHE__CHANGES": source, "CACHE__MAX_STALENESS": strconv.FormatFloat(staleness.Seconds(), 'f', -1, 64),
	})
	waitCacheLive(t, svc)
	return svc
}

const stationResources = `{ station_resources { station_id station_name resources { resource_id } } }`

// serviceLog is what the service logged: its console and its log files.
func serviceLog(t *testing.T, svc *servicetest.Service) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(svc.Output())
	files, _ := filepath.Glob(filepath.Join(svc.LogDir, "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.Write(data)
	}
	return b.String()
}

// hitRate asks the question every 50 ms for d and returns the share answered from memory.
func hitRate(t *testing.T, svc *servicetest.Service, d time.Duration) (float64, int) {
	t.Helper()
	var hits, n int
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		r := gql(t, svc, "/graphql", stationCount, nil)
		if r.status != http.StatusOK {
			t.Fatalf("HTTP %d: %s", r.status, r.body)
		}
		if r.cacheStatus() == answercache.StatusHit {
			hits++
		}
		time.Sleep(50 * time.Millisecond)
	}
	return float64(hits) / float64(n), n
}

// writeElsewhere commits to another database of the same server every 100 ms until the test ends.
func writeElsewhere(t *testing.T, c *pgtest.Cluster) {
	t.Helper()
	other := pgtest.NewDatabase(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	if err := c.Exec(ctx, other, `CREATE TABLE staging (id serial PRIMARY KEY, at timestamptz DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			_ = c.Exec(ctx, other, `INSERT INTO staging DEFAULT VALUES`)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// With a writer committing to another database every 100 ms, a repeated question stays an
// answer from memory with replication (at least 9 in 10); with snapshot the same writer makes
// it computed again.
func TestFollowWritesElsewhere(t *testing.T) {
	c := pgtest.SharedWith(t, logicalCluster)
	db := followedDB(t, c)
	writeElsewhere(t, c)
	rep := startFollowing(t, db, "replication")
	snap := startFollowing(t, db, "snapshot")
	gql(t, rep, "/graphql", stationCount, nil)
	gql(t, snap, "/graphql", stationCount, nil)
	rate, n := hitRate(t, rep, 5*time.Second)
	t.Logf("replication: %.0f%% of %d answers from memory", 100*rate, n)
	if rate < 0.9 {
		t.Errorf("replication: %.0f%% of %d repeated questions from memory, want at least 90%%", 100*rate, n)
	}
	rate, n = hitRate(t, snap, 5*time.Second)
	t.Logf("snapshot: %.0f%% of %d answers from memory", 100*rate, n)
	if rate == 1 {
		t.Errorf("snapshot: every one of %d answers from memory although another database changed every 100 ms", n)
	}
	_, body := rep.Get(t, "/v1/healthz", map[string]string{rep.Header: rep.Key})
	var h struct {
		Changes struct{ Source, State string } `json:"changes"`
	}
	if err := json.Unmarshal(body, &h); err != nil || h.Changes.Source != "replication" || h.Changes.State != "streaming" {
		t.Errorf("healthz %s: want changes replication, streaming (%v)", body, err)
	}
}

// An INSERT into fact_record is in records_count within the bound; ALTER TABLE ADD COLUMN on
// fact_record ends every kept answer within it.
func TestFollowChangeAndDefinition(t *testing.T) {
	c := pgtest.SharedWith(t, logicalCluster)
	db := followedDB(t, c)
	svc := startFollowing(t, db, "replication")
	pool := db.Pool(t)
	before := countNow(t, pool, "")
	keptThen(t, svc, "", before)
	servicetest.WaitFor(t, 20*time.Second, "station_resources from memory", func() bool {
		return gql(t, svc, "/graphql", stationResources, nil).cacheStatus() == answercache.StatusHit
	})
	applyChange(t, pool, `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (900001, '2024-03-10 12:00', 1, 'Central')`)
	freshWithin(t, svc, "", before, countNow(t, pool, ""), time.Now(), staleness)
	// It reads dim_station and dim_resource only: the load of fact_record leaves it kept.
	wantStatus(t, "station_resources after a load of fact_record", gql(t, svc, "/graphql", stationResources, nil), http.StatusOK, answercache.StatusHit)

	keptThen(t, svc, "", before+1)
	applyChange(t, pool, `ALTER TABLE fact_record ADD COLUMN note text`)
	altered := time.Now()
	servicetest.WaitFor(t, 3*staleness, "kept answer ended after ALTER TABLE", func() bool {
		return gql(t, svc, "/graphql", stationCount, nil).cacheStatus() != answercache.StatusHit
	})
	if d := time.Since(altered); d > staleness+500*time.Millisecond {
		t.Errorf("a kept answer ended %s after ALTER TABLE; bound %s", d, staleness)
	}
	// Every kept answer: station_resources' too, although fact_record is not among its tables.
	if r := gql(t, svc, "/graphql", stationResources, nil); r.cacheStatus() == answercache.StatusHit {
		t.Errorf("station_resources still from memory after ALTER TABLE")
	}
}

// The walsender terminated mid-run: a change made meanwhile is in every answer past the bound,
// and the recovery is logged.
func TestFollowWalsenderTerminated(t *testing.T) {
	c := pgtest.SharedWith(t, logicalCluster)
	db := followedDB(t, c)
	svc := startFollowing(t, db, "replication")
	pool := db.Pool(t)
	before := countNow(t, pool, "")
	keptThen(t, svc, "", before)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
		WHERE database = current_database() AND slot_type = 'logical' AND active_pid IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	applyChange(t, pool, `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (900002, '2024-03-10 12:00', 1, 'Central')`)
	freshWithin(t, svc, "", before, countNow(t, pool, ""), time.Now(), staleness)
	servicetest.WaitFor(t, 20*time.Second, "the recovery logged", func() bool {
		return strings.Contains(serviceLog(t, svc), "stream back on a new slot")
	})
}

// An explicit CACHE__CHANGES=replication without the publication stops the start, naming it.
func TestFollowRefusedWithoutPublication(t *testing.T) {
	c := pgtest.SharedWith(t, logicalCluster)
	db := servicetest.FixtureDBOn(t, c)
	svc := servicetest.Launch(t, db, map[string]string{"CACHE__CHANGES": "replication"})
	code, err := svc.Wait(60 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if out := serviceLog(t, svc); code == 0 || !strings.Contains(out, "publication") {
		t.Errorf("exit code %d; want a refusal naming the publication:\n%s", code, out)
	}
}

// CACHE__CHANGES=auto on a server without wal_level = logical uses snapshot, and the start-up
// log says what was missing.
func TestFollowAutoFallsBack(t *testing.T) {
	db := servicetest.FixtureDB(t)
	svc := startFollowing(t, db, "auto")
	_, body := svc.Get(t, "/v1/healthz", map[string]string{svc.Header: svc.Key})
	var h struct {
		Changes struct{ Source string } `json:"changes"`
	}
	if err := json.Unmarshal(body, &h); err != nil || h.Changes.Source != "snapshot" {
		t.Errorf("healthz %s: want changes snapshot (%v)", body, err)
	}
	servicetest.WaitFor(t, 10*time.Second, "the fallback logged with what was missing", func() bool {
		out := serviceLog(t, svc)
		return strings.Contains(out, "change source snapshot") && strings.Contains(out, "wal_level")
	})
	// Without a key the change source is not shown.
	if _, body := svc.Get(t, "/v1/healthz", nil); strings.Contains(string(body), "changes") {
		t.Errorf("healthz without a key shows the change source: %s", body)
	}
}

// A live records_count follows an INSERT into fact_record with replication: woken by the
// table's change, it finds no answer kept from before it.
func TestFollowLive(t *testing.T) {
	c := pgtest.SharedWith(t, logicalCluster)
	db := followedDB(t, c)
	svc := startFollowing(t, db, "replication")
	pool := db.Pool(t)
	before := countNow(t, pool, "")
	s, refused := subscribe(t, svc, "/graphql", `subscription { records_count { count } }`, svc.Key)
	if refused != nil {
		t.Fatalf("refused: HTTP %d %s", s.resp.StatusCode, refused)
	}
	defer s.close()
	ev, _, ok := s.next(30 * time.Second)
	if !ok || !strings.Contains(ev.data, strconv.FormatInt(before, 10)) {
		t.Fatalf("first answer %q (ok %v), want count %d", ev.data, ok, before)
	}
	applyChange(t, pool, `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (900003, '2024-03-10 12:00', 1, 'Central')`)
	after := countNow(t, pool, "")
	ev, _, ok = s.next(3 * staleness)
	if !ok || !strings.Contains(ev.data, `"count":`+strconv.FormatInt(after, 10)) {
		t.Fatalf("answer after the INSERT %q (ok %v), want count %d", ev.data, ok, after)
	}
}

// syncRepCluster holds every commit of a session with synchronous_commit = on until a standby
// named nobody confirms it, which none does: the commit is in the flushed WAL, so the
// replication stream delivers it, but no snapshot sees it until the wait is cancelled.
var syncRepCluster = pgtest.Options{Conf: logicalCluster.Conf +
	"\nsynchronous_standby_names = 'nobody'\nsynchronous_commit = local"}

// A commit delivered before it is visible on the primary: the answers computed meanwhile are
// kept under the versions before it, and once it is visible it is in every answer within the
// bound (an answer computed without it and kept as if it had it would stay until the next load).
// A counting answer followed from the rows counts it only once the database does: a later load
// seen first is in records_count within the bound, the held one not yet.
func TestFollowCommitNotYetVisible(t *testing.T) {
	c := pgtest.SharedWith(t, syncRepCluster)
	db := followedDB(t, c)
	svc := startFollowing(t, db, "replication")
	pool := db.Pool(t)
	ctx := context.Background()
	const added = `"resource_id":990001`
	if r := gql(t, svc, "/graphql", stationResources, nil); r.status != http.StatusOK || strings.Contains(string(r.body), added) {
		t.Fatalf("before the load: HTTP %d %.300s", r.status, r.body)
	}
	// Followed from now on.
	if got, want := countReply(t, gql(t, svc, "/graphql", stationCount, nil)), countNow(t, pool, ""); got != want {
		t.Fatalf("records_count %d, want %d", got, want)
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var writer int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&writer); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, `SET synchronous_commit = on;
			INSERT INTO dim_resource (sk_resource, resource_id, callsign, station_id, station, valid_from)
			SELECT 990001, 990001, 'Held 1', station_id, station_name, date '2024-01-01' FROM dim_station ORDER BY station_id LIMIT 1;
			INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (990001, '2024-03-10 12:00', 1, 'Central')`)
		committed <- err
	}()
	servicetest.WaitFor(t, 10*time.Second, "the writer waiting for its standby", func() bool {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'SyncRep'`, writer).Scan(&n)
		return n == 1
	})
	// A later load, seen at once.
	applyChange(t, pool, `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (990002, '2024-03-10 13:00', 1, 'Central')`)
	loaded := time.Now()
	// The stream delivers both commits at once; polls run meanwhile. Every answer now is
	// computed without the held rows, as the database still shows it, and records_count has
	// the later load within the bound.
	for end := time.Now().Add(3 * staleness); time.Now().Before(end); {
		if r := gql(t, svc, "/graphql", stationResources, nil); r.status != http.StatusOK || strings.Contains(string(r.body), added) {
			t.Fatalf("while the commit is not visible: HTTP %d, Cache-Status %s, %.300s", r.status, r.cacheStatus(), r.body)
		}
		got, want := countReply(t, gql(t, svc, "/graphql", stationCount, nil)), countNow(t, pool, "")
		if got != want && (got != want-1 || time.Since(loaded) > staleness) {
			t.Fatalf("records_count %d while the database counts %d (the held load not visible, the later one since %s)", got, want, time.Since(loaded).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_cancel_backend($1)`, writer); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatalf("the writer: %v", err)
	}
	visible := time.Now()
	servicetest.WaitFor(t, 3*staleness, "station_resources with the resource now visible", func() bool {
		return strings.Contains(string(gql(t, svc, "/graphql", stationResources, nil).body), added)
	})
	if d := time.Since(visible); d > staleness+500*time.Millisecond {
		t.Errorf("the resource was in station_resources %s after it became visible; bound %s", d, staleness)
	}
	want := countNow(t, pool, "")
	servicetest.WaitFor(t, 3*staleness, "records_count with the held load", func() bool {
		return countReply(t, gql(t, svc, "/graphql", stationCount, nil)) == want
	})
}
