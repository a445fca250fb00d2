package gqlhttp

import (
	"bytes"
	"net/http"
	"testing"
)

// sink is a gqlexec.ResponseWriter that keeps what reaches it.
type sink struct {
	header http.Header
	status int
	body   bytes.Buffer
	writes int
}

func (s *sink) Header() http.Header         { return s.header }
func (s *sink) WriteHeader(status int)      { s.status = status }
func (s *sink) Write(p []byte) (int, error) { s.writes++; return s.body.Write(p) }
func (s *sink) Reset() bool                 { s.body.Reset(); s.status = 0; return true }
func (s *sink) Fail(error)                  {}

// An answer within the limit is held, none of it sent, until flush; it is the answer kept.
func TestRecorderHoldsAnAnswerThatMayBeKept(t *testing.T) {
	out := &sink{header: http.Header{"Content-Type": {"application/json"}}}
	outgrown := 0
	r := &recorder{w: out, limit: 1 << 20, outgrown: func() { outgrown++ }}
	r.WriteHeader(http.StatusOK)
	for range 100 {
		_, _ = r.Write(bytes.Repeat([]byte("a"), 1000))
	}
	if out.writes != 0 || out.status != 0 {
		t.Fatalf("%d writes and status %d reached the client before the answer was complete", out.writes, out.status)
	}
	a := r.answer()
	if a == nil || len(a.Body) != 100_000 {
		t.Fatalf("answer %v", a)
	}
	if err := r.flush(); err != nil || out.body.Len() != 100_000 || out.status != http.StatusOK || outgrown != 0 {
		t.Errorf("flushed: %v, %d bytes, status %d, outgrown %d", err, out.body.Len(), out.status, outgrown)
	}
}

// Past the limit the waiting requests are let go (once), what was held is sent first, in
// order, and the rest follows as it is written; nothing is kept.
func TestRecorderPassesOnAnAnswerTooLargeToKeep(t *testing.T) {
	out := &sink{header: http.Header{}}
	outgrown := 0
	r := &recorder{w: out, limit: 10_000, outgrown: func() { outgrown++ }}
	var want bytes.Buffer
	for i := range 50 {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 1000)
		want.Write(p)
		if _, err := r.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	b, err := r.Swap(bytes.Repeat([]byte("z"), 5000))
	if err != nil || len(b) != 0 {
		t.Fatalf("Swap: %v, %d bytes back", err, len(b))
	}
	want.Write(bytes.Repeat([]byte("z"), 5000))
	if outgrown != 1 || !r.over {
		t.Fatalf("outgrown called %d times, over %v", outgrown, r.over)
	}
	if !bytes.Equal(out.body.Bytes(), want.Bytes()) {
		t.Errorf("the client got %d bytes, not the %d written in order", out.body.Len(), want.Len())
	}
	if r.answer() != nil {
		t.Error("an answer past the limit is kept")
	}
}
