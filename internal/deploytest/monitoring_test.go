package deploytest_test

import (
	"bufio"
	"context"
	"encoding/json"
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

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/emsanalytics/emsquery/internal/deploytest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// TestAlertsAndDashboard: `promtool check rules` accepts deploy/prometheus/alerts.yaml, and every
// metric that it or deploy/grafana/emsquery.json names is on a running service's /metrics after
// a few requests of each kind (answered, from memory, refused for the key, rate-limited, a bad
// query, a NOTIFY, a keys file that does not parse), with every label either file selects or
// groups by. `up`, and the instance and job labels, are Prometheus's own.
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
		return labels["emsquery_cache_invalidations_total"] != nil && labels["emsquery_auth_keys_reload_failures_total"] != nil
	})

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
	for _, want := range []string{"EmsqueryDown", "EmsqueryErrorShare", "EmsqueryLatencyP99", "EmsqueryPoolExhausted", "EmsqueryCacheNeverHits", "EmsqueryKeysReloadFailing"} {
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
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	var exprs []string
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, grafana.Replace(tg.Expr))
		}
	}
	for _, v := range dash.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			exprs = append(exprs, m[1]+"{"+m[2]+"=~\".*\"}")
		}
	}
	if len(exprs) < 15 {
		t.Errorf("the dashboard has %d queries; want the panels docs/operations.md lists", len(exprs))
	}
	return exprs
}

var (
	labelValues = regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)
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
