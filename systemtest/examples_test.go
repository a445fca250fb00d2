package systemtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// The client examples of docs/examples/ (besides the wall board, wallboard_test.go), each run
// against the real binary on demo data (internal/demodata), their figures checked against SQL.

// exampleRecords is the size of the demo data the examples run on: every station, urgency and
// NULL the generator makes, loaded in a second or two.
const exampleRecords = 20000

// missingTool fails the test under CI, where scripts/test-deps.sh must have installed what the
// examples need, and skips it elsewhere.
func missingTool(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("this test needs %s (scripts/test-deps.sh installs it)", what)
	}
	t.Skipf("this test needs %s (scripts/test-deps.sh installs it)", what)
}

// pythonWithPandas is a Python 3 that imports pandas and requests: Debian's first (where the
// Debian packages put them), then whichever python3 is on PATH.
func pythonWithPandas(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		if exec.Command(p, "-c", "import pandas, requests").Run() == nil {
			return p
		}
	}
	missingTool(t, "python3 with pandas and requests (Debian packages python3-pandas, python3-requests)")
	return ""
}

// TestPythonExample runs docs/examples/python/station_report.py: the records per station it
// reads through GraphQL and through the CSV export, the mean response time and the share
// transported it computes with pandas from the export's rows, each as SQL gives them, for every
// station (the records without one included) and no other.
func TestPythonExample(t *testing.T) {
	python := pythonWithPandas(t)
	t.Parallel()
	db := demoDB(t, exampleRecords)
	svc := servicetest.Start(t, db, nil)

	const start, end = "2025-12-01", "2025-12-31"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "../docs/examples/python/station_report.py",
		"--url", svc.URL, "--start", start, "--end", end, "--format", "tsv")
	cmd.Env = append(os.Environ(), "EMSQUERY_API_KEY="+svc.Key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("station_report.py: %v\n%s%s", err, out, stderr.String())
	}
	r := csv.NewReader(bytes.NewReader(out))
	r.Comma = '\t'
	table, err := r.ReadAll()
	if err != nil || len(table) < 2 {
		t.Fatalf("station_report.py printed no table (%v):\n%s", err, out)
	}
	if got := strings.Join(table[0], ","); got != "station,records_graphql,records_csv,mean_response_s,transported_share" {
		t.Fatalf("header %q", got)
	}

	type figures struct {
		records       int64
		meanResponse  *float64
		transportedSh *float64
	}
	want := map[string]figures{}
	rows, err := db.Pool(t).Query(context.Background(), `
		SELECT coalesce(station, '(no station)'), count(*), avg(response_time_s)::float8,
		       avg(CASE WHEN transported THEN 1.0 WHEN NOT transported THEN 0.0 END)::float8
		FROM fact_record WHERE occurred_at >= $1::date AND occurred_at < $2::date + 1 GROUP BY 1`, start, end)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var station string
		var f figures
		if err := rows.Scan(&station, &f.records, &f.meanResponse, &f.transportedSh); err != nil {
			t.Fatal(err)
		}
		want[station] = f
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if _, ok := want["(no station)"]; !ok || len(want) < 10 {
		t.Fatalf("the demo data should have many stations and records without one in %s..%s: %v", start, end, want)
	}

	// The script rounds the mean to 0.1 s and the share to 0.001.
	near := func(got string, want *float64, within float64) bool {
		if want == nil {
			return got == ""
		}
		g, err := strconv.ParseFloat(got, 64)
		return err == nil && math.Abs(g-*want) <= within/2+1e-9
	}
	seen := map[string]bool{}
	for _, line := range table[1:] {
		station := line[0]
		w, ok := want[station]
		if !ok || seen[station] {
			t.Errorf("station %q: not in SQL's answer, or twice", station)
			continue
		}
		seen[station] = true
		n := strconv.FormatInt(w.records, 10)
		if line[1] != n || line[2] != n {
			t.Errorf("%s: records %s (GraphQL), %s (CSV); SQL says %s", station, line[1], line[2], n)
		}
		if !near(line[3], w.meanResponse, 0.1) || !near(line[4], w.transportedSh, 0.001) {
			t.Errorf("%s: mean response %q, transported share %q; SQL says %v, %v", station, line[3], line[4], deref(w.meanResponse), deref(w.transportedSh))
		}
	}
	if len(seen) != len(want) {
		t.Errorf("the table has %d stations, SQL %d:\n%s", len(seen), len(want), out)
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// tsExample is the TypeScript example's folder, with the npm packages its package.json pins
// (npm ci, by scripts/test-deps.sh).
func tsExample(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../docs/examples/typescript")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missingTool(t, "node")
	}
	for _, bin := range []string{"graphql-codegen", "tsc"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", bin)); err != nil {
			missingTool(t, "docs/examples/typescript/node_modules (npm ci there)")
		}
	}
	return dir
}

