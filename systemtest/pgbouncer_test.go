package systemtest

// The service behind PgBouncer in transaction pooling mode (contract section 6.6), with one
// server connection that every client shares, so that a server connection certainly passes
// between the service and another client that changes its session settings.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestSessionSettingsHoldThroughPgBouncer(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{})
	db := servicetest.FixtureDBOn(t, c)
	want := expectedCount(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The tables live in schema analytics only, so DATABASE__SCHEMA must take effect; every
	// statement is logged, to see the transactions the service sends.
	move := "CREATE SCHEMA analytics;"
	for _, table := range []string{"dim_station", "dim_resource", "dim_patient", "fact_record", "fact_oxygen"} {
		move += "ALTER TABLE public." + table + " SET SCHEMA analytics;"
	}
	move += fmt.Sprintf("ALTER DATABASE %q SET log_statement = 'all'", db.Name)
	if err := c.Exec(ctx, db.Name, move); err != nil {
		t.Fatal(err)
	}
	pgb := pgtest.NewPgBouncer(t, c, "default_pool_size = 1")
	viaBouncer := db
	viaBouncer.Host, viaBouncer.Port, viaBouncer.TransactionPooling = pgb.Host(), pgb.Port(), true
	// Answers from memory off: every request must reach the database through PgBouncer.
	svc := servicetest.Start(t, viaBouncer, map[string]string{"DATABASE__SCHEMA": "analytics", "LIMITS__STATEMENT_TIMEOUT": "1", "CACHE__ENABLED": "false"})

	// Another client of the same PgBouncer pool changes the settings of the one server
	// connection for good (session-level SET outlives its transaction there).
	cfg, err := c.ConnConfig(db.Name)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host, cfg.Port = pgb.Host(), uint16(pgb.Port())
	other, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.WithoutCancel(ctx))
	if _, err := other.Exec(ctx, "SET search_path TO public; SET statement_timeout = 0; SET default_transaction_read_only = off"); err != nil {
		t.Fatal(err)
	}

	// DATABASE__SCHEMA still resolves the tables.
	for range 3 {
		if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
			t.Errorf("records_count = %d, want %d", got, want)
		}
	}
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	// So do a batch's statements (main_report_summary's three, in one pipeline and transaction).
	var summary struct {
		S struct {
			Records   int64                   `json:"records"`
			ByStation []struct{ Count int64 } `json:"by_station"`
		} `json:"main_report_summary"`
	}
	svc.GraphQL(t, "/serve/graphql", `{ main_report_summary(start_date: "1900-01-01", end_date: "2999-12-31") { records by_station { count } } }`, nil).DataInto(t, &summary)
	byStation := int64(0)
	for _, s := range summary.S.ByStation {
		byStation += s.Count
	}
	if summary.S.Records != want || byStation != want {
		t.Errorf("main_report_summary: records %d, by_station adds up to %d; want %d", summary.S.Records, byStation, want)
	}

	// The statement timeout still holds: a statement held up by a lock is cancelled after
	// LIMITS__STATEMENT_TIMEOUT with the contract's error.
	lock, err := db.Pool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, "LOCK TABLE analytics.fact_record IN ACCESS EXCLUSIVE MODE"); err != nil {
		_ = lock.Rollback(ctx)
		t.Fatal(err)
	}
	start := time.Now()
	r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	took := time.Since(start)
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantTimeout(t, r, took, "LIMITS__STATEMENT_TIMEOUT=1s", time.Second)
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
		t.Errorf("records_count after the timeout = %d, want %d", got, want)
	}

	// Every statement ran in a read-only transaction that set the schema and the timeout.
	log, err := os.ReadFile(c.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	begin := `BEGIN READ ONLY; SET LOCAL search_path TO "analytics"; SET LOCAL statement_timeout = 1000`
	if n := strings.Count(string(log), begin); n < 5 {
		t.Errorf("%q logged %d times, want one per statement (at least 5)", begin, n)
	}
	// So did a batch's, in one repeatable-read transaction.
	batch := `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL search_path TO "analytics"; SET LOCAL statement_timeout = 1000`
	if !strings.Contains(string(log), batch) {
		t.Errorf("%q not logged (main_report_summary's batch)", batch)
	}

	// Without DATABASE__TRANSACTION_POOLING, PgBouncer refuses the service's startup parameters,
	// and the service says what to set.
	plain := servicetest.Start(t, viaBouncer, map[string]string{"DATABASE__TRANSACTION_POOLING": "no"})
	wantJSON(t, plain, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	servicetest.WaitFor(t, 5*time.Second, "the hint in the log", func() bool {
		return strings.Contains(plain.Output(), "set DATABASE__TRANSACTION_POOLING=yes")
	})
}
