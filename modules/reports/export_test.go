package reports_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

const exportPath = "/v1/reports/main-report/export"

// exportQuery is the export's query string for a case: the documented syntax,
// filter=column:OPERATOR:value, percent-encoded as any URL.
func (c reportCase) exportQuery() string {
	v := url.Values{"start_date": {c.start}, "end_date": {c.end}, "use_or": {strconv.FormatBool(c.useOr)}}
	for _, f := range c.filters {
		if f[1] == "IS_NULL" || f[1] == "IS_NOT_NULL" {
			v.Add("filter", f[0]+":"+f[1])
			continue
		}
		v.Add("filter", f[0]+":"+f[1]+":"+f[2]) // IN and NOT_IN: the JSON array
	}
	return v.Encode()
}

// exportHeaders carries the key in the configured header and in SERVICE-X-API-KEY.
func exportHeaders(svc *servicetest.Service) map[string]string {
	return map[string]string{svc.Header: svc.Key, "SERVICE-X-API-KEY": svc.Key}
}

// csvField is how a main_report value reads in the CSV: NULL as an empty field, booleans as
// true/false, numbers as the database writes them, the routes joined with "; ".
func csvFields(r row) []string {
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	i32 := func(n *int32) string {
		if n == nil {
			return ""
		}
		return strconv.Itoa(int(*n))
	}
	b := ""
	if r.Transported != nil {
		b = strconv.FormatBool(*r.Transported)
	}
	return []string{strconv.FormatInt(r.RecordID, 10), r.OccurredAt, str(r.Station), str(r.Callsign), i32(r.ResourceID),
		str(r.DegreeOfUrgency), "distance", i32(r.ResponseTimeS), str(r.Municipality), b, i32(r.PatientAge),
		str(r.PatientGender), strings.Join(r.OxygenRoutes, "; ")}
}

const distanceField = 6

// sameRow compares a CSV record with a main_report row; distance compares as a number (the CSV
// has numeric(7,2)'s text, 9.50, GraphQL the number 9.5).
func sameRow(rec []string, r row) bool {
	want := csvFields(r)
	if len(rec) != len(want) {
		return false
	}
	for i := range want {
		if i == distanceField {
			if r.Distance == nil {
				if rec[i] != "" {
					return false
				}
				continue
			}
			f, err := strconv.ParseFloat(rec[i], 64)
			if err != nil || f != *r.Distance {
				return false
			}
			continue
		}
		if rec[i] != want[i] {
			return false
		}
	}
	return true
}

func readCSV(t *testing.T, body []byte) [][]string {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v\n%s", err, body)
	}
	return recs
}

// TestExportEqualsMainReport: for every case, the CSV parsed back is main_report's rows (all of
// them), with the header row naming main_report's fields.
func TestExportEqualsMainReport(t *testing.T) {
	e := start(t, pagingRows)
	all := append(cases, reportCase{name: "paging rows, more than one page", start: "2024-05-01", end: "2024-05-31", nonEmpty: true})
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) {
			vars := c.vars()
			vars["limit"] = 1000
			report := mainReportOf(t, e, vars)
			if c.nonEmpty && len(report.Rows) == 0 {
				t.Fatal("case selects no record; fix the case")
			}
			resp, body := e.svc.Get(t, exportPath+"?"+c.exportQuery(), exportHeaders(e.svc))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			recs := readCSV(t, body)
			if len(recs) == 0 || strings.Join(recs[0], ",") != strings.Join(reportColumns, ",") {
				t.Fatalf("header %v, want %v", recs, reportColumns)
			}
			recs = recs[1:]
			if len(recs) != len(report.Rows) {
				t.Fatalf("%d CSV rows, main_report has %d", len(recs), len(report.Rows))
			}
			for i := range recs {
				if !sameRow(recs[i], report.Rows[i]) {
					t.Errorf("row %d: CSV %q, main_report %s", i, recs[i], js(report.Rows[i]))
				}
			}
		})
	}

	// limit and offset mean what they mean for main_report.
	c := reportCase{start: "2024-05-01", end: "2024-05-31"}
	vars := c.vars()
	vars["limit"], vars["offset"] = 40, 95
	report := mainReportOf(t, e, vars)
	resp, body := e.svc.Get(t, exportPath+"?"+c.exportQuery()+"&limit=40&offset=95", exportHeaders(e.svc))
	recs := readCSV(t, body)
	if resp.StatusCode != 200 || len(recs) != 41 || len(report.Rows) != 40 {
		t.Fatalf("page: status %d, %d CSV records, %d rows", resp.StatusCode, len(recs), len(report.Rows))
	}
	for i, r := range report.Rows {
		if !sameRow(recs[i+1], r) {
			t.Errorf("page row %d: CSV %q, main_report %s", i, recs[i+1], js(r))
		}
	}
}

