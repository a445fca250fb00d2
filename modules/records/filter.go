package records

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
// value or values.
type FilterOperator string

const (
	Equals             FilterOperator = "EQUALS"
	GreaterThan        FilterOperator = "GREATER_THAN"
	LessThan           FilterOperator = "LESS_THAN"
	GreaterThanOrEqual FilterOperator = "GREATER_THAN_OR_EQUAL"
	LessThanOrEqual    FilterOperator = "LESS_THAN_OR_EQUAL"
	NotEquals          FilterOperator = "NOT_EQUALS"
	In                 FilterOperator = "IN"
	NotIn              FilterOperator = "NOT_IN"
	IsNull             FilterOperator = "IS_NULL"
	IsNotNull          FilterOperator = "IS_NOT_NULL"
	Contains           FilterOperator = "CONTAINS"
)

// Operand is what an operator compares the column with: Filter.value, Filter.values or
// nothing.
type Operand int

const (
	OneValue Operand = iota
	ValueList
	NoOperand
)

// operatorSpec is one operator of contract sections 3 and 6.1.
type operatorSpec struct {
	op       FilterOperator
	takes    Operand
	textOnly bool   // CONTAINS: a substring of text
	sql      string // the comparison for OneValue operators other than CONTAINS
}

// operators are every operator in the enum's order.
var operators = []operatorSpec{
	{op: Equals, sql: "="},
	{op: GreaterThan, sql: ">"},
	{op: LessThan, sql: "<"},
	{op: GreaterThanOrEqual, sql: ">="},
	{op: LessThanOrEqual, sql: "<="},
	{op: NotEquals, sql: "<>"},
	{op: In, takes: ValueList},
	{op: NotIn, takes: ValueList},
	{op: IsNull, takes: NoOperand},
	{op: IsNotNull, takes: NoOperand},
	{op: Contains, textOnly: true},
}

func (o FilterOperator) spec() (operatorSpec, bool) {
	for _, s := range operators {
		if s.op == o {
			return s, true
		}
	}
	return operatorSpec{}, false
}

// FilterOperators lists every operator in the enum's order; Column.Operators lists those a
// column accepts.
func FilterOperators() []FilterOperator {
	out := make([]FilterOperator, len(operators))
	for i, s := range operators {
		out[i] = s.op
	}
	return out
}

// OperatorNames is the operators' names, comma separated, for messages.
func OperatorNames() string {
	names := make([]string, len(operators))
	for i, s := range operators {
		names[i] = string(s.op)
	}
	return strings.Join(names, ", ")
}

// Operators lists the operators a filter on c accepts: all of them on text, all but CONTAINS
// on the other types (booleans order false before true, as in SQL).
func (c Column) Operators() []FilterOperator {
	out := make([]FilterOperator, 0, len(operators))
	for _, s := range operators {
		if !s.textOnly || c.Type == TypeText {
			out = append(out, s.op)
		}
	}
	return out
}

// Takes says what the operator compares with; false for a name outside the enum.
func (o FilterOperator) Takes() (Operand, bool) {
	s, ok := o.spec()
	return s.takes, ok
}

// IsValid reports whether o is one of the enum's values.
func (o FilterOperator) IsValid() bool { _, ok := o.spec(); return ok }

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
		return apierr.BadInput("operator: %s is not a FilterOperator; accepted: %s", Quote(s), OperatorNames())
	}
	*o = op
	return nil
}

