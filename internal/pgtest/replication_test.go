package pgtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

func TestStandbyReplicates(t *testing.T) {
	t.Parallel()
	primary := pgtest.New(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, err := standby.InRecovery(ctx); err != nil || !r {
		t.Fatalf("standby in recovery = %v, %v; want true", r, err)
	}
	if r, err := primary.InRecovery(ctx); err != nil || r {
		t.Fatalf("primary in recovery = %v, %v; want false", r, err)
	}
	// A database made on the primary after the backup reaches the standby.
	name := pgtest.NewDatabase(t, primary)
	if err := primary.Exec(ctx, name, "INSERT INTO dim_station VALUES (1, 'x')"); err != nil {
		t.Fatal(err)
	}
	if err := standby.WaitForReplay(ctx, primary); err != nil {
		t.Fatal(err)
	}
	cfg, err := standby.ConnConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM dim_station").Scan(&n); err != nil || n != 1 {
		t.Errorf("standby has %d stations (%v), want 1", n, err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO dim_station VALUES (2, 'y')"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a write on the standby: %v; want a read-only refusal", err)
	}
	// Stop and start, as the fault tests do.
	if err := standby.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Start(); err != nil {
		t.Fatal(err)
	}
	if r, err := standby.InRecovery(ctx); err != nil || !r {
		t.Fatalf("restarted standby in recovery = %v, %v; want true", r, err)
	}
}

func TestPgBouncerTransactionPooling(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	name := pgtest.NewDatabase(t, c)
	b := pgtest.NewPgBouncer(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := c.ConnConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host, cfg.Port = b.Host(), uint16(b.Port())
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil || db != name {
		t.Fatalf("through PgBouncer: database %q (%v), want %q", db, err, name)
	}
	// PgBouncer's defaults: a startup parameter it does not keep is refused.
	cfg.RuntimeParams["search_path"] = "public"
	_, err = pgx.ConnectConfig(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "unsupported startup parameter") {
		t.Errorf("search_path as a startup parameter: err = %v, want PgBouncer's refusal", err)
	}
}