// TestExportFormat checks the HTTP and CSV details: headers, streaming, RFC 4180 quoting of odd
// station names, CRLF after each record, a header row alone when nothing matches.
func TestExportFormat(t *testing.T) {
	e := start(t, "")
	q := "start_date=2024-03-01&end_date=2024-03-31"
	resp, body := e.svc.Get(t, exportPath+"?"+q, exportHeaders(e.svc))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for h, want := range map[string]string{
		"Content-Type":        "text/csv; charset=utf-8",
		"Content-Disposition": `attachment; filename="main-report_2024-03-01_2024-03-31.csv"`,
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if resp.ContentLength != -1 || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("not streamed: Content-Length %d, Transfer-Encoding %v", resp.ContentLength, resp.TransferEncoding)
	}
	if resp.Header.Get("X-Request-ID") == "" {
		t.Error("no X-Request-ID")
	}
	s := string(body)
	// RFC 4180: quotes doubled inside a quoted field; a comma or a line break only inside quotes.
	for _, want := range []string{"\"Ålesund Sør, \"\"Kai\"\" 1's\"", "\"Fjord\nside\""} {
		if !strings.Contains(s, want) {
			t.Errorf("CSV lacks %q", want)
		}
	}
	if !strings.HasPrefix(s, strings.Join(reportColumns, ",")+"\r\n") || !strings.HasSuffix(s, "\r\n") {
		t.Errorf("records do not end with CRLF: %q", s)
	}
	// Every line break outside quotes is a CRLF; the one inside "Fjord\nside" is data.
	if n := strings.Count(s, "\r\n"); n != len(readCSV(t, body)) {
		t.Errorf("%d CRLFs for %d records", n, len(readCSV(t, body)))
	}

	resp, body = e.svc.Get(t, exportPath+"?start_date=1999-01-01&end_date=1999-01-31", exportHeaders(e.svc))
	if resp.StatusCode != 200 || string(body) != strings.Join(reportColumns, ",")+"\r\n" {
		t.Errorf("no match: want the header row alone, got %d %q", resp.StatusCode, body)
	}

	req, _ := http.NewRequest(http.MethodHead, exportPath+"?"+q, nil)
	for k, v := range exportHeaders(e.svc) {
		req.Header.Set(k, v)
	}
	resp, body = e.svc.Do(t, req)
	if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Errorf("HEAD: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

// TestExportBadArguments: every bad argument is a 400 with the REST error body, and no CSV.
func TestExportBadArguments(t *testing.T) {
	e := start(t, "")
	ok := "start_date=2024-03-01&end_date=2024-03-31"
	for _, tc := range []struct{ name, query, mention string }{
		{"no parameters", "", "start_date"},
		{"no end_date", "start_date=2024-03-01", "end_date"},
		{"impossible date", "start_date=2024-02-30&end_date=2024-03-31", "start_date"},
		{"not a date", "start_date=March&end_date=2024-03-31", "March"},
		{"start after end", "start_date=2024-04-01&end_date=2024-03-31", "after"},
		{"start_date twice", ok + "&start_date=2024-03-02", "once"},
		{"unknown parameter", ok + "&filters=station:EQUALS:Central", "filters"},
		{"unknown column", ok + "&filter=colour:EQUALS:red", "colour"},
		{"unknown operator", ok + "&filter=station:LIKE:Cent", "LIKE"},
		{"filter without operator", ok + "&filter=station", "column:OPERATOR:value"},
		{"value of the wrong type", ok + "&filter=distance:GREATER_THAN:far", "far"},
		{"integer out of range", ok + "&filter=age:EQUALS:99999999999", "99999999999"},
		{"use_or not a boolean", ok + "&use_or=yes", "use_or"},
		{"negative limit", ok + "&limit=-1", "limit"},
		{"limit not a number", ok + "&limit=ten", "limit"},
		{"bad percent-encoding", ok + "&filter=station:EQUALS:%ZZ", "query string"},
		{"value not UTF-8", ok + "&filter=station:EQUALS:%FF", "UTF-8"},
		{"second filter bad", ok + "&filter=station:EQUALS:Central&filter=age:EQUALS:old", "old"},
		{"IN without a JSON array", ok + "&filter=station:IN:Central", "JSON array"},
		{"IN with a number in the array", ok + "&filter=age:IN:[1,2]", "JSON array"},
		{"IN with null in the array", ok + "&filter=station:IN:[%22a%22,null]", "JSON array"},
		{"IN with an empty array", ok + "&filter=station:IN:[]", "filters[0] (IN)"},
		{"IN without values", ok + "&filter=station:IN", "column:OPERATOR:value"},
		{"EQUALS without value", ok + "&filter=station:EQUALS", "column:OPERATOR:value"},
		{"IS_NULL with a value", ok + "&filter=station:IS_NULL:x", "station:IS_NULL"},
		{"IS_NOT_NULL with an empty value", ok + "&filter=station:IS_NOT_NULL:", "takes no value"},
		{"CONTAINS on a number", ok + "&filter=distance:CONTAINS:1", "filters[0] (CONTAINS)"},
		{"a list value of the wrong type", ok + "&filter=age:NOT_IN:[%221%22,%22old%22]", "old"},
	} {
		resp, body := e.svc.Get(t, exportPath+"?"+tc.query, exportHeaders(e.svc))
		var b struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		err := json.Unmarshal(body, &b)
		if resp.StatusCode != 400 || err != nil || b.Error.Code != "BAD_USER_INPUT" || !strings.Contains(b.Error.Message, tc.mention) {
			t.Errorf("%s: want 400 BAD_USER_INPUT mentioning %q, got %d %s", tc.name, tc.mention, resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || resp.Header.Get("Content-Disposition") != "" {
			t.Errorf("%s: Content-Type %q, Content-Disposition %q", tc.name, ct, resp.Header.Get("Content-Disposition"))
		}
		if strings.Contains(string(body), "record_id") {
			t.Errorf("%s: body has CSV: %s", tc.name, body)
		}
	}
	// More values than LIMITS__MAX_FILTER_VALUES (a small one: the default 1000 values make an
	// address longer than the service reads).
	small := servicetest.Start(t, servicetest.FixtureDB(t), map[string]string{"LIMITS__MAX_FILTER_VALUES": "3"})
	resp, body := small.Get(t, exportPath+"?"+ok+"&filter=station:EQUALS:x&filter=station:IN:"+url.QueryEscape(manyValues(4)), exportHeaders(small))
	if resp.StatusCode != 400 || !strings.Contains(string(body), "filters[1] (IN): 4 values exceed LIMITS__MAX_FILTER_VALUES=3") {
		t.Errorf("too many values: %d %s", resp.StatusCode, body)
	}
	if resp, body := small.Get(t, exportPath+"?"+ok+"&filter=station:IN:"+url.QueryEscape(manyValues(3)), exportHeaders(small)); resp.StatusCode != 200 {
		t.Errorf("three values: %d %s", resp.StatusCode, body)
	}
	// A colon in the value is part of it (the space escaped: fasthttp refuses a raw one in the
	// request line as malformed).
	resp, body = e.svc.Get(t, exportPath+"?"+ok+"&filter=occurred_at:GREATER_THAN_OR_EQUAL:2024-03-15%2000:00:01", exportHeaders(e.svc))
	if resp.StatusCode != 200 {
		t.Errorf("value with colons: %d %s", resp.StatusCode, body)
	}
}

// TestExportAuth: the export needs the key in SERVICE-X-API-KEY as well as in the configured
// header; when the configured header is SERVICE-X-API-KEY, that one header does both. Direct
// only: keys are checked before the database is asked, so a backend changes nothing here.
func TestExportAuth(t *testing.T) {
	db := servicetest.FixtureDB(t)
	path := exportPath + "?start_date=2024-03-01&end_date=2024-03-31"
	svc := servicetest.Start(t, db, nil)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"no key", nil, 401},
		{"configured header only", map[string]string{svc.Header: svc.Key}, 401},
		{"SERVICE-X-API-KEY only", map[string]string{"SERVICE-X-API-KEY": svc.Key}, 401},
		{"wrong SERVICE-X-API-KEY", map[string]string{svc.Header: svc.Key, "SERVICE-X-API-KEY": svc.Key + "x"}, 401},
		{"wrong configured header", map[string]string{svc.Header: "x" + svc.Key, "SERVICE-X-API-KEY": svc.Key}, 401},
		{"both", exportHeaders(svc), 200},
	} {
		resp, body := svc.Get(t, path, tc.headers)
		checkAuth(t, tc.name, resp, body, tc.status)
	}
	// Bad arguments without a key: the key is checked first.
	resp, body := svc.Get(t, exportPath+"?start_date=bad", nil)
	checkAuth(t, "bad arguments, no key", resp, body, 401)

	one := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEY_HEADER": "SERVICE-X-API-KEY"})
	resp, body = one.Get(t, path, map[string]string{"SERVICE-X-API-KEY": one.Key})
	checkAuth(t, "configured SERVICE-X-API-KEY, one header", resp, body, 200)
	resp, body = one.Get(t, path, map[string]string{"x-api-key": one.Key})
	checkAuth(t, "configured SERVICE-X-API-KEY, key in x-api-key", resp, body, 401)

	bearer := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEY_HEADER": "Authorization"})
	resp, body = bearer.Get(t, path, map[string]string{"Authorization": "Bearer " + bearer.Key, "SERVICE-X-API-KEY": bearer.Key})
	checkAuth(t, "Authorization: Bearer and SERVICE-X-API-KEY", resp, body, 200)
}

func checkAuth(t *testing.T, name string, resp *http.Response, body []byte, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %d, want %d: %s", name, resp.StatusCode, status, body)
		return
	}
	if status == 401 {
		var b struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(body, &b); err != nil || b.Error.Code != "UNAUTHENTICATED" || bytes.Contains(body, []byte("record_id")) {
			t.Errorf("%s: want the REST error body with UNAUTHENTICATED, got %s", name, body)
		}
	}
}

// manyRows adds 300,000 records in June 2024: tens of megabytes of CSV, more than every buffer
// between the database and the client holds.
const manyRows = `INSERT INTO fact_record (record_id, occurred_at, station, degree_of_urgency,
  distance, response_time_s, municipality, transported)
SELECT 100000 + g, timestamp '2024-06-01' + g * interval '8 seconds', 'Central', 'C', g % 9000 / 7.0,
  g % 1800, 'Oslo', g % 2 = 0
FROM generate_series(1, 300000) AS g`

// TestExportClientDisconnectStopsQuery: a client that hangs up in the middle of a large export
// makes the service cancel the COPY; the connection's query leaves pg_stat_activity, and the
// service keeps serving. Direct only: it is about the service's own connection handling, and
// behind PgBouncer pg_stat_activity shows PgBouncer's server sessions, not the service's.
func TestExportClientDisconnectStopsQuery(t *testing.T) {
	e := start(t, manyRows)
	ctx := context.Background()
	running := func() int {
		var n int
		err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'emsquery' AND state = 'active' AND query LIKE '%COPY (SELECT%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	req, err := http.NewRequest(http.MethodGet, e.svc.URL+exportPath+"?start_date=2024-06-01&end_date=2024-06-30", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range exportHeaders(e.svc) {
		req.Header.Set(k, v)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	// Back-pressure holds the COPY while the client does not read.
	time.Sleep(300 * time.Millisecond)
	if n := running(); n != 1 {
		t.Fatalf("%d COPY statements running while the client holds the response, want 1", n)
	}
	resp.Body.Close()
	closed := time.Now()
	defer func() { t.Logf("COPY gone %v after the hang-up", time.Since(closed)) }()
	deadline := time.Now().Add(10 * time.Second)
	for running() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the COPY still runs 10 s after the client hung up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Log lines reach the output a moment after they are logged.
	servicetest.WaitFor(t, 5*time.Second, "the aborted export logged", func() bool {
		return strings.Contains(e.svc.Output(), "export incomplete")
	})
	// The service still exports.
	resp2, body := e.svc.Get(t, exportPath+"?start_date=2024-03-01&end_date=2024-03-31", exportHeaders(e.svc))
	if resp2.StatusCode != 200 || len(readCSV(t, body)) < 2 {
		t.Errorf("after the hang-up: %d %s", resp2.StatusCode, body)
	}
}

// TestExportStopsAtShutdown: an export whose client does not read does not hold the service
// (or its database connection) past the shutdown bound. Direct only: it is about the service's
// own shutdown, which no backend changes.
func TestExportStopsAtShutdown(t *testing.T) {
	db := servicetest.FixtureDB(t)
	if err := db.Cluster.Exec(context.Background(), db.Name, manyRows); err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Start(t, db, map[string]string{"APP__SHUTDOWN_TIMEOUT": "1"})
	pool := db.Pool(t)
	req, err := http.NewRequest(http.MethodGet, svc.URL+exportPath+"?start_date=2024-06-01&end_date=2024-06-30", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range exportHeaders(svc) {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	svc.Signal(syscall.SIGTERM)
	code, err := svc.Wait(10 * time.Second)
	if err != nil {
		t.Fatalf("service still running 10 s after SIGTERM with a stalled export (shutdown bound 1 s): %v", err)
	}
	t.Logf("exit code %d", code)
	// The server ends a backend a moment after its client closed the socket: poll briefly.
	var n int
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'emsquery'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 || time.Now().After(deadline) {
			break
		}
	}
	if n != 0 {
		t.Errorf("%d service connections left 3 s after exit", n)
	}
	// The client sees an incomplete body, not a CSV that looks complete.
	if _, err := io.Copy(io.Discard, resp.Body); err == nil {
		t.Error("the stalled export's body ended cleanly")
	}
}

// manyValues is a JSON array of n different strings.
func manyValues(n int) string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = strconv.Itoa(i)
	}
	b, _ := json.Marshal(vs)
	return string(b)
}
