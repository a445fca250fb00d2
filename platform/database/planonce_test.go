package database

// PlanOnce against a real PostgreSQL: a statement led by it is prepared under a name once per
// session and executed from there by every helper; a statement without it never is (its values
// are planned each time, see TestStatementsRunOnCustomPlans in app); behind PgBouncer in
// transaction pooling mode nothing is prepared under a name; and a prepared statement reads the
// new table after an ETL replaced the old one by a rename.

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

func TestPlanOnce(t *testing.T) {
	t.Parallel()
	cfg, c, name := clusterConfig(t)
	ctx := context.Background()
	if err := c.Exec(ctx, name, "CREATE TABLE d (k int PRIMARY KEY, v text); INSERT INTO d SELECT g, 'v' || g FROM generate_series(1, 50) g"); err != nil {
		t.Fatal(err)
	}
	direct, _ := open(t, cfg) // one connection: every statement runs on the same session
	pgb := pgtest.NewPgBouncer(t, c)
	pooled := *cfg
	pooled.Database.Hosts, pooled.Database.Ports = []string{pgb.Host()}, []int{pgb.Port()}
	pooled.Database.TransactionPooling = true
	viaBouncer, _ := open(t, &pooled)

	const (
		pageSQL   = "SELECT k, v FROM d WHERE k > $1 ORDER BY k LIMIT $2"
		countSQL  = "SELECT count(*) FROM d"
		filterSQL = "SELECT count(*) FROM d WHERE v = $1"
		listSQL   = "SELECT v FROM d ORDER BY k"
	)
	run := func(t *testing.T, db *DB) {
		t.Helper()
		for range 7 { // past the five custom plans PostgreSQL makes before it may settle on one
			var rows int
			complete, err := db.ForEachRawRow(ctx, "page", pageSQL, []any{PlanOnce, 10, 5}, []int16{pgx.TextFormatCode, pgx.TextFormatCode}, func(row [][]byte) bool {
				rows++
				return true
			})
			if err != nil || !complete || rows != 5 {
				t.Fatalf("page: %d rows, complete %v, %v", rows, complete, err)
			}
			var n int64
			if err := db.QueryRow(ctx, "count", countSQL, []any{PlanOnce}, &n); err != nil || n != 50 {
				t.Fatalf("count: %d, %v", n, err)
			}
			if err := db.QueryRow(ctx, "filter", filterSQL, []any{"v7"}, &n); err != nil || n != 1 {
				t.Fatalf("filter: %d, %v", n, err)
			}
			vs, err := Collect(ctx, db, "list", listSQL, []any{PlanOnce}, pgx.RowTo[string])
			if err != nil || len(vs) != 50 || vs[0] != "v1" {
				t.Fatalf("list: %d values, %v", len(vs), err)
			}
			var k int32
			var v string
			seen := 0
			if err := db.ForEachRow(ctx, "page", pageSQL, []any{PlanOnce, 0, 3}, []any{&k, &v}, func() error { seen++; return nil }); err != nil || seen != 3 {
				t.Fatalf("page by ForEachRow: %d rows, %v", seen, err)
			}
		}
	}
	prepared := func(t *testing.T, db *DB) []string {
		t.Helper()
		sts, err := Collect(ctx, db, "prepared", "SELECT statement FROM pg_prepared_statements ORDER BY statement", nil, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return sts
	}

	t.Run("direct", func(t *testing.T) {
		run(t, direct)
		want := []string{countSQL, pageSQL, listSQL}
		slices.Sort(want)
		if got := prepared(t, direct); !slices.Equal(got, want) {
			t.Errorf("prepared statements of the session:\n%q\nwant the three led by PlanOnce:\n%q", got, want)
		}
	})
	t.Run("transaction pooling", func(t *testing.T) {
		run(t, viaBouncer)
		if got := prepared(t, viaBouncer); len(got) != 0 {
			t.Errorf("prepared statements behind the transaction pooler: %q, want none", got)
		}
	})
	t.Run("table replaced", func(t *testing.T) {
		// An ETL that replaces the table by a rename: the prepared statements read the new one.
		if err := c.Exec(ctx, name, `CREATE TABLE d_new (k int PRIMARY KEY, v text);
			INSERT INTO d_new SELECT g, 'w' || g FROM generate_series(1, 20) g;
			ALTER TABLE d RENAME TO d_old; ALTER TABLE d_new RENAME TO d`); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := direct.QueryRow(ctx, "count", countSQL, []any{PlanOnce}, &n); err != nil || n != 20 {
			t.Errorf("count after the table was replaced: %d, %v; want 20", n, err)
		}
		vs, err := Collect(ctx, direct, "list", listSQL, []any{PlanOnce}, pgx.RowTo[string])
		if err != nil || len(vs) != 20 || vs[0] != "w1" {
			t.Errorf("list after the table was replaced: %q, %v", vs, err)
		}
	})
}
