package gqllive

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/platform/gqlexec"
)

// Unit tests of the streams' bounds (live.go) and of what a feed keeps of its request
// (feed.go). The streams themselves, over HTTP, are tested in app/live_test.go and
// app/live_budget_test.go.

func newTestStreams(t *testing.T, cfg StreamsConfig) *Streams {
	t.Helper()
	cfg.Heartbeat = time.Second
	s, cleanup, err := NewStreams(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return s
}

// admitN admits n streams of key and fails the test at the first refusal.
func admitN(t *testing.T, s *Streams, key string, maxOfKey, n int) {
	t.Helper()
	for i := range n {
		if refusal := s.admit(key, maxOfKey); refusal != nil {
			t.Fatalf("stream %d of %s: refused: %s", i+1, key, refusal.message)
		}
	}
}

func wantRefusal(t *testing.T, what string, refusal *errStreams, setting string) {
	t.Helper()
	if refusal == nil {
		t.Fatalf("%s: admitted, want refused naming %s", what, setting)
	}
	if refusal.status != http.StatusTooManyRequests || !strings.Contains(refusal.message, setting) {
		t.Errorf("%s: %d %q, want 429 naming %s", what, refusal.status, refusal.message, setting)
	}
}

func TestStreamsPerKey(t *testing.T) {
	s := newTestStreams(t, StreamsConfig{Max: 10, MaxPerKey: 2, MaxBytes: 1 << 20})
	// A key without max_streams: LIMITS__MAX_STREAMS_PER_KEY.
	admitN(t, s, "default", 0, 2)
	wantRefusal(t, "the third stream of a key without max_streams", s.admit("default", 0), "LIMITS__MAX_STREAMS_PER_KEY")
	// A key's own max_streams wins, larger or smaller.
	admitN(t, s, "board", 3, 3)
	wantRefusal(t, "past a key's max_streams of 3", s.admit("board", 3), "max_streams")
	admitN(t, s, "kiosk", 1, 1)
	wantRefusal(t, "past a key's max_streams of 1", s.admit("kiosk", 1), "max_streams")
	// An ended stream gives its place back.
	s.release("default")
	admitN(t, s, "default", 0, 1)
	// LIMITS__MAX_STREAMS still bounds them all.
	admitN(t, s, "other", 0, 2)
	admitN(t, s, "third", 0, 2)
	wantRefusal(t, "past LIMITS__MAX_STREAMS", s.admit("fourth", 0), "LIMITS__MAX_STREAMS")

	// 0: no bound per key but LIMITS__MAX_STREAMS.
	unbounded := newTestStreams(t, StreamsConfig{Max: 150, MaxPerKey: 0, MaxBytes: 1 << 20})
	admitN(t, unbounded, "default", 0, 150)
	wantRefusal(t, "past LIMITS__MAX_STREAMS with no bound per key", unbounded.admit("default", 0), "LIMITS__MAX_STREAMS")
}

// A feed keeps of its request the question only: the document, operation and canonical
// variables and extensions, whose sizes it counts; the request it computes with is the
// original's question (same key, same decoded variables).
func TestFeedQuestion(t *testing.T) {
	doc := "subscription Q($s: String) { records_count(station: $s) { count } }\n# " + strings.Repeat("x", 1000)
	// As the endpoint reads a body's variables and extensions (gqlhttp's readRequest).
	r := &gqlexec.Request{Query: doc, Operation: "Q"}
	var err error
	if r.Variables, r.Vars, err = gqlexec.CanonicalObject(json.RawMessage(`{"s": "North", "n": 1.50, "list": [1, {"b": true, "a": null}]}`)); err != nil {
		t.Fatal(err)
	}
	if r.Extensions, r.Ext, err = gqlexec.CanonicalObject(json.RawMessage(`{"trace": {"id": "abc"}}`)); err != nil {
		t.Fatal(err)
	}
	q := questionOf(r)
	if want := int64(len(doc) + len("Q") + len(r.Vars) + len(r.Ext)); q.size() != want {
		t.Errorf("size %d, want %d", q.size(), want)
	}
	again := q.request()
	if !reflect.DeepEqual(again.Variables, r.Variables) || !reflect.DeepEqual(again.Extensions, r.Extensions) {
		t.Errorf("decoded again: variables %#v extensions %#v; the request's: %#v %#v", again.Variables, again.Extensions, r.Variables, r.Extensions)
	}
	r.Live, r.Accept = true, MIMEEvents
	if again.Key("/graphql") != r.Key("/graphql") || !again.Live || again.Get {
		t.Error("the feed's request is another question than the stream's")
	}
	if got := (question{}).request(); got.Variables != nil || got.Extensions != nil {
		t.Errorf("no variables: %#v %#v", got.Variables, got.Extensions)
	}
}
