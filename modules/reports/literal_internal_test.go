package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/modules/records"
)

// trickyStrings are values a filter may carry; each must reach the database as exactly itself.
var trickyStrings = []string{
	"", "Central", "O'Brien", "''", "'; DROP TABLE fact_record; --", `back\slash`, `\'`, `\\'`, `'\`,
	`E'x'`, "$1", "$$", "$q$", `"quoted"`, "Ålesund Sør, \"Kai\" 1's", "Fjord\nside", "tab\there", "\r\n",
	"emoji 🚑", "/* comment", "-- comment", "\u00a0non-breaking", "::text",
}

// TestLiteralRoundTrip sends every literal to PostgreSQL, with standard_conforming_strings on
// and off, and checks that the database reads back the original value of the right type.
func TestLiteralRoundTrip(t *testing.T) {
	c := pgtest.Shared(t)
	cfg, err := c.ConnConfig(pgtest.NewDatabase(t, c))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, scs := range []string{"on", "off"} {
		if _, err := conn.Exec(ctx, "SET standard_conforming_strings = "+scs); err != nil {
			t.Fatal(err)
		}
		for _, s := range trickyStrings {
			lit, err := literal(s)
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			got, err := simpleQuery(ctx, conn, "SELECT "+lit+"::text")
			if err != nil {
				t.Errorf("scs %s: %q as %s: %v", scs, s, lit, err)
				continue
			}
			if got != s {
				t.Errorf("scs %s: %q as %s reads back as %q", scs, s, lit, got)
			}
		}
		// Converted values of each type, through the cast the statements put after them.
		col := func(name string) records.Column { c, _ := records.LookupColumn(name); return c }
		for _, tc := range []struct {
			column, value, cast, want string
		}{
			{"age", "-12", "integer", "-12"},
			{"age", "2147483647", "integer", "2147483647"},
			{"distance", "-.25", "numeric", "-0.25"},
			{"distance", "0009.50", "numeric", "9.50"},
			{"transported", "TRUE", "boolean", "true"},
			{"occurred_at", "2024-03-01", "timestamp", "2024-03-01 00:00:00"},
			{"occurred_at", "2024-03-01T23:59:59.123456", "timestamp", "2024-03-01 23:59:59.123456"},
			{"occurred_at", "0001-01-01 00:00", "timestamp", "0001-01-01 00:00:00"},
		} {
			v, err := records.Convert(col(tc.column), tc.value)
			if err != nil {
				t.Fatal(err)
			}
			lit, err := literal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := simpleQuery(ctx, conn, "SELECT ("+lit+"::"+tc.cast+")::text")
			if err != nil || got != tc.want {
				t.Errorf("scs %s: %s %q as %s: got %q, %v; want %q", scs, tc.column, tc.value, lit, got, err, tc.want)
			}
		}
		d, _ := records.ParseDate("start_date", "2024-02-29")
		lit, _ := literal(d)
		if got, err := simpleQuery(ctx, conn, "SELECT ("+lit+"::date)::text"); err != nil || got != "2024-02-29" {
			t.Errorf("date as %s: %q, %v", lit, got, err)
		}
		// The lists of IN and NOT_IN: every tricky string as an element, and arrays of one.
		arrays := [][]string{trickyStrings, {"NULL"}, {""}, {"{}"}, {`"`}, {`\`}, {"a,b", " spaced ", "{x}"}}
		for _, s := range trickyStrings {
			arrays = append(arrays, []string{s})
		}
		for _, arr := range arrays {
			lit, err := literal(arr)
			if err != nil {
				t.Fatalf("%q: %v", arr, err)
			}
			got, err := simpleQuery(ctx, conn, "SELECT array_to_json("+lit+"::text[])::text")
			if err != nil {
				t.Errorf("scs %s: %q as %s: %v", scs, arr, lit, err)
				continue
			}
			var back []*string
			if err := json.Unmarshal([]byte(got), &back); err != nil || len(back) != len(arr) {
				t.Errorf("scs %s: %q as %s reads back as %s", scs, arr, lit, got)
				continue
			}
			for i := range arr {
				if back[i] == nil || *back[i] != arr[i] {
					t.Errorf("scs %s: %q as %s: element %d reads back as %s", scs, arr, lit, i, got)
				}
			}
		}
	}
}

// simpleQuery runs sql with the simple query protocol, as COPY runs, and returns the one text
// value it selects. pgx's own simple protocol refuses to run with standard_conforming_strings
// off, so this goes through pgconn.
func simpleQuery(ctx context.Context, conn *pgx.Conn, sql string) (string, error) {
	res, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	if err != nil {
		return "", err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return "", fmt.Errorf("%s: want one value, got %v", sql, res)
	}
	return string(res[0].Rows[0][0]), nil
}

func TestLiteralRefuses(t *testing.T) {
	for _, v := range []any{"nul\x00byte", "bad \xff utf-8", 1.5, int(3), nil, []int32{1}, []string{"a", "nul\x00"}, []string{"\xff"},
		time.Date(2024, 1, 1, 0, 0, 0, 0, time.FixedZone("X", 3600))} {
		if l, err := literal(v); err == nil {
			t.Errorf("literal(%#v) = %s, want an error", v, l)
		}
	}
}

