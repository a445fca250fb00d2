package measures_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// Small-cell suppression (contract 6.12.4): each answer with a threshold is the unsuppressed
// answer (checked against SQL by the other tests) with the contract's rules applied here; the
// grid's counts for the complementary cell come from SQL.

// smallOf is the contract's "small": 1 <= n < k.
func smallOf(k int) func(n any) bool {
	return func(n any) bool {
		f, ok := n.(float64)
		return ok && f >= 1 && f < float64(k)
	}
}

// suppressIntervals applies the rules to interval_stats objects decoded from an answer at k 0.
func suppressIntervals(raw []map[string]any, k int) []map[string]any {
	small := smallOf(k)
	out := make([]map[string]any, len(raw))
	for i, o := range raw {
		s := map[string]any{}
		for key, v := range o {
			s[key] = v
		}
		supp := small(o["count"]) || small(o["measured"])
		s["suppressed"] = supp
		s["measured"], s["excluded"] = nil, nil
		n := o["measured"].(float64)
		var comp []any
		for _, c := range o["compliance"].([]any) {
			c := c.(map[string]any)
			w := c["within"].(float64)
			e := map[string]any{"target": c["target"], "within": nil, "share": c["share"], "ci_low": c["ci_low"], "ci_high": c["ci_high"], "suppressed": false}
			if supp || small(w) || small(n-w) {
				e["share"], e["ci_low"], e["ci_high"], e["suppressed"] = nil, nil, nil, true
			}
			comp = append(comp, e)
		}
		if comp == nil {
			comp = []any{}
		}
		s["compliance"] = comp
		if supp {
			s["count"], s["min"], s["max"], s["avg"] = nil, nil, nil, nil
			var fr []any
			for _, f := range o["fractiles"].([]any) {
				fr = append(fr, map[string]any{"p": f.(map[string]any)["p"], "value": nil})
			}
			if fr == nil {
				fr = []any{}
			}
			s["fractiles"] = fr
		}
		out[i] = s
	}
	return out
}

func decodeList(t *testing.T, raw json.RawMessage) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func keyEntry(name, key string, minCell int, scopes ...string) map[string]any {
	d := sha256.Sum256([]byte(key))
	e := map[string]any{"name": name, "sha256": hex.EncodeToString(d[:]), "scopes": scopes}
	if minCell > 0 {
		e["min_cell"] = minCell
	}
	return e
}

