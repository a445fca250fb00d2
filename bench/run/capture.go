package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// statement is one SQL statement as the service sent it: its text and its bind parameters in
// their text form (nil for NULL). Simple is set for a statement sent with the simple protocol
// (no parameters; the export's COPY), Prepared for one the service prepared under a name and
// executes from there (database.PlanOnce).
type statement struct {
	SQL      string
	Params   []*string
	Simple   bool
	Prepared bool
}

// The service's statements are captured from the database's own log: with log_statement=all,
// PostgreSQL logs every statement a session executes, with the bind parameters of the extended
// protocol in a DETAIL line. That is exactly what reached the database, whatever code built it,
// so the baseline runs the same SQL with the same values without the benchmark knowing how the
// repositories build their SQL.

// logWatcher reads the server log from an offset on.
type logWatcher struct {
	path   string
	offset int64
}

func newLogWatcher(path string) (*logWatcher, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	return &logWatcher{path: path, offset: fi.Size()}, nil
}

// next returns the log written since the last call.
func (w *logWatcher) next() (string, error) {
	f, err := os.Open(w.path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(w.offset, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	w.offset += int64(len(b))
	return string(b), err
}

// entryStart matches the start of a log entry with PostgreSQL's default log_line_prefix
// '%m [%p] ': "2025-01-02 10:11:12.345 UTC [4242] LOG:  ...".
var entryStart = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \S+ \[(\d+)\] ([A-Z]+):  `)

type logEntry struct {
	pid, level, text string
}

// parseLog splits log text into entries. The server indents the continuation lines of a
// multi-line message with a tab, which is removed.
func parseLog(s string) []logEntry {
	var out []logEntry
	for line := range strings.SplitSeq(s, "\n") {
		if m := entryStart.FindStringSubmatchIndex(line); m != nil {
			out = append(out, logEntry{pid: line[m[2]:m[3]], level: line[m[4]:m[5]], text: line[m[1]:]})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].text += "\n" + strings.TrimPrefix(line, "\t")
		}
	}
	for i := range out {
		out[i].text = strings.TrimSuffix(out[i].text, "\n")
	}
	return out
}

// statements extracts the executed statements from log entries, in order.
func statements(entries []logEntry) ([]statement, error) {
	var out []statement
	for i, e := range entries {
		if e.level != "LOG" {
			continue
		}
		var st statement
		switch {
		case strings.HasPrefix(e.text, "statement: "):
			st = statement{SQL: strings.TrimPrefix(e.text, "statement: "), Simple: true}
		case strings.HasPrefix(e.text, "execute "):
			// "execute <name>: <sql>"; a statement name has no ": ", an unnamed one is
			// "<unnamed>".
			name, sql, ok := strings.Cut(strings.TrimPrefix(e.text, "execute "), ": ")
			if !ok {
				return nil, fmt.Errorf("unexpected log entry %q", e.text)
			}
			st.SQL, st.Prepared = sql, name != "<unnamed>"
			if i+1 < len(entries) && entries[i+1].pid == e.pid && entries[i+1].level == "DETAIL" {
				if p, ok := strings.CutPrefix(entries[i+1].text, "parameters: "); ok {
					params, err := parseParams(p)
					if err != nil {
						return nil, err
					}
					st.Params = params
				}
			}
		default:
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// parseParams reads "$1 = 'a', $2 = NULL", a quote inside a value being doubled.
func parseParams(s string) ([]*string, error) {
	var out []*string
	for len(s) > 0 {
		want := fmt.Sprintf("$%d = ", len(out)+1)
		if !strings.HasPrefix(s, want) {
			return nil, fmt.Errorf("parameters: expected %q at %.40q", want, s)
		}
		s = s[len(want):]
		switch {
		case strings.HasPrefix(s, "NULL"):
			out = append(out, nil)
			s = s[len("NULL"):]
		case strings.HasPrefix(s, "'"):
			var b strings.Builder
			i := 1
			for {
				j := strings.IndexByte(s[i:], '\'')
				if j < 0 {
					return nil, errors.New("parameters: unterminated value")
				}
				b.WriteString(s[i : i+j])
				i += j + 1
				if i < len(s) && s[i] == '\'' { // a doubled quote
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			v := b.String()
			out = append(out, &v)
			s = s[i:]
		default:
			return nil, fmt.Errorf("parameters: unexpected %.40q", s)
		}
		s = strings.TrimPrefix(s, ", ")
	}
	return out, nil
}

// args are the parameters for pgx: strings, which pgx sends in text format for any type, so the
// server parses them exactly as it parsed the service's values for the log.
func (st statement) args() []any {
	out := make([]any, len(st.Params))
	for i, p := range st.Params {
		if p != nil {
			out[i] = *p
		}
	}
	return out
}
