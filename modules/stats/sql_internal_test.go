package stats

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/fixture"
	"github.com/emsanalytics/emsquery/internal/pgtest"
)

func mustColumns(t *testing.T, names ...string) []Column {
	t.Helper()
	cols, err := ResolveColumns(names)
	if err != nil {
		t.Fatal(err)
	}
	return cols
}

// One statement for any number of columns; joins only when a column needs them; values only as
// parameters.
func TestPerColumnSQLShape(t *testing.T) {
	f := RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", UseOr: true, Filters: []Filter{
		{Column: "station", Value: ptr("' OR 1=1 --"), Operator: Equals},
		{Column: "distance", Value: ptr("9.5"), Operator: GreaterThan},
	}}
	for _, branch := range []string{distinctBranch, uniqueBranch} {
		q, args, err := perColumnSQL(mustColumns(t, "distance", "station", "occurred_at", "transported"), f, branch)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(q, "WITH m AS"); n != 1 {
			t.Errorf("%d CTEs in %s", n, q)
		}
		if n := strings.Count(q, " UNION ALL "); n != 3 {
			t.Errorf("%d UNION ALL for 4 columns in %s", n, q)
		}
		if strings.Contains(q, "JOIN") {
			t.Errorf("joins without a joined column: %s", q)
		}
		if strings.Contains(q, "OR 1=1") || strings.Contains(q, "9.5") {
			t.Errorf("a value reached the SQL text: %s", q)
		}
		if len(args) != 4 || !strings.Contains(q, "$4") || strings.Contains(q, "$5") {
			t.Errorf("placeholders and args disagree (%d args): %s", len(args), q)
		}
		if !strings.HasSuffix(q, "ORDER BY ord, k") {
			t.Errorf("not ordered by column position and rank: %s", q)
		}

		q, _, err = perColumnSQL(mustColumns(t, "age"), RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31"}, branch)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(q, "LEFT JOIN dim_patient") || strings.Contains(q, "dim_resource") || strings.Contains(q, "UNION ALL") {
			t.Errorf("age alone: %s", q)
		}
	}
	if _, _, err := perColumnSQL(nil, f, distinctBranch); err == nil {
		t.Error("no columns accepted")
	}
}

// The date range is written so that PostgreSQL can use the occurred_at index, and every
// statement shape the module builds is valid SQL with the parameters pgx sends.
func TestStatementsOnPostgres(t *testing.T) {
	c := pgtest.Shared(t)
	db := pgtest.NewDatabase(t, c)
	ctx := context.Background()
	if err := c.Exec(ctx, db, fixture.EdgeSQL); err != nil {
		t.Fatal(err)
	}
	cc, err := c.ConnConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	f := RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", Filters: []Filter{
		{Column: "distance", Value: ptr("9.5"), Operator: GreaterThanOrEqual},
		{Column: "occurred_at", Value: ptr("2024-03-01 00:00:00"), Operator: GreaterThan},
		{Column: "transported", Value: ptr("TRUE"), Operator: Equals},
		{Column: "age", Value: ptr("18"), Operator: GreaterThan},
		{Column: "callsign", Value: ptr("AMB 1-2"), Operator: LessThanOrEqual},
	}}
	cols := Columns()
	for _, branch := range []string{distinctBranch, uniqueBranch} {
		q, args, err := perColumnSQL(cols, f, branch)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pgx.CollectRows(rows, pgx.RowToStructByPos[valueRow]); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}

	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	q, args, err := perColumnSQL(mustColumns(t, "station"), RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31"}, uniqueBranch)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(plan, "\n"); !strings.Contains(text, "fact_record_occurred_at_idx") {
		t.Errorf("the date range does not use the occurred_at index:\n%s", text)
	}
}