func TestSuppression(t *testing.T) {
	t.Parallel()
	plain, public := servicetest.RandomKey(), servicetest.RandomKey()
	keys := keysFile(t, keyEntry("analyst", plain, 0, "graphql", "serve", "lookups", "export"),
		keyEntry("dashboard", public, 11, "graphql", "serve", "lookups", "export"))
	e := start(t, map[string]string{"AUTHENTICATION__API_KEYS_FILE": keys, "AUTHENTICATION__API_KEY": ""})
	// A week of 2022 of its own: 20 records on Monday 10:00, 15 on Tuesday 11:00, 2 on
	// Wednesday 12:00 (the one small cell at k = 11), 12 on Thursday 13:00 (its complement).
	exec(t, e.db, `INSERT INTO fact_record (record_id, occurred_at, station, response_time_s)
		SELECT 700000 + i, CASE WHEN i <= 20 THEN timestamp '2022-01-03 10:00' WHEN i <= 35 THEN timestamp '2022-01-04 11:00'
		                        WHEN i <= 37 THEN timestamp '2022-01-05 12:00' ELSE timestamp '2022-01-06 13:00' END + i * interval '1 second',
		       'Grid', 100 + i
		  FROM generate_series(1, 49) AS i`)
	ask := func(t *testing.T, key, query string, vars map[string]any, field string) json.RawMessage {
		t.Helper()
		resp := e.svc.GraphQLWithHeaders(t, "/graphql", query, vars, map[string]string{e.svc.Header: key})
		if resp.Status != 200 {
			t.Fatalf("status %d: %s", resp.Status, resp.Raw)
		}
		var data map[string]json.RawMessage
		resp.DataInto(t, &data)
		return data[field]
	}

	t.Run("interval_stats", func(t *testing.T) {
		base := map[string]any{"start": "2024-01-01", "end": "2024-12-31", "from": "UNIT_NOTIFIED", "to": "EN_ROUTE",
			"groupBy": []string{"station"}, "bucket": "MONTH", "targets": []float64{0, 20, 60, 1000}, "fractiles": []float64{0.5, 0.9}, "maxSeconds": 1000.0}
		raw := decodeList(t, ask(t, plain, intervalQuery, base, "interval_stats"))
		for _, k := range []int{2, 11, 30} {
			vars := map[string]any{"minCell": k}
			for key, v := range base {
				vars[key] = v
			}
			want := suppressIntervals(raw, k)
			sameAnswer(t, "min_cell argument", ask(t, plain, intervalQuery, vars, "interval_stats"), want)
			var supp, compSupp int
			for _, o := range want {
				if o["suppressed"] == true {
					supp++
				}
				for _, c := range o["compliance"].([]any) {
					if c.(map[string]any)["suppressed"] == true && o["suppressed"] == false {
						compSupp++
					}
				}
			}
			if k == 11 && (supp == 0 || supp == len(want) || compSupp == 0) {
				t.Fatalf("k=11: %d of %d objects and %d compliance entries suppressed: the case does not test suppression", supp, len(want), compSupp)
			}
			if k == 11 {
				// The key's min_cell is the argument's.
				sameAnswer(t, "the key's min_cell", ask(t, public, intervalQuery, base, "interval_stats"), want)
				// An argument never lowers it.
				vars["minCell"] = 2
				sameAnswer(t, "a lower argument", ask(t, public, intervalQuery, vars, "interval_stats"), want)
			}
		}
		// k = 1 suppresses nothing.
		vars := map[string]any{"minCell": 1}
		for key, v := range base {
			vars[key] = v
		}
		sameAnswer(t, "min_cell 1", ask(t, plain, intervalQuery, vars, "interval_stats"), raw)
	})

	t.Run("demand_grid complementary cell and total", func(t *testing.T) {
		filters := []map[string]any{{"column": "station", "operator": "EQUALS", "value": "Grid"}}
		for _, c := range []struct {
			name, start, end string
			k                int
			wantSupp         int
			totalNull        bool
		}{
			{"one small cell and its complement", "2022-01-03", "2022-01-09", 11, 2, false},
			{"several small cells, no complement needed", "2022-01-03", "2022-01-09", 16, 3, false},
			{"nothing small", "2022-01-03", "2022-01-09", 2, 0, false},
			{"one small cell alone: no complement, total withheld", "2022-01-05", "2022-01-05", 11, 1, true},
			{"small total", "2022-01-05", "2022-01-06", 20, 2, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				raw := ask(t, plain, demandQuery, map[string]any{"start": c.start, "end": c.end, "filters": filters, "percentiles": []float64{0.5}}, "demand_grid")
				want := expectDemand(t, e, c.start, c.end, []float64{0.5}, `r.station = 'Grid'`)
				sameAnswer(t, "unsuppressed", raw, want)
				got := ask(t, plain, demandQuery, map[string]any{"start": c.start, "end": c.end, "filters": filters, "percentiles": []float64{0.5}, "minCell": c.k}, "demand_grid")
				var g, w struct {
					Hours int64            `json:"hours"`
					Total *int64           `json:"total"`
					Cells []map[string]any `json:"cells"`
				}
				if err := json.Unmarshal(got, &g); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(want, &w); err != nil {
					t.Fatal(err)
				}
				small := smallOf(c.k)
				// The rules: small cells; with exactly one, the smallest non-zero other too.
				supp := map[int]bool{}
				for i, cell := range w.Cells {
					if small(cell["count"]) {
						supp[i] = true
					}
				}
				complement := true
				if len(supp) == 1 {
					best := -1
					for i, cell := range w.Cells {
						n := cell["count"].(float64)
						if !supp[i] && n > 0 && (best < 0 || n < w.Cells[best]["count"].(float64)) {
							best = i
						}
					}
					if best >= 0 {
						supp[best] = true
					} else {
						complement = false
					}
				}
				if len(supp) != c.wantSupp {
					t.Fatalf("the rules suppress %d cells, the case expects %d", len(supp), c.wantSupp)
				}
				for i, cell := range w.Cells {
					if supp[i] {
						cell["count"], cell["mean_per_hour"], cell["max_per_hour"], cell["suppressed"] = nil, nil, nil, true
						for _, p := range cell["percentiles"].([]any) {
							p.(map[string]any)["value"] = nil
						}
					}
				}
				if small(float64(*w.Total)) || !complement {
					w.Total = nil
				}
				if (w.Total == nil) != c.totalNull {
					t.Fatalf("total null %v, the case expects %v", w.Total == nil, c.totalNull)
				}
				sameAnswer(t, c.name, got, w)
			})
		}
	})

	t.Run("period_comparison", func(t *testing.T) {
		vars := map[string]any{"start": "2024-03-01", "end": "2024-03-31", "groupBy": "station", "from": "CALL", "to": "ARRIVED_ON_SCENE", "target": 500.0}
		raw := ask(t, plain, periodQuery, vars, "period_comparison")
		var p map[string]any
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		small := smallOf(11)
		seen := false
		for _, row := range p["rows"].([]any) {
			row := row.(map[string]any)
			either := false
			for _, side := range []string{"current", "previous"} {
				f := row[side].(map[string]any)
				n, m := f["count"], f["measured"]
				if small(n) || small(m) {
					either = true
					f["count"], f["fractile"], f["share"], f["suppressed"] = nil, nil, nil, true
					seen = true
				} else if share := f["share"]; share != nil {
					within := math.Round(share.(float64) * m.(float64))
					if small(within) || small(m.(float64)-within) {
						f["share"] = nil
					}
				}
				f["measured"] = nil
			}
			if either {
				row["change"], row["change_ratio"] = nil, nil
			}
		}
		if !seen {
			t.Fatalf("no period is suppressed at k=11: %s", raw)
		}
		vars["minCell"] = 11
		sameAnswer(t, "period_comparison at 11", ask(t, plain, periodQuery, vars, "period_comparison"), p)
	})

	t.Run("a key with min_cell", func(t *testing.T) {
		// Allowed: the measures, the unit lists, the lookups.
		ask(t, public, `{ station_resources { station_id } resources { sk_resource } unit_hour_utilization(start_date: "2024-01-01", end_date: "2024-01-31") { uhu } }`, nil, "resources")
		resp := e.svc.GraphQLWithHeaders(t, "/lookups/graphql", `{ time_points { name } stations { station_id } }`, nil, map[string]string{e.svc.Header: public})
		if resp.Status != 200 || len(resp.Errors) > 0 {
			t.Fatalf("lookups: %d %s", resp.Status, resp.Raw)
		}
		// Any other field: FORBIDDEN, HTTP 200, data null; also after the plain key's answer
		// to the same document is kept (the cache keys on the threshold).
		for _, q := range []string{`{ records_count { count } }`, `{ unique_counts(columns: ["station"], start_date: "2024-01-01", end_date: "2024-01-31") { count } }`,
			`{ record_stats(start_date: "2024-01-01", end_date: "2024-01-31", measure: "response_time_s") { count } }`} {
			first := e.svc.GraphQLWithHeaders(t, "/graphql", q, nil, map[string]string{e.svc.Header: plain})
			again := e.svc.GraphQLWithHeaders(t, "/graphql", q, nil, map[string]string{e.svc.Header: plain})
			if len(first.Errors) > 0 || again.Header.Get("Cache-Status") != "emsquery; hit" {
				t.Fatalf("%s: the plain key's answer is not kept (%s): %s", q, again.Header.Get("Cache-Status"), first.Raw)
			}
			resp := e.svc.GraphQLWithHeaders(t, "/graphql", q, nil, map[string]string{e.svc.Header: public})
			var data map[string]any
			_ = json.Unmarshal(resp.Data, &data)
			if resp.Status != 200 || len(resp.Errors) == 0 || resp.Errors[0].Code() != "FORBIDDEN" || data != nil && len(data) != 1 || data != nil && !servicetest.IsNull(data[resp.Errors[0].Path[0].(string)]) {
				t.Fatalf("%s with min_cell 11: %d %s", q, resp.Status, resp.Raw)
			}
		}
		// A subscription of such a field: its first event is the error.
		if ev := firstEvent(t, e.svc, public, `subscription { records_count { count } }`); !strings.Contains(ev, "FORBIDDEN") {
			t.Fatalf("subscription of records_count with min_cell 11: %s", ev)
		}
		if ev := firstEvent(t, e.svc, public, `subscription { demand_grid(start_date: "2022-01-03", end_date: "2022-01-09") { total } }`); strings.Contains(ev, "errors") {
			t.Fatalf("subscription of demand_grid with min_cell 11: %s", ev)
		}
		// The same measure's document: the plain key's kept answer is not the key's.
		q := `{ demand_grid(start_date: "2022-01-03", end_date: "2022-01-09", filters: [{column: "station", operator: EQUALS, value: "Grid"}]) { total cells { count suppressed } } }`
		plainAnswer := ask(t, plain, q, nil, "demand_grid")
		keyed := ask(t, public, q, nil, "demand_grid")
		if string(plainAnswer) == string(keyed) || !strings.Contains(string(keyed), `"suppressed":true`) {
			t.Fatalf("the key with min_cell got the plain answer:\n%s\n%s", plainAnswer, keyed)
		}
		// /serve/graphql and the export: 403.
		resp = e.svc.GraphQLWithHeaders(t, "/serve/graphql", `{ main_report(start_date: "2024-01-01", end_date: "2024-01-31") { total } }`, nil, map[string]string{e.svc.Header: public})
		if resp.Status != http.StatusForbidden || len(resp.Errors) == 0 || resp.Errors[0].Code() != "FORBIDDEN" {
			t.Fatalf("/serve/graphql: %d %s", resp.Status, resp.Raw)
		}
		r, body := e.svc.Get(t, "/v1/reports/main-report/export?start_date=2024-01-01&end_date=2024-01-31",
			map[string]string{e.svc.Header: public, "SERVICE-X-API-KEY": public})
		if r.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "FORBIDDEN") {
			t.Fatalf("export: %d %s", r.StatusCode, body)
		}
		r, _ = e.svc.Get(t, "/v1/reports/main-report/export?start_date=2024-01-01&end_date=2024-01-31",
			map[string]string{e.svc.Header: plain, "SERVICE-X-API-KEY": plain})
		if r.StatusCode != http.StatusOK {
			t.Fatalf("export with the plain key: %d", r.StatusCode)
		}
	})
}

