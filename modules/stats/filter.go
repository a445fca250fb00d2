package stats

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// FilterOperator is the GraphQL enum FilterOperator: how a filter compares a column with its
// value.
type FilterOperator string

const (
	Equals             FilterOperator = "EQUALS"
	GreaterThan        FilterOperator = "GREATER_THAN"
	LessThan           FilterOperator = "LESS_THAN"
	GreaterThanOrEqual FilterOperator = "GREATER_THAN_OR_EQUAL"
	LessThanOrEqual    FilterOperator = "LESS_THAN_OR_EQUAL"
)

// FilterOperators lists every operator; each column type accepts all of them (booleans order
// false before true, as in SQL).
func FilterOperators() []FilterOperator {
	return []FilterOperator{Equals, GreaterThan, LessThan, GreaterThanOrEqual, LessThanOrEqual}
}

// sql is the operator's SQL text.
func (o FilterOperator) sql() (string, bool) {
	switch o {
	case Equals:
		return "=", true
	case GreaterThan:
		return ">", true
	case LessThan:
		return "<", true
	case GreaterThanOrEqual:
		return ">=", true
	case LessThanOrEqual:
		return "<=", true
	}
	return "", false
}

// IsValid reports whether o is one of the enum's values.
func (o FilterOperator) IsValid() bool { _, ok := o.sql(); return ok }

func (o FilterOperator) String() string { return string(o) }

// MarshalGQL writes the enum value.
func (o FilterOperator) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(o))) }

// UnmarshalGQL reads the enum value.
func (o *FilterOperator) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok {
		return apierr.BadInput("operator: must be a FilterOperator name, got %T", v)
	}
	op := FilterOperator(s)
	if !op.IsValid() {
		return apierr.BadInput("operator: %s is not a FilterOperator; accepted: EQUALS, GREATER_THAN, LESS_THAN, GREATER_THAN_OR_EQUAL, LESS_THAN_OR_EQUAL", quote(s))
	}
	*o = op
	return nil
}

// Filter is the GraphQL input Filter: compare a catalog column with a value given as a string
// (numbers are sent as strings) that is converted to the column's type.
type Filter struct {
	Column   string         `json:"column"`
	Value    string         `json:"value"`
	Operator FilterOperator `json:"operator"`
}

// RecordFilter selects mission records: the date range (always applied) and the filters,
// combined with AND, or with OR when UseOr. It is the selection of distinct_values,
// unique_counts and the main report.
type RecordFilter struct {
	StartDate string // YYYY-MM-DD, inclusive, argument start_date
	EndDate   string // YYYY-MM-DD, inclusive, argument end_date
	Filters   []Filter
	UseOr     bool
}

// Args collects the parameters of one statement; Add returns the placeholder of each.
type Args []any

// Add appends v and returns its placeholder, "$n".
func (a *Args) Add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// Condition is a validated RecordFilter as SQL.
type Condition struct {
	// SQL is a boolean expression over the record query's aliases (see From), with
	// placeholders for the values added to the Args given to Compile.
	SQL string
	// Columns are the catalog columns the condition reads; pass them to From.
	Columns []Column
}

// From is the FROM clause for the condition and the extra columns a statement selects.
func (c Condition) From(selected ...Column) string {
	return From(append(append([]Column(nil), c.Columns...), selected...)...)
}

// Compile validates f and returns its condition, appending the values to args (on error args
// is left as it was). Every problem is an apierr BAD_USER_INPUT naming the argument and the
// offending name or value.
//
// The range is written so that the occurred_at index serves it:
// r.occurred_at >= start AND r.occurred_at < end + 1 day, which is start <= occurred_at::date <= end.
func (f RecordFilter) Compile(args *Args) (Condition, error) {
	start, err := ParseDate("start_date", f.StartDate)
	if err != nil {
		return Condition{}, err
	}
	end, err := ParseDate("end_date", f.EndDate)
	if err != nil {
		return Condition{}, err
	}
	if start.After(end) {
		return Condition{}, apierr.BadInput("start_date %s is after end_date %s", f.StartDate, f.EndDate)
	}
	n0 := len(*args)
	cond := Condition{
		SQL: "r.occurred_at >= " + args.Add(start) + "::date AND r.occurred_at < (" + args.Add(end) + "::date + 1)",
	}
	terms := make([]string, 0, len(f.Filters))
	for i, fl := range f.Filters {
		term, c, err := fl.compile("filters["+itoa(i)+"]", args)
		if err != nil {
			*args = (*args)[:n0]
			return Condition{}, err
		}
		terms = append(terms, term)
		cond.Columns = append(cond.Columns, c)
	}
	switch {
	case len(terms) == 0:
	case f.UseOr && len(terms) > 1:
		cond.SQL += " AND (" + strings.Join(terms, " OR ") + ")"
	default:
		cond.SQL += " AND " + strings.Join(terms, " AND ")
	}
	return cond, nil
}

