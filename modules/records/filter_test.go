package records_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// Unit tests of the catalog, the value conversion and the SQL the filter builds; no database.

func col(t *testing.T, name string) records.Column {
	t.Helper()
	c, ok := records.LookupColumn(name)
	if !ok {
		t.Fatalf("column %s not in the catalog", name)
	}
	return c
}

// badInput asserts that err is a BAD_USER_INPUT whose message contains every one of want.
func badInput(t *testing.T, err error, want ...string) {
	t.Helper()
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Code != apierr.BadUserInput {
		t.Fatalf("want a BAD_USER_INPUT error, got %v", err)
	}
	for _, w := range want {
		if !strings.Contains(ae.Message, w) {
			t.Errorf("message %q does not mention %q", ae.Message, w)
		}
	}
}

func TestCatalogIsTheContractTable(t *testing.T) {
	want := []struct {
		name string
		typ  records.ColumnType
		expr string
	}{
		{"station", records.TypeText, `"r"."station"`},
		{"station_id", records.TypeInteger, `"r"."station_id"`},
		{"degree_of_urgency", records.TypeText, `"r"."degree_of_urgency"`},
		{"distance", records.TypeNumeric, `"r"."distance"`},
		{"response_time_s", records.TypeInteger, `"r"."response_time_s"`},
		{"municipality", records.TypeText, `"r"."municipality"`},
		{"transported", records.TypeBoolean, `"r"."transported"`},
		{"occurred_at", records.TypeTimestamp, `"r"."occurred_at"`},
		{"callsign", records.TypeText, `"res"."callsign"`},
		{"resource_id", records.TypeInteger, `"res"."resource_id"`},
		{"gender", records.TypeText, `"p"."gender"`},
		{"age", records.TypeInteger, `"p"."age"`},
	}
	cols := records.Columns()
	if len(cols) != len(want) {
		t.Fatalf("catalog has %d columns, want %d", len(cols), len(want))
	}
	for i, w := range want {
		c := cols[i]
		if c.Name != w.name || c.Type != w.typ || c.Expr() != w.expr {
			t.Errorf("column %d = %s %s %s, want %s %s %s", i, c.Name, c.Type, c.Expr(), w.name, w.typ, w.expr)
		}
		if c.Joined() != !strings.HasPrefix(w.expr, `"r"`) {
			t.Errorf("%s: Joined() = %v", c.Name, c.Joined())
		}
	}
	cols[0].Name = "changed"
	if records.Columns()[0].Name != "station" {
		t.Error("Columns returns the catalog itself, not a copy")
	}
	if _, ok := records.LookupColumn("Station"); ok {
		t.Error("names are case-sensitive")
	}
}

func TestFromAddsOnlyNeededJoins(t *testing.T) {
	const (
		base = "fact_record AS r"
		res  = " LEFT JOIN dim_resource AS res ON res.sk_resource = r.sk_resource"
		pat  = " LEFT JOIN dim_patient AS p ON p.sk_patient = r.sk_patient"
	)
	cases := []struct {
		cols []string
		want string
	}{
		{nil, base},
		{[]string{"station", "distance", "occurred_at"}, base},
		{[]string{"callsign"}, base + res},
		{[]string{"resource_id", "callsign"}, base + res},
		{[]string{"age"}, base + pat},
		{[]string{"gender", "station", "callsign", "age"}, base + res + pat},
	}
	for _, c := range cases {
		var cols []records.Column
		for _, n := range c.cols {
			cols = append(cols, col(t, n))
		}
		if got := records.From(cols...); got != c.want {
			t.Errorf("From(%v) = %q, want %q", c.cols, got, c.want)
		}
	}
}

