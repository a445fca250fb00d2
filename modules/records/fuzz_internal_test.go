package records

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/emsanalytics/emsquery/internal/sqlcheck"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// Fuzz tests of value conversion and filter compilation (stats' fuzz tests cover the
// statements built from them). They
// never touch a database. Seeds: the f.Add calls and testdata/fuzz/<FuzzName>/; `make test` runs
// each target briefly with -fuzz, `go test` runs the seeds.
//
// What must hold for any input: no panic; a refusal is BAD_USER_INPUT; what is accepted is a
// value PostgreSQL accepts for the column's type; and the SQL text holds no identifier that is
// not the catalog's or the statement template's, every value travelling as a $n parameter of the
// type its cast says.

// FuzzConvert: a filter value, for a column picked by number.
func FuzzConvert(f *testing.F) {
	for i := range catalog {
		for _, v := range []string{"", "0", "-1", "9.5", "true", "2024-03-01", "2024-03-01 23:59:59.123456", "' OR 1=1 --"} {
			f.Add(uint8(i), v)
		}
	}
	f.Fuzz(func(t *testing.T, col uint8, value string) {
		c := catalog[int(col)%len(catalog)]
		v, err := Convert(c, value)
		if err != nil {
			if !strings.Contains(err.Error(), c.Name) {
				t.Fatalf("Convert(%s, %q): error %q does not name the column", c.Name, value, err)
			}
			return
		}
		checkConverted(t, c, value, v)
	})
}

// checkConverted asserts that v, which Convert made of value, is what the column's type takes.
func checkConverted(t *testing.T, c Column, value string, v any) {
	t.Helper()
	switch c.Type {
	case TypeInteger:
		n, ok := v.(int32)
		want, err := strconv.ParseInt(strings.TrimPrefix(value, "+"), 10, 32)
		if !ok || err != nil || int64(n) != want {
			t.Fatalf("integer %q became %#v", value, v)
		}
	case TypeNumeric:
		s, ok := v.(string)
		m := numericRE.FindStringSubmatch(value)
		if !ok || s != value || m == nil || m[1]+m[2] == "" || len(m[1]) > numericMaxIntDigits || len(m[2]) > numericMaxFracDigits {
			t.Fatalf("numeric %q became %#v", value, v)
		}
	case TypeBoolean:
		b, ok := v.(bool)
		if !ok || !strings.EqualFold(value, strconv.FormatBool(b)) {
			t.Fatalf("boolean %q became %#v", value, v)
		}
	case TypeTimestamp:
		ts, ok := v.(time.Time)
		if !ok || ts.Location() != time.UTC || ts.Year() < 1 || ts.Year() > 9999 || len(value) < 10 || ts.Format(time.DateOnly) != value[:10] {
			t.Fatalf("timestamp %q became %#v", value, v)
		}
	case TypeText:
		s, ok := v.(string)
		if !ok || s != value || strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			t.Fatalf("text %q became %#v: PostgreSQL text holds valid UTF-8 without NUL only", value, v)
		}
	default:
		t.Fatalf("column %s has type %s", c.Name, c.Type)
	}
}

// fuzzFilters decodes the fuzzer's filter list: one filter a line, "column\toperator", then
// tab-separated operands: "v:x" sets value to x, "l:x" adds x to values.
func fuzzFilters(spec string) []Filter {
	if spec == "" {
		return nil
	}
	var out []Filter
	for _, line := range strings.Split(spec, "\n") {
		parts := strings.Split(line, "\t")
		for len(parts) < 2 {
			parts = append(parts, "")
		}
		fl := Filter{Column: parts[0], Operator: FilterOperator(parts[1])}
		for _, p := range parts[2:] {
			switch {
			case strings.HasPrefix(p, "v:"):
				v := p[2:]
				fl.Value = &v
			case strings.HasPrefix(p, "l:"):
				fl.Values = append(fl.Values, p[2:])
			}
		}
		out = append(out, fl)
	}
	return out
}