// compile validates one filter and returns its SQL comparison; where names it in errors.
func (fl Filter) compile(where string, args *Args) (string, Column, error) {
	c, err := column(where+".column", fl.Column)
	if err != nil {
		return "", Column{}, err
	}
	op, ok := fl.Operator.sql()
	if !ok {
		return "", Column{}, apierr.BadInput("%s.operator: %s is not a FilterOperator", where, quote(string(fl.Operator)))
	}
	v, err := Convert(c, fl.Value)
	if err != nil {
		return "", Column{}, apierr.BadInput("%s: %v", where, err)
	}
	return c.Expr() + " " + op + " " + args.Add(v) + "::" + string(c.Type), c, nil
}

var dateRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)

// ParseDate parses a YYYY-MM-DD argument strictly: a calendar date (no 2024-02-30), four-digit
// year from 0001. arg names the argument in the error.
func ParseDate(arg, s string) (time.Time, error) {
	if dateRE.MatchString(s) {
		if t, err := time.Parse(time.DateOnly, s); err == nil && t.Year() >= 1 {
			return t, nil
		}
	}
	return time.Time{}, apierr.BadInput("%s: %s is not a date YYYY-MM-DD (a real calendar date, e.g. 2024-03-01)", arg, quote(s))
}

var (
	integerRE   = regexp.MustCompile(`^[+-]?[0-9]+$`)
	numericRE   = regexp.MustCompile(`^[+-]?([0-9]+)?(?:\.([0-9]*))?$`)
	timestampRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[ T][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?)?$`)
)

// Limits of PostgreSQL's numeric input: digits before and after the decimal point.
const (
	numericMaxIntDigits  = 131072
	numericMaxFracDigits = 16383
)

// Convert turns a filter value into a parameter of the column's type (sent with a ::type
// cast), or explains, naming the column and the value, why it does not convert:
//
//   - integer: a base-10 integer within PostgreSQL integer range, e.g. "-12";
//   - numeric: a plain decimal, e.g. "9.5", "10", "-.25" (no exponent, NaN or Infinity); it is
//     passed as text and converted by the database, so no precision is lost;
//   - boolean: "true" or "false", any letter case;
//   - timestamp: "YYYY-MM-DD" (midnight), "YYYY-MM-DD HH:MM", "YYYY-MM-DD HH:MM:SS" with up to
//     six fraction digits, "T" accepted for the space; no time zone, as occurred_at has none;
//   - text: as is (a NUL character or bytes that are not UTF-8, which text cannot hold, are
//     refused).
//
// The Go types returned: int32 (integer), string (numeric, text), bool (boolean), time.Time in
// UTC holding the wall-clock time (timestamp). The error is a plain error; Compile wraps it as
// BAD_USER_INPUT with the filter's position.
func Convert(c Column, value string) (any, error) {
	bad := func(want string) error {
		return fmt.Errorf("value %s for column %s (%s) is not %s", quote(value), c.Name, c.Type, want)
	}
	switch c.Type {
	case TypeInteger:
		if !integerRE.MatchString(value) {
			return nil, bad("an integer")
		}
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil {
			return nil, bad("an integer in the range -2147483648 to 2147483647")
		}
		return int32(n), nil
	case TypeNumeric:
		m := numericRE.FindStringSubmatch(value)
		if m == nil || (m[1] == "" && m[2] == "") {
			return nil, bad("a decimal number such as 9.5")
		}
		if len(m[1]) > numericMaxIntDigits || len(m[2]) > numericMaxFracDigits {
			return nil, bad("a decimal number within the database's numeric range")
		}
		return value, nil
	case TypeBoolean:
		switch {
		case strings.EqualFold(value, "true"):
			return true, nil
		case strings.EqualFold(value, "false"):
			return false, nil
		}
		return nil, bad("a boolean: true or false")
	case TypeTimestamp:
		if timestampRE.MatchString(value) {
			s := strings.Replace(value, "T", " ", 1)
			for _, layout := range []string{time.DateOnly, "2006-01-02 15:04", time.DateTime} {
				// time.Parse accepts a fraction after the seconds although the layout has none.
				if t, err := time.Parse(layout, s); err == nil && t.Year() >= 1 {
					return t, nil
				}
			}
		}
		return nil, bad("a timestamp YYYY-MM-DD or YYYY-MM-DD HH:MM:SS (without time zone)")
	default: // TypeText
		if strings.IndexByte(value, 0) >= 0 || !utf8.ValidString(value) {
			return nil, bad("UTF-8 text without NUL characters")
		}
		return value, nil
	}
}

// quote renders a client-supplied string for a message: Go-quoted, shortened when long.
func quote(s string) string {
	const max = 80
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		return strconv.Quote(string(r[:max])) + "…"
	}
	return strconv.Quote(s)
}

func itoa(i int) string { return strconv.Itoa(i) }
