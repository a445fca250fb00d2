package systemtest

// Every statement the service runs goes through platform/database's helpers, which measure it
// in db.client.operation.duration with its operation name: outside-in, each root field of the
// three GraphQL endpoints, the CSV export and the health check, one after the other, against
// the real binary's Prometheus endpoint.

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// operationCounts is db_client_operation_duration_seconds's count per db_operation_name, for
// the operations that succeeded; failed ones are counted under "<name> error=<error_type>", so
// that a failure shows in a difference.
type operationCounts map[string]uint64

// scrapeMetrics reads the metric families on the service's Prometheus endpoint (target is its
// host:port).
func scrapeMetrics(t *testing.T, target string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return families
}

// scrapeOperations reads the statements' counts on the service's Prometheus endpoint.
func scrapeOperations(t *testing.T, target string) operationCounts {
	t.Helper()
	families := scrapeMetrics(t, target)
	out := operationCounts{}
	for _, m := range families["db_client_operation_duration_seconds"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		name := labels["db_operation_name"]
		if e := labels["error_type"]; e != "" {
			name += " error=" + e
		}
		out[name] += m.GetHistogram().GetSampleCount()
	}
	return out
}

// minus is what changed from before to c, without the operations that did not change.
func (c operationCounts) minus(before operationCounts) operationCounts {
	out := operationCounts{}
	for op, n := range c {
		if d := n - before[op]; d != 0 {
			out[op] = d
		}
	}
	return out
}

func (c operationCounts) String() string {
	ops := make([]string, 0, len(c))
	for op, n := range c {
		ops = append(ops, fmt.Sprintf("%q: %d", op, n))
	}
	sort.Strings(ops)
	return "{" + strings.Join(ops, ", ") + "}"
}

