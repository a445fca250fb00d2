package stats

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/fixture"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/modules/records"
)

func mustColumns(t *testing.T, names ...string) []records.Column {
	t.Helper()
	cols, err := records.ResolveColumns(names)
	if err != nil {
		t.Fatal(err)
	}
	return cols
}

// One statement for any number of columns; joins only when a column needs them; values only as
// parameters.
func TestPerColumnSQLShape(t *testing.T) {
	f := records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", UseOr: true, Filters: []records.Filter{
		{Column: "station", Value: ptr("' OR 1=1 --"), Operator: records.Equals},
		{Column: "distance", Value: ptr("9.5"), Operator: records.GreaterThan},
	}}
	for _, counted := range []bool{false, true} {
		q, args, err := perColumnSQL(mustColumns(t, "distance", "station", "occurred_at", "transported"), f, counted)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(q, "WITH ") || strings.Contains(q, "UNION") {
			t.Errorf("the records are not read once: %s", q)
		}
		if n := strings.Count(q, "GROUPING SETS (("); n != 1 {
			t.Errorf("%d GROUPING SETS clauses in %s", n, q)
		}
		if n := strings.Count(q, "), ("); n != 3 {
			t.Errorf("%d separators of grouping sets for 4 columns in %s", n, q)
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
		if want := "ORDER BY ord, "; !strings.Contains(q, want) || counted != strings.Contains(q, "ORDER BY ord, n DESC, ") {
			t.Errorf("not ordered by column position (then count when counted): %s", q)
		}

		q, _, err = perColumnSQL(mustColumns(t, "age"), records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31"}, counted)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(q, "LEFT JOIN dim_patient") || strings.Contains(q, "dim_resource") {
			t.Errorf("age alone: %s", q)
		}
	}
	if _, _, err := perColumnSQL(nil, f, false); err == nil {
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

	f := records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", Filters: []records.Filter{
		{Column: "distance", Value: ptr("9.5"), Operator: records.GreaterThanOrEqual},
		{Column: "occurred_at", Value: ptr("2024-03-01 00:00:00"), Operator: records.GreaterThan},
		{Column: "transported", Value: ptr("TRUE"), Operator: records.Equals},
		{Column: "age", Value: ptr("18"), Operator: records.GreaterThan},
		{Column: "callsign", Value: ptr("AMB 1-2"), Operator: records.LessThanOrEqual},
	}}
	cols := records.Columns()
	for _, counted := range []bool{false, true} {
		q, args, err := perColumnSQL(cols, f, counted)
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
	q, args, err := perColumnSQL(mustColumns(t, "station"), records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31"}, true)
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

// Every statement shape of record_series and record_stats is valid SQL with the parameters pgx
// sends; the range stays on the occurred_at index; and the grouped series computes its points
// only when they fit the limit (a one-time filter, not a filter on every row).
func TestSeriesAndStatsStatementsOnPostgres(t *testing.T) {
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
	lim := Limits{Records: records.Limits{Columns: 20, Filters: 50, FilterValues: 1000}, SeriesPoints: 50000}
	rf := records.RecordFilter{StartDate: "2024-02-20", EndDate: "2025-01-10", Filters: []records.Filter{
		{Column: "station", Operator: records.In, Values: []string{"Central", "North Harbour"}},
		{Column: "age", Operator: records.IsNotNull},
	}, UseOr: true}
	explain := func(q string, args records.Args) string {
		t.Helper()
		rows, err := conn.Query(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(plan, "\n")
	}
	run := func(q string, args records.Args) {
		t.Helper()
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	station := "station"
	var series, stats []seriesStatement
	for _, b := range TimeBuckets() {
		for _, g := range []*string{nil, &station} {
			st, err := buildSeries(SeriesRequest{Records: rf, Bucket: b, GroupBy: g}, lim)
			if err != nil {
				t.Fatal(err)
			}
			run(st.sql, st.args)
			series = append(series, st)
		}
		bb := b
		st, err := buildStats(StatsRequest{Records: rf, Measure: "distance", GroupBy: []string{"station", "gender"}, Bucket: &bb,
			Percentiles: []float64{0.5, 0.9}, Target: ptrFloat(10), Want: AllFigures}, lim)
		if err != nil {
			t.Fatal(err)
		}
		run(st.sql, st.args)
		stats = append(stats, seriesStatement{sql: st.sql, args: st.args})
	}
	st, err := buildStats(StatsRequest{Records: rf, Measure: "age"}, lim)
	if err != nil {
		t.Fatal(err)
	}
	run(st.sql, st.args)

	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	for _, st := range append(series, stats...) {
		if plan := explain(st.sql, st.args); !strings.Contains(plan, "fact_record_occurred_at_idx") {
			t.Errorf("the date range does not use the occurred_at index:\n%s\n%s", st.sql, plan)
		}
	}
	if _, err := conn.Exec(ctx, "RESET enable_seqscan"); err != nil {
		t.Fatal(err)
	}
	for _, st := range series {
		if st.group != nil {
			if plan := explain(st.sql, st.args); !strings.Contains(plan, "One-Time Filter") {
				t.Errorf("the points limit is not a one-time filter:\n%s", plan)
			}
		}
	}
	// Over the limit, the points are never computed.
	small := lim
	small.SeriesPoints = 30
	over, err := buildSeries(SeriesRequest{Records: rf, Bucket: Day, GroupBy: &station}, Limits{SeriesPoints: 1000, Records: records.Limits{Filters: 50, FilterValues: 10}})
	if err != nil {
		t.Fatal(err)
	}
	over.args[len(over.args)-1] = int64(small.SeriesPoints)
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+over.sql, over.args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	for _, line := range plan {
		if strings.Contains(line, "Function Scan on generate_series") && !strings.Contains(line, "never executed") {
			t.Errorf("the series ran although the answer is over the limit:\n%s", text)
		}
	}
}

func ptrFloat(f float64) *float64 { return &f }

// Buckets: the Go arithmetic of spans and labels against the calendar.
func TestBucketSpans(t *testing.T) {
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	for _, tc := range []struct {
		b           TimeBucket
		start, end  string
		first, last string
		n           int64
	}{
		{Week, "2024-12-28", "2025-01-10", "2024-12-23 00:00", "2025-01-06 00:00", 3},
		{Week, "2024-12-30", "2025-01-05", "2024-12-30 00:00", "2024-12-30 00:00", 1},
		{Week, "2025-01-05", "2025-01-06", "2024-12-30 00:00", "2025-01-06 00:00", 2},
		{Day, "2024-02-28", "2024-03-01", "2024-02-28 00:00", "2024-03-01 00:00", 3},
		{Day, "2023-02-28", "2023-03-01", "2023-02-28 00:00", "2023-03-01 00:00", 2},
		{Hour, "2024-02-29", "2024-02-29", "2024-02-29 00:00", "2024-02-29 23:00", 24},
		{Month, "2024-01-31", "2024-03-01", "2024-01-01 00:00", "2024-03-01 00:00", 3},
		{Quarter, "2024-03-31", "2025-04-01", "2024-01-01 00:00", "2025-04-01 00:00", 6},
		{Year, "2023-12-31", "2025-01-01", "2023-01-01 00:00", "2025-01-01 00:00", 3},
		{Hour, "0001-01-01", "9999-12-31", "0001-01-01 00:00", "9999-12-31 23:00", 3652059 * 24},
	} {
		s, _ := tc.b.spec()
		first, last, n := s.span(day(tc.start), day(tc.end))
		if got := first.Format("2006-01-02 15:04"); got != tc.first || last.Format("2006-01-02 15:04") != tc.last || n != tc.n {
			t.Errorf("%s %s..%s: %s..%s, %d buckets; want %s..%s, %d", tc.b, tc.start, tc.end, got, last.Format("2006-01-02 15:04"), n, tc.first, tc.last, tc.n)
		}
	}
	for _, tc := range []struct {
		b    TimeBucket
		at   string
		want string
	}{
		{Hour, "2024-02-29 07:00", "2024-02-29 07:00"}, {Day, "2024-02-29 00:00", "2024-02-29"},
		{Week, "2024-12-30 00:00", "2024-12-30"}, {Month, "2024-02-01 00:00", "2024-02"},
		{Quarter, "2024-10-01 00:00", "2024-Q4"}, {Quarter, "2024-01-01 00:00", "2024-Q1"}, {Year, "0001-01-01 00:00", "0001"},
	} {
		s, _ := tc.b.spec()
		at, _ := time.Parse("2006-01-02 15:04", tc.at)
		if got := s.labelOf(at); got != tc.want {
			t.Errorf("%s label of %s = %s, want %s", tc.b, tc.at, got, tc.want)
		}
	}
	s, _ := DayOfWeek.spec()
	if got := s.labelOf(int32(7)); got != "7" || s.count(time.Time{}, time.Time{}) != 7 {
		t.Errorf("day of week: label %s, count %d", got, s.count(time.Time{}, time.Time{}))
	}
}