func TestResolveColumns(t *testing.T) {
	cols, err := records.ResolveColumns([]string{"distance", "station", "distance", "age", "station"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cols {
		names = append(names, c.Name)
	}
	if want := []string{"distance", "station", "age"}; !reflect.DeepEqual(names, want) {
		t.Errorf("ResolveColumns = %v, want %v (first place of each, once)", names, want)
	}

	_, err = records.ResolveColumns(nil)
	badInput(t, err, "columns", "station, station_id")
	_, err = records.ResolveColumns([]string{})
	badInput(t, err, "columns")
	for _, bad := range []string{"nope", "Station", "", "station; DROP TABLE fact_record", `"station"`, "station--", "r.station", "fact_record.station"} {
		_, err := records.ResolveColumns([]string{"station", bad})
		badInput(t, err, "columns[1]", strconv.Quote(bad), records.ColumnNames())
	}
}

func TestConvert(t *testing.T) {
	ts := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04:05.999999", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	good := []struct {
		column, value string
		want          any
	}{
		{"station", "Central", "Central"},
		{"station", "", ""},
		{"station", "' OR 1=1 --", "' OR 1=1 --"},
		{"station", "Ålesund Sør, \"Kai\" 1's", "Ålesund Sør, \"Kai\" 1's"},
		{"station_id", "3", int32(3)},
		{"station_id", "-3", int32(-3)},
		{"station_id", "+3", int32(3)},
		{"station_id", "007", int32(7)},
		{"age", "2147483647", int32(2147483647)},
		{"age", "-2147483648", int32(-2147483648)},
		{"distance", "9.5", "9.5"},
		{"distance", "10", "10"},
		{"distance", "9.50", "9.50"},
		{"distance", "-0.25", "-0.25"},
		{"distance", ".5", ".5"},
		{"distance", "5.", "5."},
		{"transported", "true", true},
		{"transported", "TRUE", true},
		{"transported", "False", false},
		{"occurred_at", "2024-03-01", ts("2024-03-01 00:00:00")},
		{"occurred_at", "2024-03-01 23:59", ts("2024-03-01 23:59:00")},
		{"occurred_at", "2024-03-01 23:59:59", ts("2024-03-01 23:59:59")},
		{"occurred_at", "2024-03-01T23:59:59", ts("2024-03-01 23:59:59")},
		{"occurred_at", "2024-03-01 00:00:00.5", ts("2024-03-01 00:00:00.5")},
		{"occurred_at", "2024-03-01 00:00:00.123456", ts("2024-03-01 00:00:00.123456")},
		{"occurred_at", "2024-02-29 12:00:00", ts("2024-02-29 12:00:00")},
	}
	for _, g := range good {
		got, err := records.Convert(col(t, g.column), g.value)
		if err != nil {
			t.Errorf("Convert(%s, %q): %v", g.column, g.value, err)
			continue
		}
		if !reflect.DeepEqual(got, g.want) {
			t.Errorf("Convert(%s, %q) = %#v, want %#v", g.column, g.value, got, g.want)
		}
	}

	bad := []struct{ column, value string }{
		{"station", "a\x00b"},
		{"station_id", ""},
		{"station_id", "1.0"},
		{"station_id", "1 OR 1=1"},
		{"station_id", " 1"},
		{"station_id", "0x10"},
		{"station_id", "1_000"},
		{"age", "2147483648"},
		{"age", "99999999999"},
		{"response_time_s", "abc"},
		{"distance", ""},
		{"distance", "."},
		{"distance", "abc"},
		{"distance", "' OR 1=1 --"},
		{"distance", "1e3"},
		{"distance", "NaN"},
		{"distance", "Infinity"},
		{"distance", "9,5"},
		{"distance", "9.5 "},
		{"distance", "--1"},
		{"distance", strings.Repeat("9", 131073)},
		{"transported", "yes"},
		{"transported", "t"},
		{"transported", "1"},
		{"transported", ""},
		{"occurred_at", ""},
		{"occurred_at", "yesterday"},
		{"occurred_at", "2024-02-30"},
		{"occurred_at", "2024-13-01"},
		{"occurred_at", "24-3-1"},
		{"occurred_at", "2024-03-01 25:00:00"},
		{"occurred_at", "2024-03-01 23:59:60"},
		{"occurred_at", "2024-03-01T10:00:00Z"},
		{"occurred_at", "2024-03-01T10:00:00+01:00"},
		{"occurred_at", "2024-03-01 10:00:00.1234567"},
		{"occurred_at", "0000-01-01"},
	}
	for _, b := range bad {
		c := col(t, b.column)
		v, err := records.Convert(c, b.value)
		if err == nil {
			t.Errorf("Convert(%s, %q) = %#v, want an error", b.column, b.value, v)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, b.column) || !strings.Contains(msg, strings.TrimSuffix(quoteShort(b.value), "…")) {
			t.Errorf("Convert(%s, %q): message %q does not name the column and the value", b.column, b.value, msg)
		}
	}
}

// quoteShort is how messages show a client's string: Go-quoted, long ones cut at 80 runes.
func quoteShort(s string) string {
	if r := []rune(s); len(r) > 80 {
		return strconv.Quote(string(r[:80])) + "…"
	}
	return strconv.Quote(s)
}

func TestParseDate(t *testing.T) {
	for _, s := range []string{"2024-03-01", "2024-02-29", "0001-01-01", "9999-12-31"} {
		d, err := records.ParseDate("start_date", s)
		if err != nil {
			t.Errorf("ParseDate(%q): %v", s, err)
		} else if d.Format(time.DateOnly) != s {
			t.Errorf("ParseDate(%q) = %s", s, d)
		}
	}
	for _, s := range []string{"2024-13-01", "2024-02-30", "2023-02-29", "2024-00-10", "2024-04-31", "24-3-1", "2024-3-1", "",
		" 2024-03-01", "2024-03-01 ", "2024-03-01T00:00:00", "2024/03/01", "01-03-2024", "0000-01-01", "２０２４-03-01", "+2024-03-01"} {
		_, err := records.ParseDate("end_date", s)
		badInput(t, err, "end_date", strconv.Quote(s))
	}
}

func TestFilterOperatorGQL(t *testing.T) {
	for _, op := range records.FilterOperators() {
		var b strings.Builder
		op.MarshalGQL(&b)
		if b.String() != strconv.Quote(string(op)) {
			t.Errorf("MarshalGQL(%s) = %s", op, b.String())
		}
		var back records.FilterOperator
		if err := back.UnmarshalGQL(string(op)); err != nil || back != op {
			t.Errorf("UnmarshalGQL(%s) = %s, %v", op, back, err)
		}
	}
	want := []records.FilterOperator{records.Equals, records.GreaterThan, records.LessThan, records.GreaterThanOrEqual, records.LessThanOrEqual,
		records.NotEquals, records.In, records.NotIn, records.IsNull, records.IsNotNull, records.Contains}
	if !reflect.DeepEqual(records.FilterOperators(), want) {
		t.Errorf("operators %v, want the specification's five and contract 6.1's six: %v", records.FilterOperators(), want)
	}
	for _, c := range records.Columns() {
		ops := c.Operators()
		if c.Type == records.TypeText {
			if !reflect.DeepEqual(ops, want) {
				t.Errorf("%s (text) accepts %v, want every operator", c.Name, ops)
			}
		} else if !reflect.DeepEqual(ops, want[:len(want)-1]) {
			t.Errorf("%s (%s) accepts %v, want every operator but CONTAINS", c.Name, c.Type, ops)
		}
	}
	var op records.FilterOperator
	for _, bad := range []any{"equals", "LIKE", "", 1, nil} {
		if err := op.UnmarshalGQL(bad); err == nil {
			t.Errorf("UnmarshalGQL(%#v) accepted", bad)
		}
	}
}

func TestCompile(t *testing.T) {
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	const rng = `r.occurred_at >= $1::date AND r.occurred_at < ($2::date + 1)`
	cases := []struct {
		name     string
		f        records.RecordFilter
		wantSQL  string
		wantArgs records.Args
		wantCols []string
	}{
		{
			name:     "range only",
			f:        records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31"},
			wantSQL:  rng,
			wantArgs: records.Args{day("2024-03-01"), day("2024-03-31")},
		},
		{
			name:     "one day",
			f:        records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-01", UseOr: true},
			wantSQL:  rng,
			wantArgs: records.Args{day("2024-03-01"), day("2024-03-01")},
		},
		{
			name: "AND of every operator and type",
			f: records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", Filters: []records.Filter{
				{Column: "station", Value: ptr("Central"), Operator: records.Equals},
				{Column: "distance", Value: ptr("9.5"), Operator: records.GreaterThan},
				{Column: "age", Value: ptr("18"), Operator: records.LessThan},
				{Column: "occurred_at", Value: ptr("2024-03-02 00:00:00"), Operator: records.GreaterThanOrEqual},
				{Column: "transported", Value: ptr("true"), Operator: records.LessThanOrEqual},
			}},
			wantSQL: rng + ` AND "r"."station" = $3::text AND "r"."distance" > $4::numeric AND "p"."age" < $5::integer` +
				` AND "r"."occurred_at" >= $6::timestamp AND "r"."transported" <= $7::boolean`,
			wantArgs: records.Args{day("2024-03-01"), day("2024-03-31"), "Central", "9.5", int32(18), day("2024-03-02"), true},
			wantCols: []string{"station", "distance", "age", "occurred_at", "transported"},
		},
		{
			name: "OR",
			f: records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", UseOr: true, Filters: []records.Filter{
				{Column: "callsign", Value: ptr("AMB 1-2"), Operator: records.Equals},
				{Column: "resource_id", Value: ptr("1002"), Operator: records.Equals},
			}},
			wantSQL:  rng + ` AND ("res"."callsign" = $3::text OR "res"."resource_id" = $4::integer)`,
			wantArgs: records.Args{day("2024-03-01"), day("2024-03-31"), "AMB 1-2", int32(1002)},
			wantCols: []string{"callsign", "resource_id"},
		},
		{
			name: "the operators of contract 6.1",
			f: records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", Filters: []records.Filter{
				{Column: "station", Operator: records.NotEquals, Value: ptr("Central")},
				{Column: "station", Operator: records.In, Values: []string{"Central", `a"b\c`, ""}},
				{Column: "age", Operator: records.NotIn, Values: []string{"+5", "007"}},
				{Column: "occurred_at", Operator: records.In, Values: []string{"2024-03-01T10:00", "2024-03-02 00:00:00.5"}},
				{Column: "transported", Operator: records.In, Values: []string{"TRUE"}},
				{Column: "distance", Operator: records.NotIn, Values: []string{"9.50", ".5"}},
				{Column: "gender", Operator: records.IsNull},
				{Column: "callsign", Operator: records.IsNotNull},
				{Column: "municipality", Operator: records.Contains, Value: ptr("%_\\")},
			}},
			wantSQL: rng + ` AND "r"."station" <> $3::text AND "r"."station" = ANY($4::text[])` +
				` AND "p"."age" <> ALL($5::text[]::integer[]) AND "r"."occurred_at" = ANY($6::text[]::timestamp[])` +
				` AND "r"."transported" = ANY($7::text[]::boolean[]) AND "r"."distance" <> ALL($8::text[]::numeric[])` +
				` AND "p"."gender" IS NULL AND "res"."callsign" IS NOT NULL AND strpos(lower("r"."municipality"), lower($9::text)) > 0`,
			wantArgs: records.Args{day("2024-03-01"), day("2024-03-31"), "Central", []string{"Central", `a"b\c`, ""}, []string{"5", "7"},
				[]string{"2024-03-01 10:00:00", "2024-03-02 00:00:00.5"}, []string{"true"}, []string{"9.50", ".5"}, "%_\\"},
			wantCols: []string{"station", "station", "age", "occurred_at", "transported", "distance", "gender", "callsign", "municipality"},
		},
		{
			name: "OR of one filter",
			f: records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", UseOr: true, Filters: []records.Filter{
				{Column: "gender", Value: ptr("female"), Operator: records.Equals},
			}},
			wantSQL:  rng + ` AND "p"."gender" = $3::text`,
			wantArgs: records.Args{day("2024-03-01"), day("2024-03-31"), "female"},
			wantCols: []string{"gender"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var args records.Args
			cond, err := c.f.Compile(&args)
			if err != nil {
				t.Fatal(err)
			}
			if cond.SQL != c.wantSQL {
				t.Errorf("SQL\n got %s\nwant %s", cond.SQL, c.wantSQL)
			}
			if !reflect.DeepEqual(args, c.wantArgs) {
				t.Errorf("args = %#v, want %#v", args, c.wantArgs)
			}
			var names []string
			for _, col := range cond.Columns {
				names = append(names, col.Name)
			}
			if !reflect.DeepEqual(names, c.wantCols) {
				t.Errorf("columns = %v, want %v", names, c.wantCols)
			}
		})
	}
}

