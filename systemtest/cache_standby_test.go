package systemtest

// CACHE__CHANGES=replication with a primary and a streaming hot standby in DATABASE__HOST
// (contract 6.13): the slot is on the primary, the answers read from the standby reflect a
// change once the standby has replayed it (its replay position compared with the commit's),
// and a change to one table still leaves the answers of the others in memory.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/answercache"
)

func TestFollowWithAHotStandby(t *testing.T) {
	primary := pgtest.New(t, logicalCluster)
	db := followedDB(t, primary)
	standby := pgtest.NewStandby(t, primary)
	ctx := context.Background()
	if err := standby.WaitForReplay(ctx, primary); err != nil {
		t.Fatal(err)
	}
	onStandby := db
	onStandby.Cluster, onStandby.Port = standby, standby.Port()
	primaryPool, standbyPool := db.Pool(t), onStandby.Pool(t)
	svc := servicetest.Start(t, db, map[string]string{
		"DATABASE__HOST": "localhost," + standby.Host(),
		"DATABASE__PORT": fmt.Sprintf("%d,%d", primary.Port(), standby.Port()),
		// The answers are read from the standby.
		"DATABASE__TARGET_SESSION_ATTRS": "prefer-standby",
		"CACHE__CHANGES":                 "replication",
		"CACHE__MAX_STALENESS":           "1",
	})
	waitCacheLive(t, svc)
	_, body := svc.Get(t, "/v1/healthz", map[string]string{svc.Header: svc.Key})
	var h struct {
		Changes struct{ Source, State string } `json:"changes"`
	}
	if err := json.Unmarshal(body, &h); err != nil || h.Changes.Source != "replication" || h.Changes.State != "streaming" {
		t.Fatalf("healthz %s: want changes replication, streaming (%v)", body, err)
	}
	servicetest.WaitFor(t, 5*time.Second, "the start-up line that says replication", func() bool {
		return strings.Contains(serviceLog(t, svc), "change source replication")
	})

	before := countNow(t, primaryPool, "")
	keptThen(t, svc, "", before)
	servicetest.WaitFor(t, 20*time.Second, "station_resources from memory", func() bool {
		return gql(t, svc, "/graphql", stationResources, nil).cacheStatus() == answercache.StatusHit
	})

	// The standby stops replaying: a load committed on the primary is not visible there, and
	// every answer (read from the standby) is the count from before it.
	if _, err := standbyPool.Exec(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = standbyPool.Exec(context.Background(), `SELECT pg_wal_replay_resume()`) })
	applyChange(t, primaryPool, `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (900201, '2024-03-10 12:00', 1, 'Central')`)
	after := countNow(t, primaryPool, "")
	if got := countNow(t, standbyPool, ""); got != before {
		t.Fatalf("the paused standby counts %d, want %d (the load not replayed)", got, before)
	}
	// main_report's total is read from the standby (it is not a counting answer that follows
	// loads): it keeps the count from before. records_count follows the load from the
	// primary's stream (its counts are the primary's, so it may show the load at once), and is
	// never anything else.
	for end := time.Now().Add(3 * staleness); time.Now().Before(end); {
		if got := reportTotal(t, svc); got != before {
			t.Fatalf("main_report total %d while the standby it is read from has not replayed the load (it counts %d)", got, before)
		}
		if got := countReply(t, gql(t, svc, "/graphql", stationCount, nil)); got != before && got != after {
			t.Fatalf("records_count %d, neither %d (before the load) nor %d (after)", got, before, after)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The load of fact_record leaves the answers of dim_station and dim_resource in memory.
	wantStatus(t, "station_resources after a load of fact_record", gql(t, svc, "/graphql", stationResources, nil), http.StatusOK, answercache.StatusHit)

	// Replayed: within the bound every answer has the load, although the primary showed it
	// long before (an answer computed on the standby meanwhile was kept under the primary's
	// newer version of fact_record; the standby's replay ends it).
	if _, err := standbyPool.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	if err := standby.WaitForReplay(ctx, primary); err != nil {
		t.Fatal(err)
	}
	replayed := time.Now()
	freshWithin(t, svc, "", before, after, replayed, staleness)
	servicetest.WaitFor(t, time.Until(replayed.Add(staleness+time.Second)), "main_report with the load", func() bool {
		return reportTotal(t, svc) == after
	})
}

// everyRecordTotal asks main_report's total over every record, a question read from the
// database (the standby here) each time it is computed.
const everyRecordTotal = `{ main_report(start_date: "1900-01-01", end_date: "2100-12-31", limit: 1) { total } }`

// reportTotal is everyRecordTotal's answer.
func reportTotal(t *testing.T, svc *servicetest.Service) int64 {
	t.Helper()
	r := gql(t, svc, "/serve/graphql", everyRecordTotal, nil)
	if r.status != http.StatusOK {
		t.Fatalf("main_report: HTTP %d: %s", r.status, r.body)
	}
	var d struct {
		MainReport struct{ Total int64 } `json:"main_report"`
	}
	if err := json.Unmarshal(dataOf(t, r.body), &d); err != nil {
		t.Fatalf("main_report %s: %v", r.body, err)
	}
	return d.MainReport.Total
}
