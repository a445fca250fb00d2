package gqlhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/platform/answercache"
)

// Outside-in tests of contract 6.10's streamed whole-table lists: the real binary answers over
// real HTTP from a real PostgreSQL database; what the client receives is decoded as it arrives
// (never held whole) and checked against aggregates the database computes; the service's
// memory is read from /proc while it answers.

// administeredAtText is PostgreSQL's ISO text of a timestamp whatever the session's DateStyle:
// seconds always, a fraction (trailing zeros cut) only when there is one (as the patients
// module's tests compute it).
const administeredAtText = `to_char(administered_at, 'YYYY-MM-DD HH24:MI:SS') ||
       CASE WHEN date_trunc('second', administered_at) = administered_at THEN ''
            ELSE rtrim(to_char(administered_at, '.US'), '0') END`

// memoryBound is contract 6.10's bound on the service's process memory while it streams.
const memoryBound = 100 * 1000 * 1000

// streamAtBytes is the answer size from which the body is chunked (64 KiB).
const streamAtBytes = 64 << 10

// fieldKind is how a field of a list is summed: integers as they are, numbers with one decimal
// times ten, texts (dates, timestamps, strings) as the first 32 bits of their MD5, so that the
// database can compute the same sum of the same values.
type fieldKind int

const (
	kindInt fieldKind = iota
	kindDec1
	kindText
	kindTypename // __typename: the value must be the field's sql (the type's name)
)

// field is one selected field of a list and the SQL expression of its value (the contract's
// text of it for a date or a timestamp).
type field struct {
	name string
	kind fieldKind
	sql  string
}

// fieldSum is what the test keeps of one field over a list: the sum of its values (see
// fieldKind) and how many were null.
type fieldSum struct {
	Sum, Nulls int64
}

// listSum is what the test keeps of a list: its length and a sum per selected field.
type listSum struct {
	Rows   int64
	Fields []fieldSum
}

var patientFields = map[string]field{
	"sk_patient":    {"sk_patient", kindInt, "sk_patient"},
	"age":           {"age", kindInt, "age"},
	"date_of_birth": {"date_of_birth", kindText, "to_char(date_of_birth, 'YYYY-MM-DD')"},
	"gender":        {"gender", kindText, "gender"},
	"weight":        {"weight", kindDec1, "weight"},
	"__typename":    {"__typename", kindTypename, "Patient"},
}

var resourceFields = map[string]field{
	"sk_resource": {"sk_resource", kindInt, "sk_resource"},
	"resource_id": {"resource_id", kindInt, "resource_id"},
	"callsign":    {"callsign", kindText, "callsign"},
	"station_id":  {"station_id", kindInt, "station_id"},
	"station":     {"station", kindText, "station"},
	"valid_from":  {"valid_from", kindText, "to_char(valid_from, 'YYYY-MM-DD')"},
	"valid_to":    {"valid_to", kindText, "to_char(valid_to, 'YYYY-MM-DD')"},
}

var oxygenFields = map[string]field{
	"sk_oxygen":       {"sk_oxygen", kindInt, "sk_oxygen"},
	"record_id":       {"record_id", kindInt, "record_id"},
	"route":           {"route", kindText, "route"},
	"flow_rate":       {"flow_rate", kindDec1, "flow_rate"},
	"administered_at": {"administered_at", kindText, administeredAtText},
}

// selection returns the fields named by a GraphQL selection ("sk_patient gender ...").
func selection(t *testing.T, fields map[string]field, sel string) []field {
	t.Helper()
	var out []field
	for _, name := range strings.Fields(sel) {
		f, ok := fields[name]
		if !ok {
			t.Fatalf("test bug: unknown field %q", name)
		}
		out = append(out, f)
	}
	return out
}