func TestInline(t *testing.T) {
	got, err := inline(`SELECT '$1', "$2" WHERE a = $1::text AND b < $2::integer OR c = $10::text`,
		[]any{"x'y", int32(-3), "", "", "", "", "", "", "", `z\`})
	_ = got
	if err == nil || !strings.Contains(err.Error(), "not used") {
		t.Errorf("unused arguments: got %v", err)
	}
	got, err = inline(`SELECT '$1', "$2" WHERE a = $1::text AND b < $2::integer AND c = $1::text`, []any{"x'y", int32(-3)})
	want := `SELECT '$1', "$2" WHERE a = 'x''y'::text AND b < '-3'::integer AND c = 'x''y'::text`
	if err != nil || got != want {
		t.Errorf("inline = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []struct {
		sql  string
		args []any
	}{
		{`a = $1`, []any{"x"}},          // no cast
		{`a = $2::text`, []any{"x"}},    // no such argument
		{`a = $0::text`, []any{"x"}},    // no such argument
		{`a = $::text`, []any{"x"}},     // not a placeholder
		{`a = '$1::text`, []any{"x"}},   // unterminated quote
		{`a = $1::text`, []any{1.5}},    // no literal form
		{`a = $1::text`, []any{"\x00"}}, // NUL
	} {
		if got, err := inline(bad.sql, bad.args); err == nil {
			t.Errorf("inline(%q) = %q, want an error", bad.sql, got)
		}
	}
}

// TestExportStatementHasNoClientText: whatever a filter value holds, the export's statement is
// the service's text with quoted literals, and the same filter compiles to the same condition
// for main_report (with placeholders) and for the export (with literals).
func TestExportStatementHasNoClientText(t *testing.T) {
	a := Args{Records: records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", UseOr: true,
		Filters: []records.Filter{{Column: "station", Operator: records.Equals, Value: ptr("x'); DROP TABLE t; --")},
			{Column: "distance", Operator: records.GreaterThan, Value: ptr("9.5")},
			{Column: "callsign", Operator: records.In, Values: []string{`a"}', DROP`, `\`}},
			{Column: "age", Operator: records.NotIn, Values: []string{"7"}}}}, Page: Page{Limit: 10, Offset: 5}}
	q, args, err := exportSQL(a)
	if err != nil {
		t.Fatal(err)
	}
	sql, err := inline(q, args)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`'x''); DROP TABLE t; --'::text`, `'9.5'::numeric`, `'2024-03-01 00:00:00'::date`,
		`LIMIT '10'::bigint OFFSET '5'::bigint`, ` E'{"a\\"}'', DROP","\\\\"}'::text[]`, `'{"7"}'::text[]::integer[]`, "TO STDOUT WITH (FORMAT csv, HEADER, ENCODING 'UTF8')"} {
		if !strings.Contains(sql, want) {
			t.Errorf("statement lacks %s:\n%s", want, sql)
		}
	}
	if strings.Contains(sql, "$") {
		t.Errorf("placeholder left: %s", sql)
	}
}

// TestExportQueryIsGraphQLArgs: the export's query parameters and main_report's GraphQL
// arguments become the same Go value.
func TestExportQueryIsGraphQLArgs(t *testing.T) {
	tr := true
	limit, offset := 40, 95
	gql, err := GraphQLArgs(Limits{Records: records.Limits{Columns: 20, Filters: 50, FilterValues: 10}, PageSize: 1000}, "2024-03-01", "2024-03-31", []*records.Filter{
		{Column: "station", Operator: records.Equals, Value: ptr("Ålesund Sør, \"Kai\" 1's")},
		{Column: "occurred_at", Operator: records.GreaterThanOrEqual, Value: ptr("2024-03-15 12:00:00")},
		{Column: "municipality", Operator: records.Equals, Value: ptr("")},
		{Column: "station", Operator: records.In, Values: []string{"Alpha", "Beta, North", `q"uote`}},
		{Column: "gender", Operator: records.IsNull},
		{Column: "callsign", Operator: records.Contains, Value: ptr("amb:1")},
	}, &tr, &limit, &offset)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := ParseExportQuery("start_date=2024-03-01&end_date=2024-03-31&use_or=true" +
		"&filter=station:EQUALS:%C3%85lesund+S%C3%B8r%2C+%22Kai%22+1%27s" +
		"&filter=occurred_at:GREATER_THAN_OR_EQUAL:2024-03-15%2012:00:00" +
		"&filter=municipality:EQUALS:" +
		"&filter=station:IN:" + url.QueryEscape(`["Alpha","Beta, North","q\"uote"]`) +
		"&filter=gender:IS_NULL&filter=callsign:CONTAINS:amb:1&limit=40&offset=95")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gql, exp) {
		t.Errorf("GraphQL arguments %+v\nexport query      %+v", gql, exp)
	}
	all, err := ParseExportQuery("start_date=2024-03-01&end_date=2024-03-31")
	if err != nil || all.Page != (Page{Limit: All}) || all.Records.UseOr || len(all.Records.Filters) != 0 {
		t.Errorf("defaults: %+v, %v", all, err)
	}
}

// TestRelayRows: each COPY row's LF becomes CRLF; line breaks inside values stay; the header is
// held until the first data row.
func TestRelayRows(t *testing.T) {
	r := &relay{ready: make(chan struct{}), dst: make(chan io.Writer, 1), abort: make(chan struct{})}
	var out bytes.Buffer
	r.dst <- &out
	for _, msg := range []string{"a,b\n", "1,\"x\ny\"\n", "2,\"\"\n"} {
		if _, err := r.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-r.ready:
	default:
		t.Error("ready not signalled at the first data row")
	}
	if got, want := out.String(), "a,b\r\n1,\"x\ny\"\r\n2,\"\"\r\n"; got != want || r.bytes != int64(len(want)) {
		t.Errorf("relayed %q (%d bytes), want %q", got, r.bytes, want)
	}
}

func ptr(s string) *string { return &s }