// PRIVACY__MIN_CELL: the measures' threshold for every key, raised but never lowered by the
// argument; no other field changes; a value that is not an integer from 0 to 1000 stops the
// start.
func TestPrivacySetting(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t, true)
	plainSvc := startOn(t, db, nil)
	privSvc := startOn(t, db, map[string]string{"PRIVACY__MIN_CELL": "11"})
	q := `query($k: Int) { interval_stats(start_date: "2024-01-01", end_date: "2024-06-30", from: CALL, to: ARRIVED_ON_SCENE, group_by: ["station"], bucket: MONTH, targets: [300], min_cell: $k) {
		bucket group { value } count measured excluded min max avg fractiles { p value } compliance { target within share ci_low ci_high suppressed } suppressed } }`
	want := plainSvc.Field(t, "/graphql", q, map[string]any{"k": 11}, "interval_stats")
	for _, k := range []any{nil, 0, 5, 11} {
		sameAnswer(t, "PRIVACY__MIN_CELL=11", privSvc.Field(t, "/graphql", q, map[string]any{"k": k}, "interval_stats"), decodeList(t, want))
	}
	stronger := plainSvc.Field(t, "/graphql", q, map[string]any{"k": 25}, "interval_stats")
	sameAnswer(t, "argument above the setting", privSvc.Field(t, "/graphql", q, map[string]any{"k": 25}, "interval_stats"), decodeList(t, stronger))
	other := `{ unique_counts(columns: ["station"], start_date: "2024-01-01", end_date: "2024-01-31") { value count } }`
	sameAnswer(t, "other fields", privSvc.Field(t, "/graphql", other, nil, "unique_counts"), decodeList(t, plainSvc.Field(t, "/graphql", other, nil, "unique_counts")))

	for _, bad := range []string{"abc", "-1", "1001", "2.5"} {
		svc := servicetest.Launch(t, servicetest.DB{}, map[string]string{"PRIVACY__MIN_CELL": bad})
		code, err := svc.Wait(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 || !strings.Contains(svc.Output(), "PRIVACY__MIN_CELL") {
			t.Errorf("PRIVACY__MIN_CELL=%s: exit %d\n%s", bad, code, svc.Output())
		}
	}
}

// firstEvent opens a subscription with key and returns the data of its first event.
func firstEvent(t *testing.T, svc *servicetest.Service, key, query string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequest(http.MethodPost, svc.URL+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(svc.Header, key)
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return d
		}
	}
	t.Fatalf("no event (status %d): %v", resp.StatusCode, sc.Err())
	return ""
}
