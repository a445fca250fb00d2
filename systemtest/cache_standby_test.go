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
	if !strings.Contains(serviceLog(t, svc), "change source replication") {
		t.Errorf("the start-up log does not say replication:\n%s", serviceLog(t, svc))
	}

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
	for end := time.Now().Add(3 * staleness); time.Now().Before(end); {
		if got := countReply(t, gql(t, svc, "/graphql", stationCount, nil)); got != before {
			t.Fatalf("records_count %d while the standby it is read from has not replayed the load (it counts %d)", got, before)
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
	freshWithin(t, svc, "", before, after, time.Now(), staleness)
}