// Filter is the GraphQL input Filter: compare a catalog column with a value given as a string
// (numbers are sent as strings) that is converted to the column's type, with a list of such
// values (IN, NOT_IN), or with nothing (IS_NULL, IS_NOT_NULL). Value nil and Values nil or empty
// mean not given.
type Filter struct {
	Column   string         `json:"column"`
	Operator FilterOperator `json:"operator"`
	Value    *string        `json:"value"`
	Values   []string       `json:"values"`
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

// compile validates one filter and returns its SQL condition; where names it in errors
// ("filters[2]"). Every value is converted to the column's type (Convert) and travels as a
// parameter: one value with a cast to the column's type, a list as one text[] parameter cast to
// an array of the column's type, so that IN takes one placeholder however many values it has.
func (fl Filter) compile(where string, args *Args) (string, Column, error) {
	c, err := ResolveColumn(where+".column", fl.Column)
	if err != nil {
		return "", Column{}, err
	}
	spec, ok := fl.Operator.spec()
	if !ok {
		return "", Column{}, apierr.BadInput("%s.operator: %s is not a FilterOperator; accepted: %s", where, Quote(string(fl.Operator)), OperatorNames())
	}
	where += " (" + string(spec.op) + ")"
	if spec.textOnly && c.Type != TypeText {
		return "", Column{}, apierr.BadInput("%s: column %s is %s; %s applies to text columns only: %s", where, c.Name, c.Type, spec.op, textColumnNames())
	}
	hasValue, hasValues := fl.Value != nil, len(fl.Values) > 0
	switch spec.takes {
	case OneValue:
		if hasValues {
			return "", Column{}, apierr.BadInput("%s: takes value, not values; use IN or NOT_IN for a list", where)
		}
		if !hasValue {
			return "", Column{}, apierr.BadInput("%s: give value, the string to compare with", where)
		}
	case ValueList:
		if hasValue {
			return "", Column{}, apierr.BadInput("%s: takes values (a list of strings), not value", where)
		}
		if !hasValues {
			return "", Column{}, apierr.BadInput("%s: give values, a list of at least one string", where)
		}
	case NoOperand:
		if hasValue || hasValues {
			return "", Column{}, apierr.BadInput("%s: takes neither value nor values", where)
		}
	}
	expr := c.Expr()
	switch spec.op {
	case IsNull:
		return expr + " IS NULL", c, nil
	case IsNotNull:
		return expr + " IS NOT NULL", c, nil
	case In, NotIn:
		texts := make([]string, len(fl.Values))
		for i, s := range fl.Values {
			v, err := Convert(c, s)
			if err != nil {
				return "", Column{}, apierr.BadInput("%s: values[%d]: %v", where, i, err)
			}
			texts[i] = textForm(v)
		}
		list := args.Add(texts) + "::text[]"
		if c.Type != TypeText {
			list += "::" + string(c.Type) + "[]"
		}
		if spec.op == In {
			return expr + " = ANY(" + list + ")", c, nil
		}
		return expr + " <> ALL(" + list + ")", c, nil
	}
	v, err := Convert(c, *fl.Value)
	if err != nil {
		return "", Column{}, apierr.BadInput("%s: %v", where, err)
	}
	if spec.op == Contains {
		// A substring, ignoring letter case: strpos compares plain characters, so % _ and \ in
		// the value need no escaping (as they would in a LIKE pattern).
		return "strpos(lower(" + expr + "), lower(" + args.Add(v) + "::text)) > 0", c, nil
	}
	return expr + " " + spec.sql + " " + args.Add(v) + "::" + string(c.Type), c, nil
}

// textForm is a converted value (see Convert) in the input syntax of its type, as an element
// of the text[] parameter of IN and NOT_IN.
func textForm(v any) string {
	switch x := v.(type) {
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case bool:
		return strconv.FormatBool(x)
	case time.Time:
		return x.Format("2006-01-02 15:04:05.999999")
	default:
		return x.(string)
	}
}

// textColumnNames lists the text columns, for the CONTAINS message.
func textColumnNames() string {
	var names []string
	for _, c := range catalog {
		if c.Type == TypeText {
			names = append(names, c.Name)
		}
	}
	return strings.Join(names, ", ")
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
	return time.Time{}, apierr.BadInput("%s: %s is not a date YYYY-MM-DD (a real calendar date, e.g. 2024-03-01)", arg, Quote(s))
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
		return fmt.Errorf("value %s for column %s (%s) is not %s", Quote(value), c.Name, c.Type, want)
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

// Quote renders a client-supplied string for a message: Go-quoted, shortened when long.
func Quote(s string) string {
	const max = 80
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		return strconv.Quote(string(r[:max])) + "…"
	}
	return strconv.Quote(s)
}

func itoa(i int) string { return strconv.Itoa(i) }
