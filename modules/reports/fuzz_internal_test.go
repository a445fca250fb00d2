package reports

import (
	"errors"
	"regexp"
	"strings"
	"testing"

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
		b.WriteByte('L')
		i = j + 1
	}
	return b.String(), nil
}

func isIdentChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
