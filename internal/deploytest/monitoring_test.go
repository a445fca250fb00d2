package deploytest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/emsanalytics/emsquery/internal/deploytest"
	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// TestAlertsAndDashboard: `promtool check rules` accepts deploy/prometheus/alerts.yaml, and every
// metric that it or deploy/grafana/emsquery.json names is on a running service's /metrics after
// a few requests of each kind (answered, from memory, refused for the key, rate-limited, a bad
// query, a live answer, a NOTIFY, a request that finds no pool connection in time, a keys file
// that does not parse), with every label either file selects or groups by (the dashboard's
// instance list included: target_info's service_name). `up`, and the instance and job labels,
// are Prometheus's own.
func TestAlertsAndDashboard(t *testing.T) {
	t.Parallel()
	root := deploytest.Root()
	rules := filepath.Join(root, "deploy", "prometheus", "alerts.yaml")
	promtool := deploytest.Tool(t, "promtool", "Debian package prometheus; make test-deps installs it", "/usr/bin/promtool")
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	exprs := alertExprs(t, rules)
	exprs = append(exprs, dashboardExprs(t, filepath.Join(root, "deploy", "grafana", "emsquery.json"))...)

	// A service with the Prometheus endpoint, the single key and a keys file with a limited key.
	db := servicetest.NewDB(t)
	limited, entry := newKey(t, "limited", "--rate", "1", "--burst", "1")
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, []byte("["+entry+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsPort := freePort(t)
	svc := servicetest.Start(t, db, map[string]string{
		"OTEL_METRICS_EXPORTER":                  "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST":          "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT":          strconv.Itoa(metricsPort),
		"AUTHENTICATION__API_KEYS_FILE":          keysFile,
		"AUTHENTICATION__API_KEYS_POLL_INTERVAL": "1",
		"CACHE__MAX_STALENESS":                   "60",
		// One connection, and a second's wait for it: a pool timeout is easy to cause (below).
		"DATABASE__POOL_SIZE":    "1",
		"DATABASE__MAX_OVERFLOW": "0",
		"DATABASE__POOL_TIMEOUT": "1",
	})
	const q = `{ records_count { count } }`
	// Computed, then from memory; until the cache has read the data version once, answers
	// bypass it.
	servicetest.WaitFor(t, 10*time.Second, "an answer from memory", func() bool {
		r := svc.GraphQL(t, "/graphql", q, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("records_count: %d %s", r.Status, r.Raw)
		}
		return strings.Contains(r.Header.Get("Cache-Status"), "hit")
	})
	svc.GraphQL(t, "/graphql", `{ distinct_values(columns: ["nope"], start_date: "2025-01-01", end_date: "2025-01-02") { value } }`, nil)
	svc.GraphQLWithHeaders(t, "/graphql", q, nil, map[string]string{svc.Header: "wrong"})
	limitedStatus := 0
	for range 5 {
		limitedStatus = max(limitedStatus, svc.GraphQLWithHeaders(t, "/graphql", q, nil, map[string]string{svc.Header: limited}).Status)
	}
	if limitedStatus != http.StatusTooManyRequests {
		t.Errorf("a key limited to 1/s answered %d five times in a row, want a 429", limitedStatus)
	}
	// A live answer: its first event, then the client leaves.
	liveAnswer(t, svc)
	poolTimeout(t, svc, db)
	if _, err := db.Pool(t).Exec(context.Background(), "NOTIFY emsquery_refresh"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keysFile, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsURL := "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
	var labels map[string]map[string]bool
	servicetest.WaitFor(t, 10*time.Second, "the invalidation and the reload failure on /metrics", func() bool {
		labels = scrape(t, metricsURL)
		return labels["emsquery_cache_invalidations_total"] != nil && labels["emsquery_auth_keys_reload_failures_total"] != nil &&
			labels["db_client_connection_timeouts_total"] != nil
	})

	// The panels of answers that follow their tables: a service with CACHE__CHANGES=replication.
	for name, ls := range followingMetrics(t) {
		if labels[name] == nil {
			labels[name] = map[string]bool{}
		}
		for l := range ls {
			labels[name][l] = true
		}
	}

	target := map[string]bool{"instance": true, "job": true}
	for _, e := range exprs {
		metrics, selected, grouped := promqlNames(e)
		if len(metrics) == 0 {
			t.Errorf("no metric in %q", e)
		}
		anyLabel := map[string]bool{}
		for _, m := range metrics {
			if m == "up" {
				continue
			}
			ls, ok := labels[m]
			if !ok {
				t.Errorf("metric %s is not on the service's /metrics (in %q)", m, e)
				continue
			}
			for l := range ls {
				anyLabel[l] = true
			}
			for _, l := range selected[m] {
				if !ls[l] && !target[l] {
					t.Errorf("metric %s has no label %s (in %q)", m, l, e)
				}
			}
		}
		for _, l := range grouped {
			if !anyLabel[l] && !target[l] && !(len(metrics) == 1 && metrics[0] == "up") {
				t.Errorf("no metric of %q has the label %s it groups by", e, l)
			}
		}
	}
}

// followingMetrics are the metrics of a service with CACHE__CHANGES=replication on a cluster
// with wal_level = logical and the publication (docs/replication.md), after a counting answer
// computed, kept, ended by an INSERT into fact_record, and followed.
func followingMetrics(t *testing.T) map[string]map[string]bool {
	t.Helper()
	c := pgtest.SharedWith(t, pgtest.Options{Conf: "wal_level = logical\nmax_replication_slots = 20\nmax_wal_senders = 20"})
	db := servicetest.FixtureDBOn(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Exec(ctx, db.Name, `CREATE PUBLICATION emsquery FOR TABLE dim_station, dim_resource, dim_patient, fact_record, fact_oxygen`); err != nil {
		t.Fatal(err)
	}
	metricsPort := freePort(t)
	svc := servicetest.Start(t, db, map[string]string{
		"CACHE__CHANGES":                "replication",
		"CACHE__MAX_STALENESS":          "1",
		"OTEL_METRICS_EXPORTER":         "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(metricsPort),
	})
	const q = `{ records_count { count } }`
	servicetest.WaitFor(t, 15*time.Second, "records_count from memory", func() bool {
		return strings.Contains(svc.GraphQL(t, "/graphql", q, nil).Header.Get("Cache-Status"), "hit")
	})
	if _, err := db.Pool(t).Exec(ctx, `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (990001, '2024-03-10 12:00', 1, 'Central')`); err != nil {
		t.Fatal(err)
	}
	metricsURL := "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
	var labels map[string]map[string]bool
	servicetest.WaitFor(t, 15*time.Second, "an answer ended by the load and one followed", func() bool {
		svc.GraphQL(t, "/graphql", q, nil)
		labels = scrape(t, metricsURL)
		return labels["emsquery_cache_ended_total"] != nil && labels["emsquery_cache_followed_total"] != nil
	})
	return labels
}

func newKey(t *testing.T, name string, args ...string) (key, entry string) {
	t.Helper()
	out, err := exec.Command(servicetest.Binary(t), append([]string{"key", "new", "--name", name, "--scopes", "graphql"}, args...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	key, entry, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	return key, entry
}

// scrape reads the service's metrics: each series name (a histogram's _bucket, _sum and _count)
// and the label names its samples carry.
func scrape(t *testing.T, url string) map[string]map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	out := map[string]map[string]bool{}
	add := func(name string, m *dto.Metric, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range m.GetLabel() {
			out[name][l.GetName()] = true
		}
		for _, l := range extra {
			out[name][l] = true
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out
}

func alertExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	var names []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
			names = append(names, r.Alert)
		}
	}
	// The alerts the operators were promised (docs/operations.md).
	for _, want := range []string{"EmsqueryDown", "EmsqueryDatabaseDown", "EmsqueryDataNotRefreshed", "EmsqueryErrorShare", "EmsqueryLatencyP99",
		"EmsqueryPoolExhausted", "EmsqueryPoolTimeouts", "EmsqueryStreamsNearLimit", "EmsqueryCacheNeverHits", "EmsqueryKeysReloadFailing"} {
		if !slices.Contains(names, want) {
			t.Errorf("alerts.yaml has no %s", want)
		}
	}
	return exprs
}

// dashboardExprs are the dashboard's panel queries and its variables' queries (label_values of
// a metric), with Grafana's variables replaced by what Prometheus would see.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*", "$service", "emsquery")
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, grafana.Replace(tg.Expr))
		}
	}
	for _, v := range dash.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			// label_values(metric{matchers}, label): the metric with its matchers and the label.
			matchers := append(strings.Split(strings.Trim(m[2], "{}"), ","), m[3]+`=~".*"`)
			exprs = append(exprs, grafana.Replace(m[1]+"{"+strings.Join(slices.DeleteFunc(matchers, func(s string) bool { return s == "" }), ",")+"}"))
		}
	}
	if len(exprs) < 15 {
		t.Errorf("the dashboard has %d queries; want the panels docs/operations.md lists", len(exprs))
	}
	return exprs
}

