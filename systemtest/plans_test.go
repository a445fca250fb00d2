package systemtest

// The service's statements must be planned with their values (custom plans) however often they
// run on one connection. PostgreSQL switches a prepared statement to a generic plan, made
// without the values, after five executions when that plan looks no dearer; for a date range
// that estimate is badly wrong (heavy aggregates ran twice as slow on one). auto_explain logs
// the plan of every statement of the test database; a generic plan shows the parameters ($1)
// where a custom plan shows the values. The few light statements on dimension tables whose plan
// cannot depend on their values (no filter on the facts) are prepared once per session on
// purpose (database.PlanOnce, tested in platform/database) and are not among planQueries.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// planQueries are root fields of every endpoint that run statements with parameters, each as
// the endpoint's path and a document.
var planQueries = []struct{ path, query string }{
	{"/graphql", `{ distinct_values(columns: ["station", "degree_of_urgency"], start_date: "2024-01-01", end_date: "2024-12-31", filters: [{column: "distance", operator: GREATER_THAN, value: "1"}]) { column value } }`},
	{"/graphql", `{ unique_counts(columns: ["degree_of_urgency"], start_date: "2024-01-01", end_date: "2024-12-31", filters: [{column: "distance", operator: GREATER_THAN, value: "10"}]) { column value count } }`},
	{"/graphql", `{ records_count(station: "Alpha") { count } }`},
	{"/graphql", `{ record_series(start_date: "2024-01-01", end_date: "2024-12-31", bucket: MONTH, group_by: "degree_of_urgency", filters: [{column: "station", operator: IN, values: ["Alpha", "Beta"]}]) { bucket value count } }`},
	{"/graphql", `{ record_stats(start_date: "2024-01-01", end_date: "2024-12-31", measure: "response_time_s", group_by: ["station"], bucket: MONTH, target: 720) { bucket count percentiles { p value } } }`},
	{"/serve/graphql", `{ main_report(start_date: "2024-01-01", end_date: "2024-06-30", limit: 5, filters: [{column: "response_time_s", operator: LESS_THAN, value: "900"}]) { total rows { record_id } } }`},
	{"/serve/graphql", `{ main_report_summary(start_date: "2024-01-01", end_date: "2024-12-31", filters: [{column: "transported", operator: EQUALS, value: "true"}]) { records average_distance by_urgency { count } by_station { count } } }`}, // three statements
}

// genericParam is a parameter symbol in a plan node (not in the query text, which always has them).
var genericParam = regexp.MustCompile(`\$[0-9]+`)

// planLog turns on auto_explain for every new session of db's database (JSON plans, every
// statement) and returns a function that reads the plans logged since, without the query texts.
func planLog(t *testing.T, db servicetest.DB, extra ...string) func() []string {
	t.Helper()
	ctx := context.Background()
	settings := append([]string{
		"session_preload_libraries = 'auto_explain'",
		"auto_explain.log_min_duration = 0",
		"auto_explain.log_format = json",
	}, extra...)
	for _, s := range settings {
		if err := db.Cluster.Exec(ctx, db.Name, fmt.Sprintf(`ALTER DATABASE %q SET %s`, db.Name, s)); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	start := int64(0)
	if st, err := os.Stat(db.Cluster.LogFile()); err == nil {
		start = st.Size()
	}
	return func() []string {
		f, err := os.Open(db.Cluster.LogFile())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Seek(start, 0); err != nil {
			t.Fatal(err)
		}
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			l := sc.Text()
			if strings.Contains(l, `"Query Text":`) {
				continue
			}
			lines = append(lines, l)
		}
		return lines
	}
}

// runPlanQueries sends every planQueries document n times over one pooled connection.
func runPlanQueries(t *testing.T, svc *servicetest.Service, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		for _, q := range planQueries {
			r := svc.GraphQL(t, q.path, q.query, nil)
			if len(r.Errors) > 0 {
				t.Fatalf("%s %s: %+v", q.path, q.query, r.Errors)
			}
		}
	}
}

// genericPlanLines returns the plan lines that use a statement parameter. A plan's InitPlans
// return values as $n too ("InitPlan 4 (returns $4)"); those symbols are the plan's own, so each
// logged plan's InitPlan outputs are left out of the check.
func genericPlanLines(lines []string) []string {
	var out, plan []string
	check := func() {
		own := map[string]bool{}
		for _, l := range plan {
			if i := strings.Index(l, "(returns "); i >= 0 && strings.Contains(l, `"Subplan Name"`) {
				for _, p := range genericParam.FindAllString(l[i:], -1) {
					own[p] = true
				}
			}
		}
		for _, l := range plan {
			if strings.Contains(l, `"Subplan Name"`) {
				continue
			}
			for _, p := range genericParam.FindAllString(l, -1) {
				if !own[p] {
					out = append(out, strings.TrimSpace(l))
					break
				}
			}
		}
		plan = plan[:0]
	}
	for _, l := range lines {
		if strings.Contains(l, "plan:") { // the LOG line that starts the next plan
			check()
		}
		plan = append(plan, l)
	}
	check()
	return out
}

func TestStatementsRunOnCustomPlans(t *testing.T) {
	db := servicetest.FixtureDB(t)
	plans := planLog(t, db)
	// One connection, so that every execution of a statement is on the same session; no answers
	// from memory, so that every request runs its statement.
	svc := servicetest.Start(t, db, map[string]string{"DATABASE__POOL_SIZE": "1", "DATABASE__MAX_OVERFLOW": "0", "CACHE__ENABLED": "false"})
	runPlanQueries(t, svc, 8)

	lines := plans()
	if n := strings.Count(strings.Join(lines, "\n"), `"Plan":`); n < 8*len(planQueries) {
		t.Fatalf("auto_explain logged %d plans, want at least %d: is it loaded?", n, 8*len(planQueries))
	}
	if g := genericPlanLines(lines); len(g) > 0 {
		t.Errorf("%d plan lines hold parameters instead of values (generic plans), e.g.:\n%s", len(g), strings.Join(g[:min(len(g), 5)], "\n"))
	}
}

// The detector itself: with generic plans forced, the same run must show them.
func TestGenericPlansAreDetected(t *testing.T) {
	db := servicetest.FixtureDB(t)
	plans := planLog(t, db, "plan_cache_mode = force_generic_plan")
	svc := servicetest.Start(t, db, map[string]string{"DATABASE__POOL_SIZE": "1", "DATABASE__MAX_OVERFLOW": "0", "CACHE__ENABLED": "false"})
	runPlanQueries(t, svc, 1)
	if g := genericPlanLines(plans()); len(g) == 0 {
		t.Fatal("no generic plan seen with plan_cache_mode = force_generic_plan: the detector sees nothing")
	}
}
