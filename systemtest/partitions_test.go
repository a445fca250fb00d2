package systemtest

// On the partitioned layout, the service's statements for one month read that month's
// partition only: PostgreSQL prunes the others while planning, as the statements are planned
// with their values (custom plans, see plans_test.go).

import (
	"regexp"
	"slices"
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

var relationName = regexp.MustCompile(`"Relation Name": "(fact_record[^"]*)"`)

func TestOneMonthReadsOnePartition(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.Partitioned, oneMonthReadsOnePartition)
}

func oneMonthReadsOnePartition(t *testing.T) {
	db := servicetest.FixtureDB(t)
	plans := planLog(t, db)
	svc := servicetest.Start(t, db, nil)
	for _, q := range []struct{ path, query string }{
		{"/graphql", `{ distinct_values(columns: ["station", "degree_of_urgency"], start_date: "2024-03-01", end_date: "2024-03-31", filters: [{column: "distance", operator: GREATER_THAN, value: "1"}]) { column value } }`},
		{"/graphql", `{ unique_counts(columns: ["degree_of_urgency"], start_date: "2024-03-01", end_date: "2024-03-31") { column value count } }`},
		{"/serve/graphql", `{ main_report(start_date: "2024-03-01", end_date: "2024-03-31", limit: 5) { total rows { record_id } } }`},
		{"/serve/graphql", `{ main_report_summary(start_date: "2024-03-01", end_date: "2024-03-31") { records average_distance } }`},
	} {
		if r := svc.GraphQL(t, q.path, q.query, nil); len(r.Errors) > 0 {
			t.Fatalf("%s %s: %s", q.path, q.query, r.Raw)
		}
	}
	var read []string
	for _, l := range plans() {
		for _, m := range relationName.FindAllStringSubmatch(l, -1) {
			if !slices.Contains(read, m[1]) {
				read = append(read, m[1])
			}
		}
	}
	if !slices.Equal(read, []string{"fact_record_y2024m03"}) {
		t.Errorf("one month's statements read %q, want only [fact_record_y2024m03]", read)
	}
}