var (
	labelValues = regexp.MustCompile(`^label_values\((\w+)(\{[^}]*\})?,\s*(\w+)\)$`)
	strLiteral  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	selector    = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcher     = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	grouping    = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	braces      = regexp.MustCompile(`\{[^}]*\}`)
	ranges      = regexp.MustCompile(`\[[^\]]*\]`)
	ident       = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	number      = regexp.MustCompile(`\b\d+(\.\d+)?(e[+-]?\d+)?\b`)
	keywords    = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
)

// promqlNames reads a PromQL expression's metric names, the labels each selector matches on and
// the labels it groups by; enough PromQL for these files' expressions, not a parser.
func promqlNames(expr string) (metrics []string, selected map[string][]string, grouped []string) {
	e := strLiteral.ReplaceAllString(expr, `""`)
	selected = map[string][]string{}
	for _, m := range selector.FindAllStringSubmatch(e, -1) {
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			selected[m[1]] = append(selected[m[1]], l[1])
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(e, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouped = append(grouped, l)
			}
		}
	}
	e = grouping.ReplaceAllString(e, " ")
	e = braces.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = number.ReplaceAllString(e, " ")
	for _, m := range ident.FindAllStringSubmatch(e, -1) {
		if m[1] != "" || keywords[m[0]] { // a function call, or a keyword
			continue
		}
		if !slices.Contains(metrics, m[0]) {
			metrics = append(metrics, m[0])
		}
	}
	return metrics, selected, grouped
}

