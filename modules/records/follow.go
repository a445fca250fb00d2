package records

import (
	"cmp"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

// Following a record selection from the changed rows of fact_record (contract 6.13): a counting
// answer whose columns and filters are all columns of fact_record is kept up to date from the
// rows a load changed (platform/follow). What is here evaluates a selection on such a row
// exactly as the database evaluates Compile's condition, and reads a row's values as the
// answers write them; whatever it cannot evaluate exactly is refused, and the answer is then
// computed by the database.

// RecordTable is the table the followed columns belong to (AliasRecord's).
const RecordTable = "fact_record"

// Field is the column's name in its table.
func (c Column) Field() string { return c.field }

// Followable says whether the column is one of fact_record's, whose values a changed row of
// that table carries.
func (c Column) Followable() bool { return c.alias == AliasRecord }

// rowText is c's value in a changed row as the stream sent it (nil for NULL), after checking
// that the table's column has a type whose text is read here.
func rowText(c Column, r delta.Row) (*string, error) {
	col, v, err := r.ColumnValue(c.field)
	if err != nil {
		return nil, err
	}
	if !readsType(c.Type, col.TypeName) {
		return nil, fmt.Errorf("%w: %s.%s is of type %q", delta.ErrCannotFollow, RecordTable, c.field, col.TypeName)
	}
	return v, nil
}

// readsType says whether the replication stream's text of a value of database type typeName
// (pgx's name) is read here for a column of catalog type t.
func readsType(t ColumnType, typeName string) bool {
	switch t {
	case TypeText:
		return typeName == "text" || typeName == "varchar"
	case TypeInteger:
		return typeName == "int2" || typeName == "int4" || typeName == "int8"
	case TypeNumeric:
		return typeName == "numeric"
	case TypeBoolean:
		return typeName == "bool"
	case TypeTimestamp:
		return typeName == "timestamp"
	}
	return false
}

// ValueText is c's value in a changed row as the answers write it, the database's c::text (nil
// for NULL): booleans are "true" and "false" there, "t" and "f" in the stream. Grouping by
// this text is grouping by the value only where equal values have one text: a numeric column
// must have a scale (numeric(p,s)), and text equality must be byte equality (the caller checks
// the collation). Errors wrap delta.ErrCannotFollow.
func ValueText(c Column, r delta.Row) (*string, error) {
	v, err := rowText(c, r)
	if err != nil || v == nil {
		return v, err
	}
	switch c.Type {
	case TypeBoolean:
		switch *v {
		case "t":
			s := "true"
			return &s, nil
		case "f":
			s := "false"
			return &s, nil
		}
		return nil, fmt.Errorf("%w: boolean %q", delta.ErrCannotFollow, *v)
	case TypeNumeric:
		if col, _ := r.Column(c.field); col.TypeMod < 0 {
			return nil, fmt.Errorf("%w: %s.%s is numeric without a scale (1.0 and 1.00 are one value)", delta.ErrCannotFollow, RecordTable, c.field)
		}
	}
	return v, nil
}

// isTimestampText says whether s is a timestamp's text in the ISO DateStyle (the pool's),
// YYYY-MM-DD HH:MM:SS with up to six decimals: a four-digit year of the common era, so that the
// text orders as the time does and parses exactly. Checked by hand rather than by a regular
// expression: it runs for every changed row of every followed question, where the expression
// took a third of the time a load's rows took to follow.
func isTimestampText(s string) bool {
	const layout = "0000-00-00 00:00:00"
	if len(s) < len(layout) {
		return false
	}
	for i := range len(layout) {
		if layout[i] == '0' {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		} else if s[i] != layout[i] {
			return false
		}
	}
	frac := s[len(layout):]
	if frac == "" {
		return true
	}
	if frac[0] != '.' || len(frac) < 2 || len(frac) > 7 {
		return false
	}
	for i := 1; i < len(frac); i++ {
		if frac[i] < '0' || frac[i] > '9' {
			return false
		}
	}
	return true
}

// ParseTimestamp reads a timestamp's text (ISO DateStyle, a year from 0001 to 9999), as UTC
// wall-clock time; an error for another form (infinity, BC, another DateStyle).
func ParseTimestamp(s string) (time.Time, error) {
	if !isTimestampText(s) {
		return time.Time{}, fmt.Errorf("%w: timestamp %q", delta.ErrCannotFollow, s)
	}
	t, err := time.Parse("2006-01-02 15:04:05.999999", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: timestamp %q: %v", delta.ErrCannotFollow, s, err)
	}
	return t, nil
}

// parseNumeric reads a numeric's text exactly (NaN and infinities are refused).
func parseNumeric(s string) (*big.Rat, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%w: numeric %q", delta.ErrCannotFollow, s)
	}
	return r, nil
}

// CompareText compares two values of c as the database orders them, given as their text (as
// ValueText gives them). Text is ordered by a collation, which only the database knows: it
// cannot be compared here (an error).
func CompareText(c Column, a, b string) (int, error) {
	switch c.Type {
	case TypeInteger:
		x, err1 := strconv.ParseInt(a, 10, 64)
		y, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("%w: integers %q, %q", delta.ErrCannotFollow, a, b)
		}
		return cmp.Compare(x, y), nil
	case TypeNumeric:
		x, err := parseNumeric(a)
		if err != nil {
			return 0, err
		}
		y, err := parseNumeric(b)
		if err != nil {
			return 0, err
		}
		return x.Cmp(y), nil
	case TypeBoolean:
		// ValueText's forms, false before true.
		return cmp.Compare(b2i(a == "true"), b2i(b == "true")), nil
	case TypeTimestamp:
		x, err := ParseTimestamp(a)
		if err != nil {
			return 0, err
		}
		y, err := ParseTimestamp(b)
		if err != nil {
			return 0, err
		}
		return x.Compare(y), nil
	}
	return 0, fmt.Errorf("%w: text is ordered by the database's collation", delta.ErrCannotFollow)
}