// expectedSum computes, in SQL, the listSum of the whole table for fields.
func expectedSum(t *testing.T, pool *pgxpool.Pool, table string, fields []field) listSum {
	t.Helper()
	cols := []string{"count(*)"}
	for _, f := range fields {
		switch f.kind {
		case kindInt:
			cols = append(cols, "coalesce(sum("+f.sql+"), 0)::bigint")
		case kindDec1:
			cols = append(cols, "coalesce(sum(round(("+f.sql+") * 10)), 0)::bigint")
		case kindText:
			cols = append(cols, "coalesce(sum(('x' || substr(md5("+f.sql+"), 1, 8))::bit(32)::bigint), 0)::bigint")
		case kindTypename:
			cols = append(cols, "0::bigint")
		}
		if f.kind == kindTypename {
			cols = append(cols, "0::bigint")
		} else {
			cols = append(cols, "count(*) - count("+f.sql+")")
		}
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + pgx.Identifier{table}.Sanitize()
	want := listSum{Fields: make([]fieldSum, len(fields))}
	dest := []any{&want.Rows}
	for i := range want.Fields {
		dest = append(dest, &want.Fields[i].Sum, &want.Fields[i].Nulls)
	}
	if err := pool.QueryRow(context.Background(), q).Scan(dest...); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	return want
}

// textHash is kindText's value of s: the first 32 bits of its MD5, as the SQL of expectedSum.
func textHash(s []byte) int64 {
	h := md5.Sum(s)
	return int64(binary.BigEndian.Uint32(h[:4]))
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// walkAnswer decodes a GraphQL answer with encoding/json's Decoder as it is read: the
// document's structure token by token, each row of a list with Decode into a wideRow whose
// members add their values to the sums at once (nothing is kept but the sums). It returns the
// listSum of each list in data, whose selection in order is lists' entry for its alias. An
// errors member, an unknown alias or field, a missing field or one out of order, a value of
// the wrong type or a document that is not JSON is an error.
func walkAnswer(r io.Reader, lists map[string][]field) (map[string]*listSum, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	got := map[string]*listSum{}
	expect := func(want json.Delim) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return fmt.Errorf("got %v (%T), want %v", tok, tok, want)
		}
		return nil
	}
	key := func() (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		k, ok := tok.(string)
		if !ok {
			return "", fmt.Errorf("got %v (%T), want a member name", tok, tok)
		}
		return k, nil
	}
	if err := expect('{'); err != nil {
		return got, err
	}
	for dec.More() {
		k, err := key()
		if err != nil {
			return got, err
		}
		if k != "data" {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return got, err
			}
			return got, fmt.Errorf("answer has %s: %.2000s", k, v)
		}
		if err := expect('{'); err != nil {
			return got, err
		}
		for dec.More() {
			alias, err := key()
			if err != nil {
				return got, err
			}
			fields, ok := lists[alias]
			if !ok {
				return got, fmt.Errorf("unexpected member %q in data", alias)
			}
			if got[alias] != nil {
				return got, fmt.Errorf("%q twice in data", alias)
			}
			s := &listSum{Fields: make([]fieldSum, len(fields))}
			got[alias] = s
			row, err := newWideRow(fields, s)
			if err != nil {
				return got, err
			}
			if err := expect('['); err != nil {
				return got, fmt.Errorf("%s: %w", alias, err)
			}
			for dec.More() {
				row.seq = 0
				if err := dec.Decode(row); err != nil {
					return got, fmt.Errorf("%s row %d: %w", alias, s.Rows, err)
				}
				if row.seq != len(fields) {
					return got, fmt.Errorf("%s row %d: %d members, want %d (%s)", alias, s.Rows, row.seq, len(fields), fieldNames(fields))
				}
				s.Rows++
			}
			if err := expect(']'); err != nil {
				return got, err
			}
		}
		if err := expect('}'); err != nil {
			return got, err
		}
	}
	if err := expect('}'); err != nil {
		return got, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return got, fmt.Errorf("after the document: %v", err)
	}
	return got, nil
}

func fieldNames(fields []field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, " ")
}

// member is a member of a wideRow: decoding it checks that it is selected and comes at its
// place in the selection, and adds its value to the list's sum.
type member struct {
	row *wideRow
	f   field
	at  int // place in the selection, from 1; 0: not selected
	sum *fieldSum
}

func (m *member) UnmarshalJSON(b []byte) error {
	m.row.seq++
	if m.at == 0 {
		return fmt.Errorf("%s is not selected", m.f.name)
	}
	if m.at != m.row.seq {
		return fmt.Errorf("%s is member %d, want %d", m.f.name, m.row.seq, m.at)
	}
	return addValue(m.sum, m.f, b)
}

// wideRow has a member for every field of patients, resources and oxygens (their names
// differ), each decoded by member.UnmarshalJSON.
type wideRow struct {
	seq int // members decoded in the current row

	SkPatient      member `json:"sk_patient"`
	Age            member `json:"age"`
	DateOfBirth    member `json:"date_of_birth"`
	Gender         member `json:"gender"`
	Weight         member `json:"weight"`
	Typename       member `json:"__typename"`
	SkResource     member `json:"sk_resource"`
	ResourceID     member `json:"resource_id"`
	Callsign       member `json:"callsign"`
	StationID      member `json:"station_id"`
	Station        member `json:"station"`
	ValidFrom      member `json:"valid_from"`
	ValidTo        member `json:"valid_to"`
	SkOxygen       member `json:"sk_oxygen"`
	RecordID       member `json:"record_id"`
	Route          member `json:"route"`
	FlowRate       member `json:"flow_rate"`
	AdministeredAt member `json:"administered_at"`
}

// newWideRow returns a wideRow that adds the fields selected (in order) to s.
func newWideRow(fields []field, s *listSum) (*wideRow, error) {
	r := &wideRow{}
	byName := map[string]*member{
		"sk_patient": &r.SkPatient, "age": &r.Age, "date_of_birth": &r.DateOfBirth, "gender": &r.Gender,
		"weight": &r.Weight, "__typename": &r.Typename,
		"sk_resource": &r.SkResource, "resource_id": &r.ResourceID, "callsign": &r.Callsign,
		"station_id": &r.StationID, "station": &r.Station, "valid_from": &r.ValidFrom, "valid_to": &r.ValidTo,
		"sk_oxygen": &r.SkOxygen, "record_id": &r.RecordID, "route": &r.Route, "flow_rate": &r.FlowRate,
		"administered_at": &r.AdministeredAt,
	}
	for name, m := range byName {
		m.row, m.f.name = r, name
	}
	for i, f := range fields {
		m, ok := byName[f.name]
		if !ok {
			return nil, fmt.Errorf("test bug: no member %s in wideRow", f.name)
		}
		m.f, m.at, m.sum = f, i+1, &s.Fields[i]
	}
	return r, nil
}

