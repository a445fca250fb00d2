// Package sqlcheck is the fuzz targets' check of a statement built from a caller's arguments
// (the record filter's and the stats fields' SQL): every identifier is a catalog column's
// expression or a word of the statement templates, and every value is a parameter with the
// cast its Go type calls for. It is for tests only.
package sqlcheck

import (
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	// placeholderRE is a parameter with the cast every parameter of the filters has.
	placeholderRE = regexp.MustCompile(`\$([0-9]+)(::([a-z0-9]+(\[\])?))?`)
	// sqlLiterals are the string literals the templates hold: date_trunc's units.
	sqlLiterals = []string{"'hour'", "'day'", "'week'", "'month'", "'quarter'", "'year'"}
	wordRE      = regexp.MustCompile(`[A-Za-z_][A-Za-z_0-9.]*`)
	// sqlWords are the words of the statement templates (SQL keywords, functions, the tables,
	// their aliases and keys, the CTE's names, casts); cN (the CTE's columns) comes on top.
	sqlWords = strings.Fields(`WITH AS SELECT FROM WHERE ORDER BY GROUP UNION ALL OVER ASC DESC NULLS LAST AND OR LEFT JOIN ON
		row_number count bigint text date integer numeric boolean timestamp
		fact_record dim_resource dim_patient r res p r.sk_resource res.sk_resource r.sk_patient p.sk_patient r.occurred_at
		m u ord k n value
		IS NOT NULL ANY strpos lower
		MATERIALIZED CROSS LATERAL OFFSET true coalesce min max avg generate_series date_trunc extract
		interval float8 percentile_cont WITHIN FILTER hour isodow month
		b v c g g.b c.b c.v c.n vals vals.v t t.nv nv p.b p.v p.n DISTINCT sum u.b u.v u.n
		CASE WHEN THEN END GROUPING SETS`)
	cteColumnRE = regexp.MustCompile(`^c[0-9]+$`)
	// IntervalSteps are the steps a time bucket's interval parameter may hold.
	IntervalSteps = []string{"1 hour", "1 day", "7 days", "1 month", "3 months", "1 year"}
	// castTypes maps each cast to the Go type of the parameter behind it.
	castTypes = map[string]func(any) bool{
		"date":      func(v any) bool { _, ok := v.(time.Time); return ok },
		"timestamp": func(v any) bool { _, ok := v.(time.Time); return ok },
		"integer":   func(v any) bool { _, ok := v.(int32); return ok },
		"numeric":   func(v any) bool { _, ok := v.(string); return ok },
		"text":      func(v any) bool { _, ok := v.(string); return ok },
		"boolean":   func(v any) bool { _, ok := v.(bool); return ok },
		"text[]":    func(v any) bool { _, ok := v.([]string); return ok },
		"float8[]":  func(v any) bool { _, ok := v.([]float64); return ok },
		"float8":    func(v any) bool { _, ok := v.(float64); return ok },
		"interval":  func(v any) bool { s, ok := v.(string); return ok && slices.Contains(IntervalSteps, s) },
		"bigint":    func(v any) bool { _, ok := v.(int64); return ok },
	}
)

// Check fails t unless sql's identifiers are exprs (the catalog's column expressions) and the
// templates' words only, its parameters are exactly $first..$len(args), each used once with a
// cast matching its Go type, and no quoted text, string literal or comment is left.
func Check(t testing.TB, sql string, args []any, first int, exprs []string) {
	t.Helper()
	rest := sql
	// Longest first, so that no expression is cut by a shorter one.
	exprs = slices.Clone(exprs)
	sort.Slice(exprs, func(i, j int) bool { return len(exprs[i]) > len(exprs[j]) })
	for _, e := range exprs {
		rest = strings.ReplaceAll(rest, e, " ")
	}
	used := map[int]int{}
	for _, m := range placeholderRE.FindAllStringSubmatch(rest, -1) {
		n, err := strconv.Atoi(m[1])
		if err != nil || n < first || n > len(args) {
			t.Fatalf("parameter $%s: want $%d to $%d in %s", m[1], first, len(args), sql)
		}
		used[n]++
		if m[3] == "" {
			t.Fatalf("parameter $%d without a cast in %s", n, sql)
		}
		if ok := castTypes[m[3]]; ok == nil || !ok(args[n-1]) {
			t.Fatalf("parameter $%d cast to %s holds %#v in %s", n, m[3], args[n-1], sql)
		}
	}
	for n := first; n <= len(args); n++ {
		if used[n] != 1 {
			t.Fatalf("parameter $%d used %d times in %s", n, used[n], sql)
		}
	}
	rest = placeholderRE.ReplaceAllString(rest, " ")
	for _, l := range sqlLiterals {
		rest = strings.ReplaceAll(rest, l, " ")
	}
	if strings.ContainsAny(rest, `"'$;`) || strings.Contains(rest, "--") || strings.Contains(rest, "/*") {
		t.Fatalf("quoted text, a parameter or a comment outside the catalog: %q in %s", rest, sql)
	}
	for _, w := range wordRE.FindAllString(rest, -1) {
		if !cteColumnRE.MatchString(w) && !slices.Contains(sqlWords, w) {
			t.Fatalf("identifier %q is neither the catalog's nor the template's: %s", w, sql)
		}
	}
}