func TestCompileContinuesTheCallersPlaceholders(t *testing.T) {
	args := records.Args{"already there"}
	if p := args.Add(42); p != "$2" {
		t.Fatalf("Add = %s, want $2", p)
	}
	f := records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", Filters: []records.Filter{{Column: "age", Value: ptr("5"), Operator: records.Equals}}}
	cond, err := f.Compile(&args)
	if err != nil {
		t.Fatal(err)
	}
	want := `r.occurred_at >= $3::date AND r.occurred_at < ($4::date + 1) AND "p"."age" = $5::integer`
	if cond.SQL != want || len(args) != 5 {
		t.Errorf("SQL %s with %d args, want %s with 5", cond.SQL, len(args), want)
	}
	if got := cond.From(col(t, "callsign")); got != "fact_record AS r LEFT JOIN dim_resource AS res ON res.sk_resource = r.sk_resource LEFT JOIN dim_patient AS p ON p.sk_patient = r.sk_patient" {
		t.Errorf("From = %s", got)
	}
	if p := args.Add("limit"); p != "$6" {
		t.Errorf("placeholder after Compile = %s, want $6", p)
	}
}

func TestCompileRefuses(t *testing.T) {
	ok := func(fs ...records.Filter) records.RecordFilter {
		return records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", Filters: fs}
	}
	cases := []struct {
		name string
		f    records.RecordFilter
		want []string
	}{
		{"start after end", records.RecordFilter{StartDate: "2024-04-01", EndDate: "2024-03-31"}, []string{"start_date", "end_date", "2024-04-01", "2024-03-31"}},
		{"bad start", records.RecordFilter{StartDate: "2024-02-30", EndDate: "2024-03-31"}, []string{"start_date", `"2024-02-30"`}},
		{"bad end", records.RecordFilter{StartDate: "2024-03-01", EndDate: "24-3-1"}, []string{"end_date", `"24-3-1"`}},
		{"empty end", records.RecordFilter{StartDate: "2024-03-01"}, []string{"end_date", `""`}},
		{"unknown column", ok(records.Filter{Column: "station", Value: ptr("x"), Operator: records.Equals}, records.Filter{Column: "nope", Value: ptr("x"), Operator: records.Equals}),
			[]string{"filters[1].column", `"nope"`, records.ColumnNames()}},
		{"injected column", ok(records.Filter{Column: "station; DROP TABLE fact_record", Value: ptr("x"), Operator: records.Equals}),
			[]string{"filters[0].column", `"station; DROP TABLE fact_record"`}},
		{"bad value", ok(records.Filter{Column: "distance", Value: ptr("' OR 1=1 --"), Operator: records.GreaterThan}),
			[]string{"filters[0]", "distance", `"' OR 1=1 --"`}},
		{"bad operator", ok(records.Filter{Column: "distance", Value: ptr("1"), Operator: "LIKE"}), []string{"filters[0].operator", `"LIKE"`}},
		{"no value", ok(records.Filter{Column: "station", Operator: records.Equals}), []string{"filters[0] (EQUALS)", "give value"}},
		{"values for EQUALS", ok(records.Filter{Column: "station", Operator: records.Equals, Value: ptr("a"), Values: []string{"b"}}), []string{"filters[0] (EQUALS)", "not values"}},
		{"no values", ok(records.Filter{Column: "station", Operator: records.In}), []string{"filters[0] (IN)", "give values"}},
		{"empty values", ok(records.Filter{Column: "station", Operator: records.NotIn, Values: []string{}}), []string{"filters[0] (NOT_IN)", "give values"}},
		{"value for IN", ok(records.Filter{Column: "station", Operator: records.In, Value: ptr("a"), Values: []string{"a"}}), []string{"filters[0] (IN)", "not value"}},
		{"value for IS_NULL", ok(records.Filter{Column: "station", Operator: records.IsNull, Value: ptr("")}), []string{"filters[0] (IS_NULL)", "neither"}},
		{"values for IS_NOT_NULL", ok(records.Filter{Column: "age", Operator: records.IsNotNull, Values: []string{"1"}}), []string{"filters[0] (IS_NOT_NULL)", "neither"}},
		{"CONTAINS on a number", ok(records.Filter{Column: "distance", Operator: records.Contains, Value: ptr("1")}), []string{"filters[0] (CONTAINS)", "distance", "numeric", "text"}},
		{"CONTAINS on a boolean", ok(records.Filter{Column: "transported", Operator: records.Contains, Value: ptr("t")}), []string{"filters[0] (CONTAINS)", "transported"}},
		{"bad value in a list", ok(records.Filter{Column: "age", Operator: records.In, Values: []string{"1", "old"}}), []string{"filters[0] (IN)", "values[1]", "age", `"old"`}},
		{"NUL in a list", ok(records.Filter{Column: "station", Operator: records.NotIn, Values: []string{"a\x00"}}), []string{"filters[0] (NOT_IN)", "values[0]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := records.Args{"keep"}
			_, err := c.f.Compile(&args)
			badInput(t, err, c.want...)
			if len(args) != 1 {
				t.Errorf("args changed on error: %#v", args)
			}
		})
	}
}

func ptr(s string) *string { return &s }