// addValue adds the JSON value b of field f to s.
func addValue(s *fieldSum, f field, b []byte) error {
	if string(b) == "null" {
		if f.kind == kindTypename {
			return errors.New("null __typename")
		}
		s.Nulls++
		return nil
	}
	switch f.kind {
	case kindInt:
		v, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return fmt.Errorf("%s, want an integer", b)
		}
		s.Sum += v
	case kindDec1:
		v, err := strconv.ParseFloat(string(b), 64)
		if err != nil || b[0] == '"' {
			return fmt.Errorf("%s, want a number", b)
		}
		s.Sum += int64(math.Round(v * 10))
	case kindText, kindTypename:
		if b[0] != '"' {
			return fmt.Errorf("%.100s, want a string", b)
		}
		var v []byte
		if bytes.IndexByte(b, '\\') < 0 {
			v = b[1 : len(b)-1]
		} else {
			var str string
			if err := json.Unmarshal(b, &str); err != nil {
				return err
			}
			v = []byte(str)
		}
		if f.kind == kindTypename {
			if string(v) != f.sql {
				return fmt.Errorf("%s, want %q", v, f.sql)
			}
			return nil
		}
		s.Sum += textHash(v)
	}
	return nil
}

// compareSums fails the test where got differs from want for a list.
func compareSums(t *testing.T, what string, fields []field, got *listSum, want listSum) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: not in the answer", what)
		return
	}
	if got.Rows != want.Rows {
		t.Errorf("%s: %d rows, want %d (SQL count(*))", what, got.Rows, want.Rows)
	}
	for i, f := range fields {
		if got.Fields[i] != want.Fields[i] {
			t.Errorf("%s.%s: sum %d, nulls %d; want (SQL) sum %d, nulls %d", what, f.name,
				got.Fields[i].Sum, got.Fields[i].Nulls, want.Fields[i].Sum, want.Fields[i].Nulls)
		}
	}
}

// procStatus reads a field of /proc/<pid>/status in kB, as bytes.
func procStatus(pid int, name string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", name, pid)
}

// rssSampler reads a process's VmRSS every 50 ms until stopped.
type rssSampler struct {
	pid     int
	stop    chan struct{}
	done    chan struct{}
	peak    int64
	samples int
	err     error
}

