package main

import (
	"bufio"
	"errors"
	"io"
	"strconv"
	"strings"
)

// readSSE reads a Server-Sent Events stream (the WHATWG rules the graphql-sse protocol uses):
// fields up to a blank line make an event; a line starting with ':' is a comment (the service's
// heartbeat); several data lines are joined with "\n"; one space after the colon is dropped;
// lines end with "\n" or "\r\n". It calls event for each event with its name (the event field)
// and data, until the stream ends (nil at a clean end) or event returns false.
func readSSE(r io.Reader, event func(name, data string) bool) error {
	br := bufio.NewReaderSize(r, 4096)
	var name string
	var data []string
	seen := false // a field of the pending event was read
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				// An event not ended by a blank line is dropped, as the rules say.
				return nil
			}
			return err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if seen {
				if !event(name, strings.Join(data, "\n")) {
					return nil
				}
			}
			name, data, seen = "", nil, false
		case line[0] == ':':
			// a comment
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				name, seen = value, true
			case "data":
				data, seen = append(data, value), true
			}
		}
	}
}

// countOf is the records_count of a next event's data, {"data":{"records_count":{"count":N}}};
// false when the data is anything else (errors, another shape).
func countOf(data string) (int64, bool) {
	const prefix, suffix = `{"data":{"records_count":{"count":`, `}}}`
	if !strings.HasPrefix(data, prefix) || !strings.HasSuffix(data, suffix) {
		return 0, false
	}
	n, err := strconv.ParseInt(data[len(prefix):len(data)-len(suffix)], 10, 64)
	return n, err == nil
}

// promSum adds the samples of the metric name in a Prometheus text exposition whose labels
// include every one of labels (each `key="value"`, as exposed). Label values may hold spaces.
func promSum(text, name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var set string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			set, rest = ","+rest[1:end]+",", rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric whose name starts with this one
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(set, ","+l+",")
		}
		f := strings.Fields(rest)
		if !ok || len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum, found = sum+v, true
	}
	return sum, found
}
