package pgtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

func TestStandbyReplaysWhatThePrimaryCommits(t *testing.T) {
	primary := pgtest.New(t, pgtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.NewDatabase(t, primary)
	standby := pgtest.NewStandby(t, primary)
	if standby.Port() == primary.Port() || standby.Dir() == primary.Dir() {
		t.Fatal("the standby shares the primary's port or directory")
	}
	if err := primary.Exec(ctx, db, `INSERT INTO dim_station VALUES (1, 'Central')`); err != nil {
		t.Fatal(err)
	}
	if err := standby.WaitForReplay(ctx, primary); err != nil {
		t.Fatal(err)
	}
	cfg, err := standby.ConnConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var name string
	var recovery bool
	if err := conn.QueryRow(ctx, `SELECT station_name, pg_is_in_recovery() FROM dim_station`).Scan(&name, &recovery); err != nil {
		t.Fatal(err)
	}
	if name != "Central" || !recovery {
		t.Errorf("standby has %q, in recovery %v; want Central, true", name, recovery)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO dim_station VALUES (2, 'North')`); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a write on the standby: %v; want a read-only refusal", err)
	}
}
