package reports

import (
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// FuzzExportQuery: any query string of the CSV export. Parsing it either refuses it with
// BAD_USER_INPUT or gives arguments whose statement, with the values written in as literals
// (COPY takes no parameters), is the service's statement with one literal exactly where each
// placeholder was: no value ends its literal early or adds SQL of its own. Seeds: below and
// testdata/fuzz/FuzzExportQuery/; `make test` runs it briefly with -fuzz.
func FuzzExportQuery(f *testing.F) {
	const dates = "start_date=2024-03-01&end_date=2024-03-31"
	for _, q := range []string{
		dates,
		dates + "&use_or=true&filter=station:EQUALS:Central&filter=distance:GREATER_THAN:9.5&limit=10&offset=5",
		dates + "&filter=station:EQUALS:x');%20DROP%20TABLE%20t;%20--",
		dates + `&filter=station:EQUALS:a\'b&filter=callsign:LESS_THAN:\\`,
		dates + "&filter=municipality:EQUALS:E'%5C'&filter=gender:EQUALS:''",
		dates + "&filter=occurred_at:GREATER_THAN_OR_EQUAL:2024-03-15T08:00&filter=transported:EQUALS:TRUE",
		dates + "&filter=age:EQUALS:1)%20OR%20(1=1",
		dates + "&filter=station:EQUALS:$1::text",
		dates + "&filter=station:IN:" + url.QueryEscape(`["Alpha","Beta, North","a\"}', E'\\","{}","NULL",""]`),
		dates + "&filter=age:NOT_IN:%5B%227%22%2C%22%2B8%22%5D&filter=occurred_at:IN:[\"2024-03-01T10:00\"]",
		dates + "&filter=municipality:IS_NULL&filter=transported:IS_NOT_NULL&filter=callsign:CONTAINS:%25_%5C",
		dates + "&filter=station:NOT_EQUALS:O'Brien&filter=distance:IN:[\"9.5\",\".5\"]",
		dates + "&filter=station:IS_NULL:&filter=age:IN:[1]&filter=station:IN:[null]&filter=distance:CONTAINS:1",
		"start_date=2024-03-31&end_date=2024-03-01",
		dates + "&filter=nope:EQUALS:1",
		dates + "&limit=-1",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := ParseExportQuery(raw)
		if err != nil {
			wantBadInput(t, err)
			return
		}
		q, args, err := exportSQL(a)
		if err != nil {
			wantBadInput(t, err)
			return
		}
		sql, err := inline(q, args)
		if err != nil {
			t.Fatalf("validated arguments do not inline: %v\nquery string %q", err, raw)
		}
		template, err := literalsOut(placeholderRE.ReplaceAllString(q, "'$$'"))
		if err != nil {
			t.Fatalf("the statement itself: %v\n%s", err, q)
		}
		got, err := literalsOut(sql)
		if err != nil || got != template {
			t.Fatalf("a value left its literal (%v):\n got %s\nwant %s\nquery string %q", err, got, template, raw)
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

var placeholderRE = regexp.MustCompile(`\$[0-9]+`)

// literalsOut reads sql as PostgreSQL's lexer does with standard_conforming_strings on and
// replaces each string literal ('...' where a doubled quote stands for a quote, or E'...' with
// backslash escapes) by L, and each run of spaces by one space. It fails on a literal that does
// not end.
func literalsOut(sql string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(sql); {
		c := sql[i]
		escape := (c == 'E' || c == 'e') && i+1 < len(sql) && sql[i+1] == '\'' && (i == 0 || !isIdentChar(sql[i-1]))
		if c != '\'' && !escape {
			if c == ' ' && strings.HasSuffix(b.String(), " ") {
				i++
				continue
			}
			b.WriteByte(c)
			i++
			continue
		}
		if escape {
			i++
		}
		j := i + 1
		for {
			if j >= len(sql) {
				return "", errors.New("unterminated literal")
			}
			if escape && sql[j] == '\\' {
				j += 2
				continue
			}
			if sql[j] == '\'' {
				if j+1 < len(sql) && sql[j+1] == '\'' {
					j += 2
					continue
				}
				break
			}
			j++
		}
		// A literal's leading space (E'...' has one) is not part of the statement's shape.
		trimmed := strings.TrimRight(b.String(), " ")
		b.Reset()
		b.WriteString(trimmed)
		b.WriteByte('L')
		i = j + 1
	}
	return b.String(), nil
}

func isIdentChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// FuzzArrayLiteral: any list of strings (the fuzzer's text split at U+001F), written as the
// text[] literal of IN and NOT_IN, reads back by PostgreSQL's rules for string literals and for
// array_in as exactly that list. Only a list with a NUL or with bytes that are not UTF-8 (which
// text cannot hold) is refused.
func FuzzArrayLiteral(f *testing.F) {
	for _, s := range []string{"", "a", "a\x1fb", `"\x1f\`, "NULL\x1f\x1f{}", "'\x1f''\x1fE'x'", "Ålesund Sør, \"Kai\" 1's\x1f\\'\x1f\\\\'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		elems := strings.Split(spec, "\x1f")
		lit, err := literal(elems)
		if err != nil {
			if utf8.ValidString(spec) && !strings.Contains(spec, "\x00") {
				t.Fatalf("literal(%q): %v", elems, err)
			}
			return
		}
		text, rest, err := readLiteral(lit)
		if err != nil || rest != "" {
			t.Fatalf("literal %s of %q: %v, left %q", lit, elems, err, rest)
		}
		back, err := readArray(text)
		if err != nil || !slices.Equal(back, elems) {
			t.Fatalf("literal %s of %q reads back as %q (%v)", lit, elems, back, err)
		}
	})
}

// readLiteral reads one string literal at the start of sql as PostgreSQL's lexer does with
// standard_conforming_strings on: '...' where a doubled quote stands for a quote, or E'...' with
// backslash escapes (the writer uses only those of a backslash and a quote). It returns the
// literal's text and what follows.
func readLiteral(sql string) (text, rest string, err error) {
	sql = strings.TrimLeft(sql, " ")
	escape := strings.HasPrefix(sql, "E'")
	if escape {
		sql = sql[1:]
	}
	if !strings.HasPrefix(sql, "'") {
		return "", "", errors.New("no literal")
	}
	var b strings.Builder
	for i := 1; i < len(sql); i++ {
		switch c := sql[i]; {
		case escape && c == '\\':
			if i+1 >= len(sql) || (sql[i+1] != '\\' && sql[i+1] != '\'') {
				return "", "", errors.New("unexpected escape")
			}
			b.WriteByte(sql[i+1])
			i++
		case c == '\'':
			if i+1 < len(sql) && sql[i+1] == '\'' {
				b.WriteByte('\'')
				i++
				continue
			}
			return b.String(), sql[i+1:], nil
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated literal")
}

// readArray reads a one-dimensional text[] in array_in's syntax whose elements are all double
// quoted (as the writer writes them): {"a","b\"c"}.
func readArray(s string) ([]string, error) {
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return nil, errors.New("not in braces")
	}
	s = s[1 : len(s)-1]
	var out []string
	for len(s) > 0 {
		if s[0] != '"' {
			return nil, errors.New("unquoted element")
		}
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' {
				i++
				if i == len(s) {
					return nil, errors.New("backslash at the end")
				}
			}
			b.WriteByte(s[i])
		}
		if i == len(s) {
			return nil, errors.New("unterminated element")
		}
		out = append(out, b.String())
		s = s[i+1:]
		if len(s) > 0 {
			if s[0] != ',' || len(s) == 1 {
				return nil, errors.New("bad separator")
			}
			s = s[1:]
		}
	}
	if out == nil {
		return []string{}, nil
	}
	return out, nil
}
