package reports

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// COPY takes no bind parameters, so the export writes its values into the statement text. Only
// values that were already validated and converted go there: the dates of the range
// (records.ParseDate), the filter values that records.Convert produced for the column's type (a
// list of them, for IN and NOT_IN, as text[]), and the page's numbers. inline renders each as a quoted string literal followed by the explicit
// cast that the statement builders put after every placeholder, so a value is always read as
// data of one type, never as SQL.

// inline replaces the placeholders $1..$n of sql by literals for args. Every placeholder must be
// followed by a cast (::type); every argument must be used; quoted text ('...' and "...") in sql
// is skipped. sql is the service's own text (catalog identifiers, operators, placeholders), never
// a client's.
func inline(sql string, args []any) (string, error) {
	lits := make([]string, len(args))
	for i, a := range args {
		l, err := literal(a)
		if err != nil {
			return "", fmt.Errorf("argument $%d: %w", i+1, err)
		}
		lits[i] = l
	}
	used := make([]bool, len(args))
	var b strings.Builder
	b.Grow(len(sql) + 16*len(args))
	for i := 0; i < len(sql); {
		switch c := sql[i]; c {
		case '\'', '"':
			end := strings.IndexByte(sql[i+1:], c)
			if end < 0 {
				return "", fmt.Errorf("unterminated %c at byte %d", c, i)
			}
			b.WriteString(sql[i : i+end+2])
			i += end + 2
		case '$':
			j := i + 1
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			n, err := strconv.Atoi(sql[i+1 : j])
			if err != nil || n < 1 || n > len(args) {
				return "", fmt.Errorf("placeholder %q at byte %d has no argument", sql[i:j], i)
			}
			if !strings.HasPrefix(sql[j:], "::") {
				return "", fmt.Errorf("placeholder $%d is not followed by a cast", n)
			}
			b.WriteString(lits[n-1])
			used[n-1] = true
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	for i, u := range used {
		if !u {
			return "", fmt.Errorf("argument $%d is not used", i+1)
		}
	}
	return b.String(), nil
}

// literal renders one converted value as a string literal in its type's input syntax.
func literal(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return quoteLiteral(x)
	case int32:
		return quoteLiteral(strconv.FormatInt(int64(x), 10))
	case int64:
		return quoteLiteral(strconv.FormatInt(x, 10))
	case bool:
		return quoteLiteral(strconv.FormatBool(x))
	case time.Time:
		if x.Location() != time.UTC || x.Year() < 1 || x.Year() > 9999 {
			return "", fmt.Errorf("time %v is not a converted date or timestamp", x)
		}
		return quoteLiteral(x.Format("2006-01-02 15:04:05.999999"))
	case []string:
		return quoteLiteral(arrayText(x))
	default:
		return "", fmt.Errorf("no literal form for %T", v)
	}
}

// quoteLiteral quotes s as an SQL string literal that means s whatever
// standard_conforming_strings is: quotes doubled, and when s holds a backslash, the escape
// string form E'...' with backslashes doubled (as libpq's PQescapeLiteral does). s must be valid
// UTF-8 (the connection's client_encoding is checked to be UTF8, where neither ' nor \ can be
// part of a multi-byte character) and hold no NUL, which text cannot hold.
func quoteLiteral(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("value is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("value holds a NUL character")
	}
	q := strings.ReplaceAll(s, "'", "''")
	if strings.IndexByte(q, '\\') >= 0 {
		// The leading space keeps E from joining a preceding identifier.
		return " E'" + strings.ReplaceAll(q, `\`, `\\`) + "'", nil
	}
	return "'" + q + "'", nil
}

// arrayText writes elems in PostgreSQL's array input syntax (array_in): every element in
// double quotes, so that none is read as NULL and spaces, commas and braces are data, with a
// backslash before each double quote and backslash inside. quoteLiteral then makes the whole a
// string literal; the statement casts it to text[].
func arrayText(elems []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range elems {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for j := 0; j < len(e); j++ { // bytes: quoteLiteral refuses what is not UTF-8
			if e[j] == '"' || e[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(e[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}