// compareRow compares a changed row's value of c (its text as the stream sent it, not NULL)
// with a value Convert made: the sign of value - v. Text compares for equality only (0 or 1).
func compareRow(c Column, text string, v any) (int, error) {
	switch c.Type {
	case TypeInteger:
		x, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: integer %q", delta.ErrCannotFollow, text)
		}
		return cmp.Compare(x, int64(v.(int32))), nil
	case TypeNumeric:
		x, err := parseNumeric(text)
		if err != nil {
			return 0, err
		}
		y, err := parseNumeric(v.(string))
		if err != nil {
			return 0, err
		}
		return x.Cmp(y), nil
	case TypeBoolean:
		var x bool
		switch text {
		case "t":
			x = true
		case "f":
		default:
			return 0, fmt.Errorf("%w: boolean %q", delta.ErrCannotFollow, text)
		}
		return cmp.Compare(b2i(x), b2i(v.(bool))), nil
	case TypeTimestamp:
		x, err := ParseTimestamp(text)
		if err != nil {
			return 0, err
		}
		return x.Compare(v.(time.Time)), nil
	}
	if text == v.(string) {
		return 0, nil
	}
	return 1, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Selects is f as a predicate on a changed row of fact_record: exactly the rows Compile's
// condition selects (a NULL compares as false, as in the condition, which negates no term). It
// is false when that cannot be decided here: a column of another table, text compared by order
// or letter case (the database's collation and locale decide), or text equality on a column
// whose collation is not deterministic (textEqual says whether it is). Call it on a filter
// Compile accepted.
func (f RecordFilter) Selects(textEqual func(Column) bool) (func(delta.Row) (bool, error), bool) {
	start, err1 := ParseDate("start_date", f.StartDate)
	end, err2 := ParseDate("end_date", f.EndDate)
	if err1 != nil || err2 != nil || start.Year() > 9999 || end.Year() > 9999 {
		return nil, false
	}
	from, to := f.StartDate, f.EndDate
	occurred, _ := LookupColumn("occurred_at")
	terms := make([]func(delta.Row) (bool, error), 0, len(f.Filters))
	for _, fl := range f.Filters {
		t, ok := fl.selects(textEqual)
		if !ok {
			return nil, false
		}
		terms = append(terms, t)
	}
	return func(r delta.Row) (bool, error) {
		at, err := rowText(occurred, r)
		if err != nil {
			return false, err
		}
		// occurred_at >= start AND occurred_at < end + 1 day: its date within [start, end].
		// infinity and -infinity are outside every range; NULL selects nothing.
		if at == nil || *at == "infinity" || *at == "-infinity" {
			return false, nil
		}
		if !isTimestampText(*at) {
			return false, fmt.Errorf("%w: timestamp %q", delta.ErrCannotFollow, *at)
		}
		if day := (*at)[:10]; day < from || day > to {
			return false, nil
		}
		if len(terms) == 0 {
			return true, nil
		}
		either := f.UseOr && len(terms) > 1
		for _, t := range terms {
			ok, err := t(r)
			if err != nil {
				return false, err
			}
			if ok && either {
				return true, nil
			}
			if !ok && !either {
				return false, nil
			}
		}
		return !either, nil
	}, true
}

// selects is one filter as a predicate (see Selects).
func (fl Filter) selects(textEqual func(Column) bool) (func(delta.Row) (bool, error), bool) {
	c, ok := LookupColumn(fl.Column)
	if !ok || !c.Followable() {
		return nil, false
	}
	switch fl.Operator {
	case IsNull, IsNotNull:
		null := fl.Operator == IsNull
		return func(r delta.Row) (bool, error) {
			v, err := rowText(c, r)
			return (v == nil) == null, err
		}, true
	case Contains:
		return nil, false
	}
	if c.Type == TypeText && !textEqual(c) {
		return nil, false
	}
	var vals []any
	switch fl.Operator {
	case In, NotIn:
		for _, s := range fl.Values {
			v, err := Convert(c, s)
			if err != nil {
				return nil, false
			}
			vals = append(vals, v)
		}
	default:
		if fl.Value == nil {
			return nil, false
		}
		v, err := Convert(c, *fl.Value)
		if err != nil {
			return nil, false
		}
		vals = []any{v}
	}
	var test func(int) bool
	switch fl.Operator {
	case Equals, In:
		test = func(s int) bool { return s == 0 }
	case NotEquals:
		test = func(s int) bool { return s != 0 }
	case GreaterThan:
		test = func(s int) bool { return s > 0 }
	case LessThan:
		test = func(s int) bool { return s < 0 }
	case GreaterThanOrEqual:
		test = func(s int) bool { return s >= 0 }
	case LessThanOrEqual:
		test = func(s int) bool { return s <= 0 }
	case NotIn:
	default:
		return nil, false
	}
	if c.Type == TypeText && test != nil && fl.Operator != Equals && fl.Operator != In && fl.Operator != NotEquals {
		return nil, false // ordered by the collation
	}
	return func(r delta.Row) (bool, error) {
		v, err := rowText(c, r)
		if err != nil || v == nil {
			return false, err
		}
		for _, w := range vals {
			s, err := compareRow(c, *v, w)
			if err != nil {
				return false, err
			}
			if fl.Operator == NotIn {
				if s == 0 {
					return false, nil
				}
				continue
			}
			if test(s) {
				return true, nil
			}
		}
		return fl.Operator == NotIn, nil
	}, true
}