// The PromQL reading that the metric check relies on.
func TestPromqlNames(t *testing.T) {
	metrics, selected, grouped := promqlNames(`histogram_quantile(0.99, sum by (le, http_route) (rate(a_bucket{x="y,z}", w=~"5.."}[5m]))) / on(instance) b_total > 0.05 unless up == 0`)
	if !slices.Equal(metrics, []string{"a_bucket", "b_total", "up"}) {
		t.Errorf("metrics %q", metrics)
	}
	if !slices.Equal(selected["a_bucket"], []string{"x", "w"}) {
		t.Errorf("selected %q", selected)
	}
	if !slices.Equal(grouped, []string{"le", "http_route", "instance"}) {
		t.Errorf("grouped %q", grouped)
	}
}

// liveAnswer opens a subscription over SSE and reads its first event.
func liveAnswer(t *testing.T, svc *servicetest.Service) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, svc.URL+"/graphql", strings.NewReader(`{"query":"subscription { records_count { count } }"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(svc.Header, svc.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if resp.StatusCode != http.StatusOK || err != nil || line != "event: next\n" {
		t.Fatalf("subscription: HTTP %d, first line %q (%v)", resp.StatusCode, line, err)
	}
}

// poolTimeout makes a request wait in vain for a database connection (the service's pool holds
// one, DATABASE__POOL_TIMEOUT 1 s): a first request takes the connection and blocks on a lock of
// fact_record that the test holds, a second waits for the connection past the timeout; then the
// lock goes and the first completes.
func poolTimeout(t *testing.T, svc *servicetest.Service, db servicetest.DB) {
	t.Helper()
	ctx := context.Background()
	pool := db.Pool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE fact_record IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	// Raw requests: a goroutine must not end the test. Aliases make each question new to the
	// cache, so that neither is answered from memory or waits for the other's answer.
	post := func(query string) (int, error) {
		body, _ := json.Marshal(map[string]string{"query": query})
		req, err := http.NewRequest(http.MethodPost, svc.URL+"/graphql", strings.NewReader(string(body)))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(svc.Header, svc.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	type result struct {
		status int
		err    error
	}
	held := make(chan result, 1)
	go func() {
		status, err := post(`{ held: records_count { count } }`)
		held <- result{status, err}
	}()
	servicetest.WaitFor(t, 10*time.Second, "the first request waiting on the lock", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'emsquery' AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n > 0
	})
	// Its answer (a GraphQL error, SERVICE_UNAVAILABLE) matters less than the count it leaves.
	if _, err := post(`{ waiting: records_count { count } }`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-held; r.err != nil || r.status != http.StatusOK {
		t.Errorf("the request that held the connection: %d %v", r.status, r.err)
	}
}

// runbookBase is where the alerts' runbook_url point: docs/operations.md of the repository
// (the chart's prometheusRule.runbookBaseUrl replaces it).
const runbookBase = "https://github.com/emsanalytics/emsquery/blob/main/docs/operations.md"

// TestAlertRules runs `promtool test rules` on deploy/prometheus/alerts_test.yaml and checks
// that it holds, for every alert of alerts.yaml, a case where the alert fires and one where it
// does not (an evaluation expecting no alert of that name); and that every alert's runbook_url
// is the section of docs/operations.md named after the alert, and that the section exists.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(deploytest.Root(), "deploy", "prometheus")
	promtool := deploytest.Tool(t, "promtool", "Debian package prometheus; make test-deps installs it", "/usr/bin/promtool")
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	readYAML(t, filepath.Join(dir, "alerts.yaml"), &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, filepath.Join(dir, "alerts_test.yaml"), &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}

	ops, err := os.ReadFile(filepath.Join(deploytest.Root(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := markdownAnchors(string(ops))
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alerts_test.yaml: %s has a firing case %v and a quiet case %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			want := runbookBase + "#" + strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
			}
			if !sections[strings.ToLower(r.Alert)] {
				t.Errorf("%s: docs/operations.md has no section %q (the alert's runbook)", r.Alert, r.Alert)
			}
		}
	}
	if n < 10 {
		t.Errorf("alerts.yaml has %d alerts", n)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// markdownAnchors are the anchors GitHub gives a Markdown file's headings: lower case, spaces
// as hyphens, other punctuation dropped (outside fenced code blocks).
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}