func sampleRSS(t *testing.T, pid int) *rssSampler {
	t.Helper()
	if _, err := procStatus(pid, "VmRSS"); err != nil {
		t.Fatalf("the service's memory cannot be read: %v", err)
	}
	s := &rssSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			rss, err := procStatus(pid, "VmRSS")
			if err != nil {
				s.err = err
				return
			}
			s.peak = max(s.peak, rss)
			s.samples++
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the peak: the largest VmRSS sampled or the process's
// VmHWM (its peak since it started), whichever is larger.
func (s *rssSampler) Stop(t *testing.T) (sampled, hwm int64) {
	t.Helper()
	close(s.stop)
	<-s.done
	if s.err != nil {
		t.Fatalf("sampling the service's memory: %v", s.err)
	}
	hwm, err := procStatus(s.pid, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	return s.peak, hwm
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// streamClient is a client that does not ask for compression and has no overall timeout (a
// request's context bounds it).
var streamClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// post sends a GraphQL document to the service's /graphql with its key and returns the
// response, its body not read.
func post(t *testing.T, ctx context.Context, svc *servicetest.Service, query string) *http.Response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, svc.URL+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(svc.Header, svc.Key)
	resp, err := streamClient.Do(req)
	if err != nil {
		t.Fatalf("POST /graphql: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4000))
		resp.Body.Close()
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp
}

// chunked tells whether the response came with Transfer-Encoding: chunked.
func chunked(resp *http.Response) bool {
	for _, te := range resp.TransferEncoding {
		if te == "chunked" {
			return true
		}
	}
	return false
}

// streamedAnswer is what streamQuery measured of one answer.
type streamedAnswer struct {
	lists         map[string]*listSum
	bytes         int64
	took          time.Duration
	firstByte     time.Duration
	chunked       bool
	contentLength int64
	sampled, hwm  int64
	baseline      int64
	samples       int
	cacheStatus   string
	err           error // the decoding's, when the answer was not whole and right
}

// streamQuery sends query and decodes the answer as it arrives (walkAnswer) while the
// service's memory is sampled. A decoding error fails the test (after the figures are logged:
// see checkFlat).
func streamQuery(t *testing.T, svc *servicetest.Service, query string, lists map[string][]field) streamedAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var a streamedAnswer
	var err error
	if a.baseline, err = procStatus(svc.PID(), "VmRSS"); err != nil {
		t.Fatal(err)
	}
	sampler := sampleRSS(t, svc.PID())
	start := time.Now()
	resp := post(t, ctx, svc, query)
	defer resp.Body.Close()
	a.firstByte = time.Since(start)
	a.chunked, a.contentLength = chunked(resp), resp.ContentLength
	a.cacheStatus = resp.Header.Get(answercache.HeaderCacheStatus)
	body := &countingReader{r: bufio.NewReaderSize(resp.Body, 64<<10)}
	a.lists, err = walkAnswer(body, lists)
	a.took = time.Since(start)
	a.bytes = body.n
	a.sampled, a.hwm = sampler.Stop(t)
	a.samples = sampler.samples
	if err != nil {
		a.err = err
		t.Errorf("the answer broke off after %s (%s): %v", mb(body.n), a.took.Round(time.Millisecond), err)
	}
	return a
}

// checkFlat fails the test unless the service's memory stayed under memoryBound while it
// answered, and logs the figures.
func checkFlat(t *testing.T, a streamedAnswer) {
	t.Helper()
	t.Logf("answer %s in %s (%.0f MB/s, first byte after %s), chunked %v; service RSS before %s, peak sampled %s (%d samples every 50 ms), VmHWM %s",
		mb(a.bytes), a.took.Round(time.Millisecond), float64(a.bytes)/1e6/a.took.Seconds(), a.firstByte.Round(time.Millisecond),
		a.chunked, mb(a.baseline), mb(a.sampled), a.samples, mb(a.hwm))
	if !a.chunked {
		t.Errorf("a %s answer was not sent chunked (Content-Length %d)", mb(a.bytes), a.contentLength)
	}
	if peak := max(a.sampled, a.hwm); peak >= memoryBound {
		t.Errorf("the service's memory peaked at %s (VmRSS sampled %s, VmHWM %s) while it sent %s; contract 6.10: under %s",
			mb(peak), mb(a.sampled), mb(a.hwm), mb(a.bytes), mb(memoryBound))
	}
}

// exec runs statements on pool, failing the test on the first error.
func exec(t *testing.T, pool *pgxpool.Pool, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
}

// fillPatients fills dim_patient with patients 1 to n, in two statements run at once (two
// cores), with NULLs, text to escape and genders of about 100 bytes so that a row of the full
// selection is about 180 bytes of JSON.
func fillPatients(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	start := time.Now()
	const insert = `INSERT INTO dim_patient (sk_patient, age, date_of_birth, gender, weight)
SELECT i,
       CASE WHEN i % 7 = 0 THEN NULL ELSE i % 110 END,
       CASE WHEN i % 5 = 0 THEN NULL ELSE date '1920-01-01' + (i % 36500)::int END,
       CASE WHEN i % 11 = 0 THEN NULL
            WHEN i % 13 = 0 THEN E'é "quoted" <&> \\ \n\t\u2028 ' || i
            ELSE 'gender ' || (i % 977) || ' ' || repeat('abcdefghij', 9) END,
       CASE WHEN i % 3 = 0 THEN NULL ELSE ((i % 2000) / 10.0)::numeric(5,1) END
FROM generate_series($1::bigint, $2::bigint) AS i`
	var g errgroup.Group
	half := int64(n / 2)
	for _, r := range [][2]int64{{1, half}, {half + 1, int64(n)}} {
		g.Go(func() error {
			_, err := pool.Exec(context.Background(), insert, r[0], r[1])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("fill dim_patient: %v", err)
	}
	exec(t, pool, `ANALYZE dim_patient`)
	t.Logf("dim_patient: %d rows loaded in %s", n, time.Since(start).Round(time.Millisecond))
}

const fullPatient = "sk_patient age date_of_birth gender weight"

// startLive starts the service and waits until its answer cache is live (an answer's
// Cache-Status is no longer bypass, the LISTEN being in place), unless env turns the cache
// off: memory is measured as a running service's, whose cache takes (a copy of) what it sends.
func startLive(t *testing.T, db servicetest.DB, env map[string]string) *servicetest.Service {
	t.Helper()
	svc := servicetest.Start(t, db, env)
	if env["CACHE__ENABLED"] == "false" {
		return svc
	}
	servicetest.WaitFor(t, 15*time.Second, "answer cache live (Cache-Status other than bypass)", func() bool {
		resp := svc.GraphQL(t, "/graphql", `{ __typename }`, nil)
		return resp.Status == http.StatusOK && resp.Header.Get(answercache.HeaderCacheStatus) != answercache.StatusBypass
	})
	return svc
}

// longAnswers are settings under which an answer may take minutes to send: at the default
// LIMITS__STATEMENT_TIMEOUT (30 s) and LIMITS__REQUEST_TIMEOUT (60 s) the service cuts a
// streamed list that takes longer than that to read, however steadily its client reads (see
// TestPatientsStreamSlowSteadyReader); a 500 MB answer takes longer on a busy 2-core machine.
// The memory tests are about memory, so they lift both.
var longAnswers = map[string]string{"LIMITS__STATEMENT_TIMEOUT": "600", "LIMITS__REQUEST_TIMEOUT": "600"}

// TestPatientsStreamedInFlatMemory: a patients answer of more than 500 MB arrives whole and
// right (count and sums against SQL), chunked, while the service's memory stays under 100 MB:
// with the default settings, and with a CACHE__MAX_BYTES larger than the default (400 MB) but
// smaller than the answer, which is then not kept (contract 6.10: the service's memory does not
// grow with the answer's size, a 1 GB answer costs less than 100 MB; nothing there depends on
// the cache's size).
func TestPatientsStreamedInFlatMemory(t *testing.T) {
	const rows = 2_900_000
	db := servicetest.NewDB(t)
	pool := db.Pool(t)
	fillPatients(t, pool, rows)
	fields := selection(t, patientFields, fullPatient)
	want := expectedSum(t, pool, "dim_patient", fields)

	for _, c := range []struct {
		name string
		env  map[string]string
	}{
		{"default settings", nil},
		{"CACHE__MAX_BYTES=400000000", map[string]string{"CACHE__MAX_BYTES": "400000000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			for _, m := range []map[string]string{longAnswers, c.env} {
				for k, v := range m {
					env[k] = v
				}
			}
			svc := startLive(t, db, env)
			a := streamQuery(t, svc, `{ patients { `+fullPatient+` } }`, map[string][]field{"patients": fields})
			checkFlat(t, a)
			if a.err != nil {
				return
			}
			compareSums(t, "patients", fields, a.lists["patients"], want)
			if a.bytes < 500e6 {
				t.Errorf("test check: the answer is %s, want at least 500 MB", mb(a.bytes))
			}
			t.Logf("%d rows, sum(sk_patient) %d; SQL: count(*) %d, sum(sk_patient) %d", a.lists["patients"].Rows,
				a.lists["patients"].Fields[0].Sum, want.Rows, want.Fields[0].Sum)
		})
	}
}

// TestPatientsTenAliases: one document with ten aliases of patients, their selections mixed,
// about 200 MB in all: each list right on its own (count and sums against SQL), chunked, the
// service's memory under 100 MB.
func TestPatientsTenAliases(t *testing.T) {
	const rows = 200_000
	db := servicetest.NewDB(t)
	pool := db.Pool(t)
	fillPatients(t, pool, rows)
	svc := startLive(t, db, longAnswers)

	sels := []string{
		"sk_patient",
		fullPatient,
		"gender sk_patient",
		"weight age",
		"date_of_birth",
		"weight gender date_of_birth age sk_patient",
		"sk_patient gender",
		"__typename age",
		"weight gender date_of_birth",
		fullPatient + " __typename",
	}
	var doc strings.Builder
	doc.WriteString("{\n")
	lists := map[string][]field{}
	for i, sel := range sels {
		alias := fmt.Sprintf("p%d", i)
		fmt.Fprintf(&doc, "  %s: patients { %s }\n", alias, sel)
		lists[alias] = selection(t, patientFields, sel)
	}
	doc.WriteString("}")

	a := streamQuery(t, svc, doc.String(), lists)
	checkFlat(t, a)
	if a.err != nil {
		return
	}
	for i := range sels {
		alias := fmt.Sprintf("p%d", i)
		want := expectedSum(t, pool, "dim_patient", lists[alias])
		compareSums(t, alias+" { "+sels[i]+" }", lists[alias], a.lists[alias], want)
		if i == 0 {
			t.Logf("p0: %d rows, sum(sk_patient) %d; SQL: %d, %d", a.lists[alias].Rows, a.lists[alias].Fields[0].Sum, want.Rows, want.Fields[0].Sum)
		}
	}
	if a.bytes < 200e6 {
		t.Errorf("test check: the answer is %s, want at least 200 MB", mb(a.bytes))
	}
}

// TestPatientsStreamCutOnError: the service's statement is cancelled in the database while
// the client reads a large patients answer slowly (1 MB, then a pause). The client must not be
// able to take what it receives for a whole answer: reading the body to its end is an error
// (the chunked body ends without its last chunk) and what arrived is not a JSON document. The
// access log line of the request says cut=true. The answer (about 52 MB) is small enough for
// the answer cache (CACHE__MAX_BYTES, 64 MiB by default), which must not keep what was cut: the
// same question asked again gets the whole answer, not from the cache.
func TestPatientsStreamCutOnError(t *testing.T) {
	const rows = 300_000 // about 52 MB: far more than the buffers between the database and the client
	db := servicetest.NewDB(t)
	pool := db.Pool(t)
	fillPatients(t, pool, rows)
	svc := startLive(t, db, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	resp := post(t, ctx, svc, `{ patients { `+fullPatient+` } }`)
	defer resp.Body.Close()
	if !chunked(resp) {
		t.Errorf("not chunked: Content-Length %d", resp.ContentLength)
	}
	var got bytes.Buffer
	if _, err := io.CopyN(&got, resp.Body, 1<<20); err != nil {
		t.Fatalf("the first MB: %v", err)
	}
	if !bytes.HasPrefix(got.Bytes(), []byte(`{"data":{"patients":[{"sk_patient":1,`)) {
		t.Fatalf("the answer starts %.200q", got.Bytes())
	}

	// The client reads nothing now: the pipe's backpressure keeps the statement running.
	var cancelled []bool
	servicetest.WaitFor(t, 10*time.Second, "active statement on dim_patient to cancel", func() bool {
		r, err := pool.Query(ctx, `SELECT pg_cancel_backend(pid) FROM pg_stat_activity
WHERE query LIKE '%FROM dim_patient%' AND state = 'active' AND pid <> pg_backend_pid()`)
		if err != nil {
			t.Fatal(err)
		}
		cancelled, err = pgx.CollectRows(r, pgx.RowTo[bool])
		if err != nil {
			t.Fatal(err)
		}
		return len(cancelled) > 0
	})
	t.Logf("pg_cancel_backend after %d bytes received: %v", got.Len(), cancelled)
	time.Sleep(200 * time.Millisecond)

	start := time.Now()
	_, err := io.Copy(&got, resp.Body)
	t.Logf("then read %s more in %s, ended with %v", mb(int64(got.Len())-1<<20), time.Since(start).Round(time.Millisecond), err)
	if err == nil {
		t.Errorf("the body of a cancelled answer read to its end without error (%s received)", mb(int64(got.Len())))
	} else if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("note: the error is %v, not io.ErrUnexpectedEOF", err)
	}
	if json.Valid(got.Bytes()) {
		t.Errorf("what the client received (%d bytes) is a whole JSON document", got.Len())
	}
	var full int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM dim_patient`).Scan(&full); err != nil {
		t.Fatal(err)
	}
	if n := int64(bytes.Count(got.Bytes(), []byte(`{"sk_patient":`))); n >= full {
		t.Errorf("the client received %d rows of %d: the error came too late to test anything", n, full)
	} else {
		t.Logf("the client received %d rows of %d (%s)", n, full, mb(int64(got.Len())))
	}

	id := resp.Header.Get("X-Request-ID")
	if id == "" {
		t.Fatal("no X-Request-ID in the response")
	}
	var line string
	servicetest.WaitFor(t, 10*time.Second, "access log line of the cut request", func() bool {
		for _, l := range strings.Split(svc.Output(), "\n") {
			if strings.Contains(l, "msg=request") && strings.Contains(l, "request_id="+id) {
				line = l
				return true
			}
		}
		return false
	})
	t.Logf("access log: %s", line)
	if !strings.Contains(line, "cut=true") {
		t.Errorf("the access log line of the cut answer does not say cut=true: %s", line)
	}
	if size, ok := logSize(line); !ok {
		t.Errorf("no size in the access log line: %s", line)
	} else if size < int64(got.Len()) {
		t.Errorf("the access log says size=%d, the client received %d bytes", size, got.Len())
	}

	// The service goes on, and the cut answer was not kept: the same question again gets the
	// whole answer, computed anew.
	fields := selection(t, patientFields, fullPatient)
	a := streamQuery(t, svc, `{ patients { `+fullPatient+` } }`, map[string][]field{"patients": fields})
	t.Logf("asked again: %s in %s, chunked %v, Cache-Status %q, %v", mb(a.bytes), a.took.Round(time.Millisecond), a.chunked, a.cacheStatus, a.err)
	if a.cacheStatus == answercache.StatusHit {
		t.Errorf("the answer to the question whose answer was cut came from the cache")
	}
	if a.err == nil {
		compareSums(t, "patients asked again", fields, a.lists["patients"], expectedSum(t, pool, "dim_patient", fields))
	}
}

// logSize is the size attribute of an access log line.
func logSize(line string) (int64, bool) {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "size="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// patientJSON is a patient as the contract writes it, its members in the order of the full
// selection.
type patientJSON struct {
	SkPatient   int64    `json:"sk_patient"`
	Age         *int64   `json:"age"`
	DateOfBirth *string  `json:"date_of_birth"`
	Gender      *string  `json:"gender"`
	Weight      *float64 `json:"weight"`
}

// expectedPatientsBody is the whole answer to `{ patients { fullPatient } }` as encoding/json
// writes it (what the service sent before answers were streamed), from SQL.
func expectedPatientsBody(t *testing.T, pool *pgxpool.Pool) []byte {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT sk_patient, age, to_char(date_of_birth, 'YYYY-MM-DD'), gender, weight::float8
FROM dim_patient ORDER BY sk_patient`)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (patientJSON, error) {
		var p patientJSON
		err := row.Scan(&p.SkPatient, &p.Age, &p.DateOfBirth, &p.Gender, &p.Weight)
		return p, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ps == nil {
		ps = []patientJSON{}
	}
	b, err := json.Marshal(map[string]any{"data": map[string]any{"patients": ps}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// getWhole sends query and returns the response with its whole body.
func getWhole(t *testing.T, svc *servicetest.Service, query string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := post(t, ctx, svc, query)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, b
}

// TestPatientsSmallAnswerNotStreamed: an answer under 64 KiB is sent whole, with a
// Content-Length, byte for byte the JSON encoding/json writes of the rows SQL reads (twice:
// the second may come from the answer cache); from 64 KiB it is chunked and still the same bytes.
func TestPatientsSmallAnswerNotStreamed(t *testing.T) {
	db := servicetest.NewDB(t)
	pool := db.Pool(t)
	fillPatients(t, pool, 40)
	svc := startLive(t, db, nil)

	wantWhole := func(t *testing.T, what, query string, want []byte) {
		t.Helper()
		resp, body := getWhole(t, svc, query)
		t.Logf("%s: %d bytes, Content-Length %d, Cache-Status %q", what, len(body), resp.ContentLength, resp.Header.Get(answercache.HeaderCacheStatus))
		if chunked(resp) || resp.ContentLength != int64(len(body)) {
			t.Errorf("%s: Transfer-Encoding %v, Content-Length %d for a %d-byte answer; want the Content-Length", what, resp.TransferEncoding, resp.ContentLength, len(body))
		}
		if !bytes.Equal(body, want) {
			t.Errorf("%s:\n got %.3000s\nwant %.3000s", what, body, want)
		}
	}
	want := expectedPatientsBody(t, pool)
	if len(want) >= streamAtBytes {
		t.Fatalf("test check: %d bytes is not a small answer", len(want))
	}
	for _, what := range []string{"whole table", "whole table again"} {
		wantWhole(t, what, `{ patients { `+fullPatient+` } }`, want)
	}

	// A page: the first five, as patients(limit: 5) has always answered them.
	var all map[string]map[string][]json.RawMessage
	if err := json.Unmarshal(want, &all); err != nil {
		t.Fatal(err)
	}
	page, err := json.Marshal(map[string]any{"data": map[string]any{"patients": all["data"]["patients"][:5]}})
	if err != nil {
		t.Fatal(err)
	}
	wantWhole(t, "limit 5", `{ patients(limit: 5) { `+fullPatient+` } }`, page)

	// Around 64 KiB: a table whose answer is the first size over it, then one row less. The
	// answer cache is off: the same question is asked of a changed table.
	t.Run("64 KiB", func(t *testing.T) {
		db := servicetest.NewDB(t)
		pool := db.Pool(t)
		fillPatients(t, pool, 500)
		svc := servicetest.Start(t, db, map[string]string{"CACHE__ENABLED": "false"})
		var sizes []int
		all := expectedPatientsBody(t, pool)
		var whole map[string]map[string][]json.RawMessage
		if err := json.Unmarshal(all, &whole); err != nil {
			t.Fatal(err)
		}
		rows := whole["data"]["patients"]
		size := len(`{"data":{"patients":[]}}`) - 1
		over := -1
		for i, r := range rows {
			size += len(r) + 1
			sizes = append(sizes, size)
			if size > streamAtBytes {
				over = i + 1
				break
			}
		}
		if over < 0 {
			t.Fatalf("test check: %d bytes for all rows, not over 64 KiB", size)
		}
		for _, n := range []int{over, over - 1} {
			exec(t, pool, fmt.Sprintf(`DELETE FROM dim_patient WHERE sk_patient > %d`, n))
			want := expectedPatientsBody(t, pool)
			if len(want) != sizes[n-1] {
				t.Fatalf("test check: %d rows are %d bytes, computed %d", n, len(want), sizes[n-1])
			}
			resp, body := getWhole(t, svc, `{ patients { `+fullPatient+` } }`)
			t.Logf("%d rows: %d bytes, Transfer-Encoding %v, Content-Length %d", n, len(body), resp.TransferEncoding, resp.ContentLength)
			if !bytes.Equal(body, want) {
				t.Errorf("%d rows:\n got %.3000s\nwant %.3000s", n, body, want)
			}
			if len(body) > streamAtBytes && !chunked(resp) {
				t.Errorf("%d bytes (over 64 KiB) not chunked", len(body))
			}
			if len(body) < streamAtBytes && (chunked(resp) || resp.ContentLength != int64(len(body))) {
				t.Errorf("%d bytes (under 64 KiB) chunked or without Content-Length", len(body))
			}
		}
	})
}

// TestResourcesAndOxygensStreamed: large resources and oxygens answers are chunked and right
// (count and sums against SQL), the service's memory under 100 MB, the oxygens' answer being
// just small enough for the answer cache to keep it (CACHE__MAX_BYTES, 64 MiB by default).
func TestResourcesAndOxygensStreamed(t *testing.T) {
	// oxygens: about 61 MB, under CACHE__MAX_BYTES (64 MiB), so the answer is also kept.
	const resources, oxygens = 250_000, 500_000
	db := servicetest.NewDB(t)
	pool := db.Pool(t)
	start := time.Now()
	// One batch, one implicit transaction, without the foreign keys' row-by-row triggers (the
	// rows satisfy them): 15 s instead of 30 to 45 s on a busy 2-core machine.
	exec(t, pool, strings.Join([]string{
		`SET LOCAL session_replication_role = replica`,
		`INSERT INTO dim_station (station_id, station_name) SELECT i, 'Station ' || i FROM generate_series(1, 50) AS i`,
		`INSERT INTO dim_resource (sk_resource, resource_id, callsign, station_id, station, valid_from, valid_to)
SELECT i, i / 3,
       'CALL-' || i || CASE WHEN i % 17 = 0 THEN E' "é" \\ <&>' ELSE '' END,
       CASE WHEN i % 9 = 0 THEN NULL ELSE 1 + i % 50 END,
       CASE WHEN i % 9 = 0 THEN NULL ELSE 'Station ' || (1 + i % 50) END,
       date '2015-01-01' + (i % 3000),
       CASE WHEN i % 3 = 2 THEN NULL ELSE date '2015-01-01' + (i % 3000) + 1 + i % 400 END
FROM generate_series(1, ` + strconv.Itoa(resources) + `) AS i`,
		`INSERT INTO fact_record (record_id, occurred_at) SELECT i, timestamp '2024-01-01' + i * interval '1 minute' FROM generate_series(1, 1000) AS i`,
		`INSERT INTO fact_oxygen (sk_oxygen, record_id, route, flow_rate, administered_at)
SELECT i, 1 + i % 1000,
       CASE WHEN i % 9 = 0 THEN NULL WHEN i % 9 = 1 THEN '' ELSE 'route ' || (i % 400) || ' nasal cannula' END,
       CASE WHEN i % 4 = 0 THEN NULL ELSE ((i % 500) / 10.0)::numeric(4,1) END,
       CASE WHEN i % 8 = 0 THEN NULL ELSE timestamp '2024-03-01' + i * interval '1.25 second' END
FROM generate_series(1, ` + strconv.Itoa(oxygens) + `) AS i`,
	}, ";\n"), `ANALYZE`)
	t.Logf("%d resources and %d oxygens loaded in %s", resources, oxygens, time.Since(start).Round(time.Millisecond))
	svc := startLive(t, db, nil)

	for _, c := range []struct {
		root, table, sel string
		fields           map[string]field
	}{
		{"resources", "dim_resource", "sk_resource resource_id callsign station_id station valid_from valid_to", resourceFields},
		{"oxygens", "fact_oxygen", "sk_oxygen record_id route flow_rate administered_at", oxygenFields},
	} {
		t.Run(c.root, func(t *testing.T) {
			fields := selection(t, c.fields, c.sel)
			a := streamQuery(t, svc, `{ `+c.root+` { `+c.sel+` } }`, map[string][]field{c.root: fields})
			checkFlat(t, a)
			if a.err == nil {
				want := expectedSum(t, pool, c.table, fields)
				compareSums(t, c.root, fields, a.lists[c.root], want)
				t.Logf("%d rows, sum(%s) %d; SQL: %d, %d", a.lists[c.root].Rows, fields[0].name, a.lists[c.root].Fields[0].Sum, want.Rows, want.Fields[0].Sum)
			}
		})
	}
}

// throttledReader reads at most rate bytes a second, in reads of at most 16 KiB, for the first
// slowFor, then as fast as it can: a slow but steady client, never stalled.
type throttledReader struct {
	r       io.Reader
	rate    float64
	slowFor time.Duration
	start   time.Time
	n       int64
}

func (t *throttledReader) Read(p []byte) (int, error) {
	if t.start.IsZero() {
		t.start = time.Now()
	}
	if time.Since(t.start) < t.slowFor {
		if due := t.start.Add(time.Duration(float64(t.n) / t.rate * float64(time.Second))); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		p = p[:min(len(p), 16<<10)]
	}
	n, err := t.r.Read(p)
	t.n += int64(n)
	return n, err
}

// TestPatientsStreamSlowSteadyReader: a client that reads a whole-table list steadily, at
// 2.5 MB/s for its first 8 s and then at full speed, past LIMITS__STATEMENT_TIMEOUT or
// LIMITS__REQUEST_TIMEOUT (lowered to 4 s here, so that the test is short), gets the whole
// answer: contract 6.10, "a slow but steady reader is never cut". The same answer read at full
// speed takes less than those 4 s, and it is large enough (about 52 MB) that the statement is
// still running at 4 s: the buffers between the database and the client (kernel sockets,
// mostly) hold some 20 MB, the client has read 10 MB.
func TestPatientsStreamSlowSteadyReader(t *testing.T) {
	const (
		rows    = 300_000
		rate    = 2.5e6
		slowFor = 8 * time.Second
		timeout = 4 * time.Second
	)
	db := servicetest.NewDB(t)
	pool := db.Pool(t)
	fillPatients(t, pool, rows)
	fields := selection(t, patientFields, fullPatient)
	want := expectedSum(t, pool, "dim_patient", fields)
	for _, setting := range []string{"LIMITS__STATEMENT_TIMEOUT", "LIMITS__REQUEST_TIMEOUT"} {
		t.Run(setting, func(t *testing.T) {
			svc := servicetest.Start(t, db, map[string]string{setting: strconv.Itoa(int(timeout.Seconds())), "CACHE__ENABLED": "false"})
			// At full speed first: the answer does not need the 4 s.
			start := time.Now()
			a := streamQuery(t, svc, `{ patients { `+fullPatient+` } }`, map[string][]field{"patients": fields})
			if a.err != nil {
				t.Fatalf("test check: at full speed the answer takes more than %s=%s on this machine: %v", setting, timeout, a.err)
			}
			t.Logf("at full speed: %s in %s", mb(a.bytes), time.Since(start).Round(time.Millisecond))
			compareSums(t, "patients at full speed", fields, a.lists["patients"], want)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start = time.Now()
			resp := post(t, ctx, svc, `{ patients { `+fullPatient+` } }`)
			defer resp.Body.Close()
			body := &throttledReader{r: resp.Body, rate: rate, slowFor: slowFor}
			got, err := walkAnswer(bufio.NewReaderSize(body, 16<<10), map[string][]field{"patients": fields})
			t.Logf("at %s/s for %s, then at full speed: %s in %s, %v", mb(rate), slowFor, mb(body.n), time.Since(start).Round(time.Millisecond), err)
			if err != nil {
				var line string
				for _, l := range strings.Split(svc.Output(), "\n") {
					if strings.Contains(l, "msg=request") && strings.Contains(l, "path=/graphql") {
						line = l
					}
				}
				t.Errorf("a steady reader (%s/s for %s, then full speed) was cut after %s, %s, with %s=%s: %v\naccess log: %s",
					mb(rate), slowFor, mb(body.n), time.Since(start).Round(time.Millisecond), setting, timeout, err, line)
				return
			}
			compareSums(t, "patients read slowly", fields, got["patients"], want)
		})
	}
}