// FuzzCompile: a whole record filter: dates, filters with any column names, operators, values
// and lists, and use_or.
func FuzzCompile(f *testing.F) {
	f.Add("2024-03-01", "2024-03-31", false, "")
	f.Add("2024-03-01", "2024-03-31", true, "station\tEQUALS\tv:Central\ndistance\tGREATER_THAN\tv:9.5")
	f.Add("2024-02-29", "2024-02-29", false, "occurred_at\tLESS_THAN_OR_EQUAL\tv:2024-02-29 23:59:59\ngender\tNOT_EQUALS\tv:female\ncallsign\tLESS_THAN\tv:AMB 2")
	f.Add("2024-03-01", "2024-03-31", true, `station" OR 1=1 --`+"\tEQUALS\tv:x")
	f.Add("2024-03-31", "2024-03-01", false, "age\tEQUALS\tv:1")
	f.Add("2024-03-01", "2024-03-31", true, "station\tIN\tl:Central\tl:a\"b\\c'd\nage\tNOT_IN\tl:5\tl:+7\noccurred_at\tIN\tl:2024-03-01T10:00")
	f.Add("2024-03-01", "2024-03-31", false, "municipality\tIS_NULL\ntransported\tIS_NOT_NULL\nstation\tCONTAINS\tv:%_\\")
	f.Add("2024-03-01", "2024-03-31", false, "distance\tCONTAINS\tv:1\nstation\tIS_NULL\tv:x\nage\tIN\tv:1")
	f.Fuzz(func(t *testing.T, start, end string, useOr bool, spec string) {
		rf := RecordFilter{StartDate: start, EndDate: end, UseOr: useOr, Filters: fuzzFilters(spec)}
		sentinel := "earlier argument"
		args := Args{sentinel}
		cond, err := rf.Compile(&args)
		if err != nil {
			wantBadInput(t, err)
			if len(args) != 1 || args[0] != sentinel {
				t.Fatalf("a refused filter left arguments behind: %#v", args)
			}
			return
		}
		if len(cond.Columns) != len(rf.Filters) {
			t.Fatalf("%d filters read %d columns", len(rf.Filters), len(cond.Columns))
		}
		next := 3 // $1 is the earlier argument, $2 and $3 the dates
		for i, c := range cond.Columns {
			fl := rf.Filters[i]
			if want, ok := LookupColumn(c.Name); !ok || want != c || c.Name != fl.Column {
				t.Fatalf("filters[%d] reads column %#v", i, c)
			}
			takes, _ := fl.Operator.Takes()
			if fl.Operator == Contains && c.Type != TypeText {
				t.Fatalf("filters[%d]: CONTAINS accepted on %s", i, c.Type)
			}
			switch takes {
			case NoOperand:
				if fl.Value != nil || len(fl.Values) > 0 {
					t.Fatalf("filters[%d] (%s) accepted an operand", i, fl.Operator)
				}
			case OneValue:
				v, err := Convert(c, *fl.Value)
				if err != nil || len(fl.Values) > 0 || (args[next] != v && !sameTime(args[next], v)) {
					t.Fatalf("filters[%d]: argument %#v, want %#v", i, args[next], v)
				}
				next++
			case ValueList:
				list, ok := args[next].([]string)
				if fl.Value != nil || !ok || len(list) != len(fl.Values) || len(list) == 0 {
					t.Fatalf("filters[%d]: argument %#v for values %q", i, args[next], fl.Values)
				}
				for j, s := range fl.Values {
					v, err := Convert(c, s)
					if err != nil || list[j] != textForm(v) {
						t.Fatalf("filters[%d].values[%d] %q became %q", i, j, s, list[j])
					}
					back, err := Convert(c, list[j])
					if err != nil || (back != v && !sameTime(back, v)) {
						t.Fatalf("filters[%d].values[%d]: %q does not read back as %#v", i, j, list[j], v)
					}
				}
				next++
			}
		}
		if next != len(args) {
			t.Fatalf("%d arguments for %d used", len(args), next)
		}
		checkSQL(t, cond.SQL, args, 2) // $1 is the earlier argument
		checkSQL(t, cond.From(), nil, 1)
		if n := strings.Count(cond.SQL, " OR "); (useOr && len(rf.Filters) > 1) != (n > 0) || (n > 0 && n != len(rf.Filters)-1) {
			t.Fatalf("use_or %v with %d filters: %d ORs in %s", useOr, len(rf.Filters), n, cond.SQL)
		}
	})
}

func wantBadInput(t *testing.T, err error) {
	t.Helper()
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Code != apierr.BadUserInput || ae.Message == "" {
		t.Fatalf("want a BAD_USER_INPUT error, got %#v", err)
	}
}

func sameTime(a, b any) bool {
	ta, ok1 := a.(time.Time)
	tb, ok2 := b.(time.Time)
	return ok1 && ok2 && ta.Equal(tb)
}

// checkSQL asserts sqlcheck.Check against the catalog's column expressions.
func checkSQL(t *testing.T, sql string, args Args, first int) {
	t.Helper()
	exprs := []string{}
	for _, c := range catalog {
		exprs = append(exprs, c.Expr())
	}
	sqlcheck.Check(t, sql, args, first, exprs)
}
