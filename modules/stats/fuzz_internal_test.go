package stats

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/sqlcheck"
	"github.com/emsanalytics/emsquery/modules/records"
	"github.com/emsanalytics/emsquery/platform/apierr"
)

// Fuzz tests of the statements built from record filters (records' fuzz tests cover the filters
// themselves). They
// never touch a database. Seeds: the f.Add calls and testdata/fuzz/<FuzzName>/; `make test` runs
// each target briefly with -fuzz, `go test` runs the seeds.
//
// What must hold for any input: no panic; a refusal is BAD_USER_INPUT; what is accepted is a
// value PostgreSQL accepts for the column's type; and the SQL text holds no identifier that is
// not the catalog's or the statement template's, every value travelling as a $n parameter of the
// type its cast says.

func fuzzFilters(spec string) []records.Filter {
	if spec == "" {
		return nil
	}
	var out []records.Filter
	for _, line := range strings.Split(spec, "\n") {
		parts := strings.Split(line, "\t")
		for len(parts) < 2 {
			parts = append(parts, "")
		}
		fl := records.Filter{Column: parts[0], Operator: records.FilterOperator(parts[1])}
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

// FuzzPerColumnSQL: the whole statement of distinct_values and unique_counts, for any columns
// (comma separated) and filters.
func FuzzPerColumnSQL(f *testing.F) {
	f.Add("station", false, "", false)
	f.Add("age,callsign,station,age", true, "gender\tEQUALS\tother\ntransported\tEQUALS\tTRUE", true)
	f.Add("distance,occurred_at", false, "resource_id\tGREATER_THAN_OR_EQUAL\t-7", false)
	f.Add("station; DROP TABLE fact_record", false, "", true)
	f.Add(`"r"."station"`, false, "", false)
	f.Fuzz(func(t *testing.T, columns string, useOr bool, spec string, unique bool) {
		names := strings.Split(columns, ",")
		rf := records.RecordFilter{StartDate: "2024-03-01", EndDate: "2024-03-31", UseOr: useOr, Filters: fuzzFilters(spec)}
		cols, err := records.ResolveColumns(names)
		if err != nil {
			wantBadInput(t, err)
			return
		}
		var distinct []records.Column
		for _, c := range cols {
			if !slices.ContainsFunc(distinct, func(d records.Column) bool { return d.Name == c.Name }) {
				distinct = append(distinct, c)
			}
		}
		q, args, err := perColumnSQL(distinct, rf, unique)
		if err != nil {
			wantBadInput(t, err)
			return
		}
		checkSQL(t, q, args, 1)
		if n := strings.Count(q, "), ("); n != len(distinct)-1 {
			t.Fatalf("%d columns, %d grouping sets: %s", len(distinct), n+1, q)
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

// checkSQL asserts sqlcheck.Check against the catalog's column expressions.
func checkSQL(t *testing.T, sql string, args records.Args, first int) {
	t.Helper()
	exprs := []string{}
	for _, c := range records.Columns() {
		exprs = append(exprs, c.Expr())
	}
	sqlcheck.Check(t, sql, args, first, exprs)
}

func ptr(s string) *string { return &s }

// FuzzSeriesSQL: record_series' arguments (any dates, bucket name, group_by name, filters and
// points limit) give a BAD_USER_INPUT or a statement whose identifiers are the catalog's and
// whose values are all parameters; the bucket count and the first and last bucket agree with
// the calendar, counted day by day.
func FuzzSeriesSQL(f *testing.F) {
	f.Add("2024-12-28", "2025-01-10", "WEEK", "", false, "", uint16(50000))
	f.Add("2024-02-27", "2024-03-02", "DAY", "station", true, "station\tIN\tl:Central\tl:x\nage\tIS_NULL", uint16(100))
	f.Add("2024-03-15", "2024-06-10", "MONTH", "distance", false, "municipality\tCONTAINS\tv:%_", uint16(3))
	f.Add("2024-02-15", "2025-01-10", "QUARTER", "callsign", false, "", uint16(10))
	f.Add("0001-01-01", "9999-12-31", "HOUR", "", false, "", uint16(65535))
	f.Add("2024-03-01", "2024-03-31", "HOUR_OF_DAY", "occurred_at", true, "", uint16(24))
	f.Add("2024-03-01", "2024-03-31", "DAY_OF_WEEK", `station"; --`, false, "", uint16(100))
	f.Add("2024-03-01", "2024-03-31", "FORTNIGHT", "", false, "", uint16(100))
	f.Fuzz(func(t *testing.T, start, end, bucket, groupBy string, useOr bool, spec string, maxPoints uint16) {
		lim := Limits{Records: records.Limits{Columns: 20, Filters: 50, FilterValues: 1000}, SeriesPoints: int(maxPoints)}
		req := SeriesRequest{Records: records.RecordFilter{StartDate: start, EndDate: end, UseOr: useOr, Filters: fuzzFilters(spec)}, Bucket: TimeBucket(bucket)}
		if groupBy != "" {
			req.GroupBy = &groupBy
		}
		st, err := buildSeries(req, lim)
		if err != nil {
			wantBadInput(t, err)
			return
		}
		checkSQL(t, st.sql, st.args, 1)
		if st.buckets > int64(maxPoints) || st.buckets < 1 {
			t.Fatalf("%d buckets accepted with a limit of %d", st.buckets, maxPoints)
		}
		if (st.group != nil) != (groupBy != "") || (st.group != nil && st.group.Name != groupBy) {
			t.Fatalf("group_by %q became %#v", groupBy, st.group)
		}
		if st.bucket.cyclic() {
			return
		}
		from, _ := records.ParseDate("start_date", start)
		to, _ := records.ParseDate("end_date", end)
		first, last, _ := st.bucket.span(from, to)
		if to.Sub(from) > 2000*24*time.Hour {
			return
		}
		// Every hour of every day in the range, truncated: the buckets that overlap it.
		seen := map[time.Time]bool{}
		for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
			for h := 0; h < 24; h++ {
				seen[st.bucket.truncate(d.Add(time.Duration(h)*time.Hour))] = true
			}
		}
		if int64(len(seen)) != st.buckets || !seen[first] || !seen[last] || first.After(last) {
			t.Fatalf("%s %s..%s: %d buckets from %s to %s; the calendar has %d", bucket, start, end, st.buckets, first, last, len(seen))
		}
		if first != st.bucket.truncate(from) || last != st.bucket.truncate(to.Add(23*time.Hour)) {
			t.Fatalf("%s %s..%s: first %s, last %s", bucket, start, end, first, last)
		}
	})
}

// FuzzStatsSQL: record_stats' arguments (measure, group_by list, bucket, percentiles, target,
// filters) give a BAD_USER_INPUT or a statement with catalog identifiers and parameters only.
func FuzzStatsSQL(f *testing.F) {
	f.Add("response_time_s", "station", "MONTH", "0.5,0.9", 720.0, true, "")
	f.Add("distance", "transported,degree_of_urgency,transported", "", "", 9.5, false, "station\tNOT_IN\tl:a")
	f.Add("age", "", "DAY_OF_WEEK", "0,1,0.333", -1.0, true, "gender\tIS_NOT_NULL")
	f.Add("station", "", "", "", 0.0, false, "")
	f.Add("response_time_s", "nope", "WEEK", "1.5", 0.0, false, "")
	f.Add("distance", "", "", "0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1", 0.0, false, "")
	f.Add("distance", "", "", "-", 0.0, false, "")
	f.Fuzz(func(t *testing.T, measure, groupBy, bucket, percentiles string, target float64, hasTarget bool, spec string) {
		req := StatsRequest{Records: records.RecordFilter{StartDate: "2024-01-01", EndDate: "2024-12-31", Filters: fuzzFilters(spec)},
			Measure: measure, Want: AllFigures}
		if groupBy != "" {
			req.GroupBy = strings.Split(groupBy, ",")
		}
		if bucket != "" {
			b := TimeBucket(bucket)
			req.Bucket = &b
		}
		if percentiles == "-" {
			req.Percentiles = []float64{}
		} else if percentiles != "" {
			for _, p := range strings.Split(percentiles, ",") {
				v, err := strconv.ParseFloat(p, 64)
				if err != nil {
					return
				}
				req.Percentiles = append(req.Percentiles, v)
			}
		}
		if hasTarget {
			req.Target = &target
		}
		st, err := buildStats(req, Limits{Records: records.Limits{Columns: 3, Filters: 50, FilterValues: 1000}})
		if err != nil {
			wantBadInput(t, err)
			return
		}
		checkSQL(t, st.sql, st.args, 1)
		m, _ := records.LookupColumn(measure)
		if m.Type != records.TypeInteger && m.Type != records.TypeNumeric {
			t.Fatalf("measure %s (%s) accepted", measure, m.Type)
		}
		if len(st.percentiles) > maxPercentiles || (req.Percentiles == nil && len(st.percentiles) != 2) {
			t.Fatalf("percentiles %v", st.percentiles)
		}
		for _, p := range st.percentiles {
			if p < 0 || p > 1 {
				t.Fatalf("percentile %v accepted", p)
			}
		}
		if len(st.groups) > 3 || len(req.GroupBy) > 3 {
			t.Fatalf("group_by %v accepted with LIMITS__MAX_COLUMNS=3", req.GroupBy)
		}
	})
}