func TestDBMetricsCountEveryStatement(t *testing.T) {
	db := servicetest.FixtureDB(t)
	metricsPort := servicetest.FreePort(t)
	svc := servicetest.Start(t, db, map[string]string{
		"OTEL_METRICS_EXPORTER":         "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(metricsPort),
	})
	target := "127.0.0.1:" + strconv.Itoa(metricsPort)

	const (
		dates = `start_date: "2024-01-01", end_date: "2024-12-31"`
		// A number compared and a joined table's column: the statements of a real request.
		filters = `filters: [{column: "distance", operator: GREATER_THAN, value: "1.5"}, {column: "gender", operator: EQUALS, value: "female"}], use_or: true`
	)
	graphQL := func(path, query string) func(t *testing.T) {
		return func(t *testing.T) {
			r := svc.GraphQL(t, path, query, nil)
			if r.Status != http.StatusOK || len(r.Errors) > 0 {
				t.Fatalf("%s %s: %d %s", path, query, r.Status, r.Raw)
			}
		}
	}
	get := func(path string, headers map[string]string) func(t *testing.T) {
		return func(t *testing.T) {
			if resp, body := svc.Get(t, path, headers); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
			}
		}
	}
	// Each call and the statements it runs: one per root field, named by its repository, except
	// where the answer needs no database.
	for _, c := range []struct {
		name string
		call func(t *testing.T)
		want operationCounts
	}{
		// /graphql
		{"resources", graphQL("/graphql", `{ resources { sk_resource resource_id callsign station_id station valid_from valid_to } }`),
			operationCounts{"resources": 1}},
		{"station_resources", graphQL("/graphql", `{ station_resources { station_id station_name resources { resource_id } } }`),
			operationCounts{"station resources": 1}},
		// Written as the rows are read (gqljson.List) ...
		{"patients", graphQL("/graphql", `{ patients { sk_patient age date_of_birth gender weight } }`),
			operationCounts{"patients": 1}},
		{"oxygens", graphQL("/graphql", `{ oxygens { sk_oxygen record_id route flow_rate administered_at } }`),
			operationCounts{"oxygens": 1}},
		// ... and as a list of rows.
		{"oxygens with distinct_fields", graphQL("/graphql", `{ oxygens(distinct_fields: ["route", "record_id"]) { route record_id } }`),
			operationCounts{"oxygens": 1}},
		{"distinct_values", graphQL("/graphql", `{ distinct_values(columns: ["station", "age", "occurred_at"], `+dates+`, `+filters+`) { column value } }`),
			operationCounts{"distinct values": 1}},
		{"unique_counts", graphQL("/graphql", `{ unique_counts(columns: ["callsign", "transported"], `+dates+`, `+filters+`) { column value count } }`),
			operationCounts{"unique counts": 1}},
		{"record_series", graphQL("/graphql", `{ record_series(`+dates+`, bucket: MONTH, group_by: "degree_of_urgency", `+filters+`) { bucket value count } }`),
			operationCounts{"record series": 1}},
		{"record_stats", graphQL("/graphql", `{ record_stats(`+dates+`, measure: "response_time_s", group_by: ["station"], bucket: QUARTER, target: 720, `+filters+`) { bucket count percentiles { p value } within_target } }`),
			operationCounts{"record stats": 1}},
		{"records_count", graphQL("/graphql", `{ records_count { count } }`),
			operationCounts{"records count": 1}},
		{"records_count of a station", graphQL("/graphql", `{ records_count(station: "Oslo") { count } }`),
			operationCounts{"records count": 1}},

		// /serve/graphql: main_report reads rows and total in one statement, the total alone
		// with another, and nothing when neither is asked for.
		{"main_report", graphQL("/serve/graphql", `{ main_report(`+dates+`, `+filters+`, limit: 5) { total limit offset rows { record_id occurred_at station oxygen_routes } } }`),
			operationCounts{"main report": 1}},
		{"main_report rows only", graphQL("/serve/graphql", `{ main_report(`+dates+`) { rows { record_id } } }`),
			operationCounts{"main report": 1}},
		{"main_report total only", graphQL("/serve/graphql", `{ main_report(`+dates+`, `+filters+`) { total } }`),
			operationCounts{"main report": 1}},
		{"main_report without rows and total", graphQL("/serve/graphql", `{ main_report(`+dates+`) { limit offset } }`),
			operationCounts{}},
		{"main_report_summary", graphQL("/serve/graphql", `{ main_report_summary(`+dates+`, `+filters+`) { records distinct_resources by_urgency { value count } by_station { value count } } }`),
			operationCounts{"main report summary": 1}}, // three statements, one batch (database.RunBatch)
		{"main_report_summary without a part", graphQL("/serve/graphql", `{ main_report_summary(`+dates+`) { __typename } }`),
			operationCounts{}},

		// /lookups/graphql
		{"stations", graphQL("/lookups/graphql", `{ stations { station_id station_name } }`), operationCounts{"stations": 1}},
		{"callsigns", graphQL("/lookups/graphql", `{ callsigns }`), operationCounts{"callsigns": 1}},
		{"urgencies", graphQL("/lookups/graphql", `{ urgencies }`), operationCounts{"urgencies": 1}},
		{"municipalities", graphQL("/lookups/graphql", `{ municipalities }`), operationCounts{"municipalities": 1}},
		{"oxygen_routes", graphQL("/lookups/graphql", `{ oxygen_routes }`), operationCounts{"oxygen routes": 1}},
		{"genders", graphQL("/lookups/graphql", `{ genders }`), operationCounts{"genders": 1}},
		{"columns", graphQL("/lookups/graphql", `{ columns { name type operators } }`), operationCounts{}}, // the catalog, no database

		// REST
		{"CSV export", get("/v1/reports/main-report/export?start_date=2024-01-01&end_date=2024-12-31&filter=distance:GREATER_THAN:1.5",
			map[string]string{svc.Header: svc.Key, "SERVICE-X-API-KEY": svc.Key}), operationCounts{"export": 1}},
		{"healthz", get("/v1/healthz", nil), operationCounts{"ping": 1}},
		{"ping", get("/v1/ping", nil), operationCounts{}}, // liveness, no database
	} {
		t.Run(c.name, func(t *testing.T) {
			before := scrapeOperations(t, target)
			c.call(t)
			got := scrapeOperations(t, target).minus(before)
			// The answer cache's data version poll runs on its own schedule (checked below).
			delete(got, "data version")
			if got.String() != c.want.String() {
				t.Errorf("db_client_operation_duration_seconds_count changed by %v, want %v", got, c.want)
			}
		})
	}
	// The answer cache reads the data version on a connection of its own; it is measured too.
	if n := scrapeOperations(t, target)["data version"]; n == 0 {
		t.Error(`no "data version" operation measured: the cache's poll is not counted`)
	}
}