// runIn runs a command in dir, failing the test with its output when it fails.
func runIn(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

var monthCount = regexp.MustCompile(`(\d{4}-\d{2}) (\d+)`)

// TestTypeScriptExample builds docs/examples/typescript as its reader would (types generated
// from schema/graphql/public.graphql by graphql-codegen, then tsc, strict) and runs it against
// the service: its first answer is the missions per month as SQL counts them, and after an
// INSERT and its NOTIFY (with an hour's staleness bound, so only the NOTIFY can have sent it) its
// second answer is the new count; then it leaves on its own, exit 0.
func TestTypeScriptExample(t *testing.T) {
	dir := tsExample(t)
	t.Parallel()
	runIn(t, dir, filepath.Join(dir, "node_modules", ".bin", "graphql-codegen"), "--config", "codegen.yml")
	runIn(t, dir, filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", ".")

	db := demoDB(t, exampleRecords)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, map[string]string{"CACHE__MAX_STALENESS": "3600"})
	waitCacheLive(t, svc)
	const start, end = "2025-10-01", "2025-12-31"
	perMonth := func() string {
		rows, err := pool.Query(context.Background(), `
			SELECT to_char(date_trunc('month', occurred_at), 'YYYY-MM'), count(*) FROM fact_record
			WHERE occurred_at >= $1::date AND occurred_at < $2::date + 1 GROUP BY 1 ORDER BY 1`, start, end)
		if err != nil {
			t.Fatal(err)
		}
		var months []string
		for rows.Next() {
			var month string
			var n int64
			if err := rows.Scan(&month, &n); err != nil {
				t.Fatal(err)
			}
			months = append(months, fmt.Sprintf("%s %d", month, n))
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return strings.Join(months, ", ")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "dist/live.js", start, end)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GRAPHQL_URL="+svc.URL+"/graphql", "EMSQUERY_API_KEY="+svc.Key)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(out)
	answer := func(n int) string {
		line, err := lines.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, fmt.Sprintf("answer %d: ", n)) {
			rest, _ := io.ReadAll(lines)
			t.Fatalf("want answer %d, got %q (%v)\n%s", n, line, err, rest)
		}
		var months []string
		for _, m := range monthCount.FindAllStringSubmatch(line, -1) {
			months = append(months, m[1]+" "+m[2])
		}
		return strings.Join(months, ", ")
	}

	if got, want := answer(1), perMonth(); got != want {
		t.Fatalf("first answer %q, SQL says %q", got, want)
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at) SELECT max(record_id) + 1, '2025-11-15 12:00' FROM fact_record`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
		t.Fatal(err)
	}
	if got, want := answer(2), perMonth(); got != want {
		t.Fatalf("answer after the INSERT and NOTIFY %q, SQL says %q", got, want)
	}
	rest, _ := io.ReadAll(lines)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the client did not leave cleanly after two answers: %v\n%s", err, rest)
	}
}

// infinityPlugin is the Infinity data source's plugin id.
const infinityPlugin = "yesoreyeram-infinity-datasource"

// infinityTarget is a panel query of the Infinity plugin, GraphQL over a URL, with the keys of
// its query model (the plugin's InfinityGraphQLQuery: type, source, url, url_options, parser,
// root_selector, columns, format). It is decoded strictly, so that a key the plugin does not
// know (a misspelt rootSelector, say) fails instead of being ignored by Grafana.
type infinityTarget struct {
	RefID      string `json:"refId"`
	Datasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Type       string `json:"type"`
	Source     string `json:"source"`
	Parser     string `json:"parser"`
	Format     string `json:"format"`
	URL        string `json:"url"`
	URLOptions struct {
		Method               string `json:"method"`
		BodyType             string `json:"body_type"`
		BodyContentType      string `json:"body_content_type"`
		BodyGraphQLQuery     string `json:"body_graphql_query"`
		BodyGraphQLVariables string `json:"body_graphql_variables"`
		Headers              []struct{ Key, Value string }
		Params               []struct{ Key, Value string }
	} `json:"url_options"`
	RootSelector string `json:"root_selector"`
	Columns      []struct {
		Selector        string `json:"selector"`
		Text            string `json:"text"`
		Type            string `json:"type"`
		TimestampFormat string `json:"timestampFormat"`
	} `json:"columns"`
	Filters []json.RawMessage `json:"filters"`
}

// The values the plugin's query model allows for a GraphQL query (src/types/query.types.ts).
var (
	infinityParsers     = []string{"simple", "backend", "uql", "groq"}
	infinityFormats     = []string{"table", "timeseries", "dataframe", "as-is"}
	infinityColumnTypes = []string{"string", "number", "timestamp", "timestamp_epoch", "timestamp_epoch_s", "boolean"}
)

// grafanaTimeRange are the dashboard's time range variables and what the test puts in their
// place: the last quarter of the demo data.
var grafanaTimeRange = strings.NewReplacer(
	"${__from:date:YYYY-MM-DD}", "2025-10-01",
	"${__to:date:YYYY-MM-DD}", "2025-12-31",
)

// selectPath follows a gjson-style path (the backend parser's column selectors, and a root
// selector that is a plain path): keys and array indexes joined by dots.
func selectPath(v any, path string) (any, bool) {
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[part]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// infinityDataSource is the part of docs/examples/grafana/datasource.yaml (Grafana's
// provisioning of an Infinity data source) that the dashboard relies on.
type infinityDataSource struct {
	APIVersion  int `json:"apiVersion"`
	Datasources []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		URL      string `json:"url"`
		JSONData struct {
			AuthMethod string `json:"auth_method"`
			APIKeyType string `json:"apiKeyType"`
			APIKeyKey  string `json:"apiKeyKey"`
		} `json:"jsonData"`
		SecureJSONData struct {
			APIKeyValue string `json:"apiKeyValue"`
		} `json:"secureJsonData"`
	} `json:"datasources"`
}

// TestGrafanaDashboardExample: docs/examples/grafana/missions-dashboard.json is a dashboard
// whose every panel query is an Infinity GraphQL query in the plugin's own query shape, on the
// data source the dashboard's datasource variable picks, with the key left to the data source's
// settings (datasource.yaml beside it: the plugin's API key authentication in a header, the key
// and the address from Grafana's environment); each query, its time range filled in, is answered
// by the service without errors to a key of the graphql scope alone sent as that data source
// sends it, its root selector finds rows and each column selector a value of the column's type
// in every row. The missions stat is SQL's count.
func TestGrafanaDashboardExample(t *testing.T) {
	t.Parallel()
	yml, err := os.ReadFile("../docs/examples/grafana/datasource.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(yml)
	if err != nil {
		t.Fatalf("datasource.yaml: %v", err)
	}
	var provisioning infinityDataSource
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&provisioning); err != nil || provisioning.APIVersion != 1 || len(provisioning.Datasources) != 1 {
		t.Fatalf("datasource.yaml is not one data source of Grafana's provisioning (apiVersion 1): %v\n%s", err, js)
	}
	ds := provisioning.Datasources[0]
	if ds.Type != infinityPlugin || !strings.HasPrefix(ds.URL, "$") || ds.JSONData.AuthMethod != "apiKey" || ds.JSONData.APIKeyType != "header" ||
		ds.JSONData.APIKeyKey == "" || !strings.HasPrefix(ds.SecureJSONData.APIKeyValue, "$") {
		t.Errorf("datasource.yaml: want the %s plugin, its URL and key from the environment, the key in a header: %s", infinityPlugin, js)
	}

	raw, err := os.ReadFile("../docs/examples/grafana/missions-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct{ Name, Type, Query string }
		}
		Panels []struct {
			ID         int
			Type       string
			Title      string
			Datasource struct{ Type, UID string }
			Targets    []json.RawMessage
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("not a dashboard: %v", err)
	}
	if dash.UID == "" || dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("a dashboard needs a uid, a title and panels: %q %q %d", dash.UID, dash.Title, len(dash.Panels))
	}
	hasVar := false
	for _, v := range dash.Templating.List {
		hasVar = hasVar || (v.Name == "datasource" && v.Type == "datasource" && v.Query == infinityPlugin)
	}
	if !hasVar {
		t.Errorf("no datasource variable of the %s plugin", infinityPlugin)
	}

	db := demoDB(t, exampleRecords)
	key := newTestKey("grafana", "graphql")
	keys := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, keys, key)
	svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEYS_FILE": keys, "AUTHENTICATION__API_KEY_HEADER": ds.JSONData.APIKeyKey})
	var sqlMissions int64
	if err := db.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM fact_record WHERE occurred_at >= '2025-10-01' AND occurred_at < '2026-01-01'`).Scan(&sqlMissions); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range dash.Panels {
		what := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.Datasource.Type != infinityPlugin || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("%s: datasource %+v, %d queries; want the %s plugin through ${datasource}", what, p.Datasource, len(p.Targets), infinityPlugin)
			continue
		}
		for _, rawTarget := range p.Targets {
			var q infinityTarget
			dec := json.NewDecoder(bytes.NewReader(rawTarget))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&q); err != nil {
				t.Errorf("%s: not the Infinity query shape: %v", what, err)
				continue
			}
			o := q.URLOptions
			switch {
			case q.RefID == "" || q.Datasource.Type != infinityPlugin || q.Datasource.UID != "${datasource}":
				t.Errorf("%s: refId %q, datasource %+v", what, q.RefID, q.Datasource)
			case q.Type != "graphql" || q.Source != "url" || !strings.HasSuffix(q.URL, "graphql"):
				t.Errorf("%s: type %q, source %q, url %q; want a graphql query of a GraphQL endpoint's URL", what, q.Type, q.Source, q.URL)
			case o.Method != "POST" || o.BodyType != "graphql" || o.BodyContentType != "application/json":
				t.Errorf("%s: method %q, body_type %q, body_content_type %q; want POST, graphql, application/json", what, o.Method, o.BodyType, o.BodyContentType)
			case !contains(infinityParsers, q.Parser) || !contains(infinityFormats, q.Format) || q.RootSelector == "" || len(q.Columns) == 0:
				t.Errorf("%s: parser %q, format %q, root_selector %q, %d columns", what, q.Parser, q.Format, q.RootSelector, len(q.Columns))
			case len(o.Headers) > 0 || len(o.Params) > 0:
				t.Errorf("%s: headers or parameters in the query; the key belongs in the data source's settings", what)
			}
			for _, c := range q.Columns {
				if c.Selector == "" || c.Text == "" || !contains(infinityColumnTypes, c.Type) {
					t.Errorf("%s: column %+v", what, c)
				}
			}
			vars := map[string]any{}
			if o.BodyGraphQLVariables != "" {
				if err := json.Unmarshal([]byte(grafanaTimeRange.Replace(o.BodyGraphQLVariables)), &vars); err != nil {
					t.Errorf("%s: body_graphql_variables is not a JSON object: %v", what, err)
				}
			}
			query := grafanaTimeRange.Replace(o.BodyGraphQLQuery)
			if strings.Contains(query, "$") {
				t.Errorf("%s: a variable the test does not fill in:\n%s", what, query)
				continue
			}

			// The query as the plugin sends it: POST {query, variables} to the data source's
			// URL followed by the query's url.
			r := svc.GraphQLWithHeaders(t, q.URL, query, vars, map[string]string{ds.JSONData.APIKeyKey: key.secret})
			if r.Status != 200 || len(r.Errors) > 0 {
				t.Errorf("%s: HTTP %d, errors %s", what, r.Status, r.Raw)
				continue
			}
			var body any
			if err := json.Unmarshal(r.Raw, &body); err != nil {
				t.Fatal(err)
			}
			root, ok := selectPath(body, q.RootSelector)
			rows, isList := root.([]any)
			if !ok || !isList || len(rows) == 0 {
				t.Errorf("%s: root_selector %q finds no rows in %.300s", what, q.RootSelector, r.Raw)
				continue
			}
			for i, row := range rows {
				for _, c := range q.Columns {
					v, ok := selectPath(row, c.Selector)
					_, isNumber := v.(float64)
					_, isString := v.(string)
					if !ok || (c.Type == "number" && !isNumber && v != nil) || (c.Type == "string" && !isString && v != nil) {
						t.Errorf("%s: row %d: column %q (%s) selects %v (found %t)", what, i, c.Selector, c.Type, v, ok)
					}
				}
			}
			if p.Type == "stat" {
				if n, _ := selectPath(rows[0], "count"); n != float64(sqlMissions) {
					t.Errorf("%s: count %v, SQL says %d", what, n, sqlMissions)
				}
			}
			checked++
		}
	}
	if checked < len(dash.Panels) {
		t.Errorf("%d of %d panels' queries checked out", checked, len(dash.Panels))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
