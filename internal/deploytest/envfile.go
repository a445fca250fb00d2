package deploytest

import (
	"fmt"
	"regexp"
	"strings"
)

// ParseEnvironmentFile reads an env file as systemd reads EnvironmentFile= (systemd.exec(5)):
// lines starting with # or ; and lines without = are skipped; around a value, spaces, tabs and
// carriage returns go; an unquoted value keeps its inner spaces and quotes, a backslash keeps
// the character after it and one at the end of the line joins the next; a '-quoted value is
// verbatim; a "-quoted value knows \" \\ \` \$ and line joins, and keeps any other backslash.
// Both quoted forms may span lines. Later assignments win.
func ParseEnvironmentFile(text string) (map[string]string, error) {
	env := map[string]string{}
	s := []rune(strings.ReplaceAll(text, "\r\n", "\n"))
	i := 0
	blank := func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' }
	toEOL := func() {
		for i < len(s) && s[i] != '\n' {
			i++
		}
		i++
	}
	for i < len(s) {
		for i < len(s) && (blank(s[i]) || s[i] == '\n') {
			i++
		}
		if i >= len(s) {
			break
		}
		if s[i] == '#' || s[i] == ';' {
			toEOL()
			continue
		}
		start := i
		for i < len(s) && s[i] != '=' && s[i] != '\n' {
			i++
		}
		if i >= len(s) || s[i] == '\n' {
			i++ // no '=': skipped
			continue
		}
		key := strings.TrimFunc(string(s[start:i]), blank)
		i++
		for i < len(s) && blank(s[i]) {
			i++
		}
		var v strings.Builder
		switch {
		case i < len(s) && s[i] == '\'':
			i++
			for i < len(s) && s[i] != '\'' {
				v.WriteRune(s[i])
				i++
			}
			if i >= len(s) {
				return nil, fmt.Errorf("parse env file: %s: unterminated '", key)
			}
			toEOL()
		case i < len(s) && s[i] == '"':
			i++
			for i < len(s) && s[i] != '"' {
				if s[i] == '\\' && i+1 < len(s) {
					switch s[i+1] {
					case '"', '\\', '`', '$':
						v.WriteRune(s[i+1])
					case '\n':
					default:
						v.WriteRune(s[i])
						v.WriteRune(s[i+1])
					}
					i += 2
					continue
				}
				v.WriteRune(s[i])
				i++
			}
			if i >= len(s) {
				return nil, fmt.Errorf("parse env file: %s: unterminated \"", key)
			}
			toEOL()
		default:
			for i < len(s) && s[i] != '\n' {
				if s[i] == '\\' && i+1 < len(s) {
					if s[i+1] != '\n' {
						v.WriteRune(s[i+1])
					}
					i += 2
					continue
				}
				v.WriteRune(s[i])
				i++
			}
			i++
		}
		if !validName.MatchString(key) {
			return nil, fmt.Errorf("parse env file: %q is not a variable name systemd accepts", key)
		}
		env[key] = strings.TrimRightFunc(v.String(), blank)
	}
	return env, nil
}

var validName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
