package main

import (
	"bytes"
	"fmt"
)

// Every measured service response is checked, not only the one compared with the hand-written
// SQL before a line: a service that answered some requests with an error, an empty list or half
// an answer would otherwise be measured as fast. A full comparison per response would cost the
// driver as much as the service's own work (decoding 8 MB of JSON for a patients answer) on the
// same two processors, so each response is held to the answer that was compared (capture,
// checkAnswer) by what is cheap to see while its bytes stream past: status 200 (rawClient), the
// same length to the byte, and the same first and last printEnds bytes. The answer's data is
// the same from request to request (the benchmark's database does not change), and so are its
// bytes: the soak checks that the service's answers to a question are identical. The ends
// catch what the length alone would not: a GraphQL `errors` member, which the service writes at
// the top level before or after `data` (the checked answer has none: openAnswer), or a CSV
// without its header.

// printEnds is how many bytes of each end of an answer are kept.
const printEnds = 64

// answerPrint is an answer's size and ends, recorded as its bytes are written to it; the zero
// value is ready to use.
type answerPrint struct {
	size int64
	head []byte // the first printEnds bytes
	tail []byte // the last printEnds bytes
}

func (a *answerPrint) Write(p []byte) (int, error) {
	a.size += int64(len(p))
	if len(a.head) < printEnds {
		a.head = append(a.head, p[:min(len(p), printEnds-len(a.head))]...)
	}
	if len(p) >= printEnds {
		a.tail = append(a.tail[:0], p[len(p)-printEnds:]...)
	} else {
		a.tail = append(a.tail, p...)
		if over := len(a.tail) - printEnds; over > 0 {
			a.tail = a.tail[:copy(a.tail, a.tail[over:])]
		}
	}
	return len(p), nil
}

// differs says how got differs from the checked answer a, or nil when it does not.
func (a *answerPrint) differs(got *answerPrint) error {
	switch {
	case got.size != a.size:
		return fmt.Errorf("the response has %d bytes, the checked answer %d: begins %q, ends %q", got.size, a.size, got.head, got.tail)
	case !bytes.Equal(got.head, a.head):
		return fmt.Errorf("the response begins %q, the checked answer %q", got.head, a.head)
	case !bytes.Equal(got.tail, a.tail):
		return fmt.Errorf("the response ends %q, the checked answer %q", got.tail, a.tail)
	}
	return nil
}
