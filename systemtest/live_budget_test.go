package systemtest

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/procstat"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// What a live stream may hold (contract 6.10): its request counts in the budget of the live
// answers (CACHE__MAX_BYTES), and a key without max_streams holds at most
// LIMITS__MAX_STREAMS_PER_KEY streams.

// paddedCount is liveCount with a comment of pad bytes, tagged so that each tag is a question of
// its own (a feed of its own).
func paddedCount(tag string, pad int) string {
	return liveCount + "\n# " + tag + " " + strings.Repeat("x", pad) + "\n"
}

// wantStreamRefused checks a 429 RATE_LIMITED refusal with a Retry-After whose message names
// setting.
func wantStreamRefused(t *testing.T, what string, s *sseStream, body []byte, setting string) {
	t.Helper()
	if s.resp.StatusCode != http.StatusTooManyRequests || errorCode(t, body, true) != "RATE_LIMITED" || !strings.Contains(string(body), setting) {
		t.Errorf("%s: HTTP %d %s; want 429 RATE_LIMITED naming %s", what, s.resp.StatusCode, body, setting)
	}
	if s.resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s: no Retry-After", what)
	}
}

// TestLiveStreamsPerKey: the single AUTHENTICATION__API_KEY, which has no max_streams, holds at
// most LIMITS__MAX_STREAMS_PER_KEY (its default, 100) streams: its 101st gets 429 RATE_LIMITED
// with Retry-After, while a keys-file key without max_streams still gets a stream, and one of
// the first key's streams closed frees its place.
func TestLiveStreamsPerKey(t *testing.T) {
	t.Parallel()
	const perKey = 100 // LIMITS__MAX_STREAMS_PER_KEY's default
	db := servicetest.FixtureDB(t)
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	board := newTestKey("board", "graphql")
	writeKeysFile(t, keysFile, board)
	svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEYS_FILE": keysFile})
	waitCacheLive(t, svc)

	streams := make([]*sseStream, 0, perKey)
	for i := range perKey {
		s, body := subscribe(t, svc, "/graphql", liveCount, svc.Key)
		if body != nil {
			t.Fatalf("the single key's stream %d: HTTP %d %s", i+1, s.resp.StatusCode, body)
		}
		streams = append(streams, s)
	}
	s, body := subscribe(t, svc, "/graphql", liveCount, svc.Key)
	wantStreamRefused(t, "the single key's 101st stream", s, body, "LIMITS__MAX_STREAMS_PER_KEY")

	// Another key is not held back by the first one's streams.
	other, ev := open(t, svc, "/graphql", liveCount, board.secret)
	if got, want := liveCountOf(t, ev), sqlCount(t, db); got != want {
		t.Errorf("the other key's stream: %d, SQL says %d", got, want)
	}
	// The first key's streams are all served.
	for i, s := range streams {
		if ev, _, ok := s.next(10 * time.Second); !ok || ev.name != "next" {
			t.Fatalf("the single key's stream %d: no first answer (%v %q)", i+1, ok, ev.name)
		}
	}

	// One closed, its place is the key's again.
	streams[0].close()
	servicetest.WaitFor(t, 5*time.Second, "a place for the single key after one of its streams closed", func() bool {
		s, body := subscribe(t, svc, "/graphql", liveCount, svc.Key)
		if body == nil {
			streams[0] = s
		}
		return body == nil
	})
	s, body = subscribe(t, svc, "/graphql", liveCount, svc.Key)
	wantStreamRefused(t, "the single key's 101st stream again", s, body, "LIMITS__MAX_STREAMS_PER_KEY")
	if _, ok := other.endedWithin(100 * time.Millisecond); ok {
		t.Error("the other key's stream ended")
	}
}

// TestLiveRequestInBudget: a stream's request counts in CACHE__MAX_BYTES (the live answers'
// budget) for as long as the stream lives. With 1,000,000 bytes, three streams whose requests
// carry 256 KiB each (two in the document's comments, one in a variable the operation does not
// use) fit; a fourth is refused with 429 RATE_LIMITED and Retry-After while a small stream is
// still let in beside them, and the others keep getting answers; one of them closed, the
// fourth fits.
func TestLiveRequestInBudget(t *testing.T) {
	t.Parallel()
	const pad = 256 << 10
	db := servicetest.FixtureDB(t)
	pool := db.Pool(t)
	svc := servicetest.Start(t, db, map[string]string{
		"CACHE__MAX_BYTES":     "1000000",
		"CACHE__MAX_STALENESS": "3600",
	})
	waitCacheLive(t, svc)

	first, _ := open(t, svc, "/graphql", paddedCount("first", pad), svc.Key)
	second, _ := open(t, svc, "/graphql", paddedCount("second", pad), svc.Key)
	withVariable, _ := json.Marshal(map[string]any{"query": liveCount, "variables": map[string]any{"pad": strings.Repeat("y", pad)}})
	third, body := subscribeBody(t, svc, "/graphql", withVariable, svc.Key)
	if body != nil {
		t.Fatalf("a stream with a 256 KiB variable: HTTP %d %s", third.resp.StatusCode, body)
	}
	if ev, _, ok := third.next(10 * time.Second); !ok || ev.name != "next" {
		t.Fatalf("the stream with a 256 KiB variable: no first answer (%v %q %s)", ok, ev.name, ev.data)
	}

	fourth, body := subscribe(t, svc, "/graphql", paddedCount("fourth", pad), svc.Key)
	wantStreamRefused(t, "a fourth stream of 256 KiB past CACHE__MAX_BYTES", fourth, body, "CACHE__MAX_BYTES")
	small, ev := open(t, svc, "/graphql", liveCount, svc.Key)
	before := liveCountOf(t, ev)

	// The streams let in are served as before: a change reaches each.
	if _, err := pool.Exec(context.Background(), `INSERT INTO fact_record (record_id, occurred_at, station_id, station) VALUES (940001, '2024-03-10 12:00', 2, 'North Harbour')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `NOTIFY emsquery_refresh`); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*sseStream{first, second, third, small} {
		ev, _, ok := s.next(10 * time.Second)
		if !ok {
			t.Fatalf("stream %d: no answer after the change", i+1)
		}
		if got := liveCountOf(t, ev); got != before+1 {
			t.Errorf("stream %d after the change: %d, want %d", i+1, got, before+1)
		}
	}

	// The first one's request leaves the budget with it.
	first.close()
	servicetest.WaitFor(t, 5*time.Second, "room for the fourth stream after the first closed", func() bool {
		s, body := subscribe(t, svc, "/graphql", paddedCount("fourth", pad), svc.Key)
		if body == nil {
			fourth = s
		}
		return body == nil
	})
	if ev, _, ok := fourth.next(10 * time.Second); !ok || liveCountOf(t, ev) != before+1 {
		t.Errorf("the fourth stream let in: %v %s", ok, ev.data)
	}
}

// TestLiveMemoryPerLargeStream measures what a stream whose document carries 256 KiB costs the
// service's resident memory: 300 such streams (each its own question) against 300 streams of
// small documents, their difference divided by 300, logged for docs/operations.md. What a
// stream keeps of its request is one copy of the question (its feed's); the request body is
// given back when the stream starts. Resident memory is about twice that, the Go collector's
// headroom (GOGC=100: the heap grows to twice what is live before a collection, and keeps the
// pages); before, the body and the feed's request were both kept, 1,052 KiB a stream.
func TestLiveMemoryPerLargeStream(t *testing.T) {
	const (
		streams = 300
		pad     = 256 << 10
	)
	ensureFileLimit(t, 4096)
	db := servicetest.FixtureDB(t)
	svc := servicetest.Start(t, db, map[string]string{
		// Room for every stream here: 300 requests of 256 KiB are 75 MiB.
		"CACHE__MAX_BYTES":                "268435456",
		"LIMITS__MAX_STREAMS_PER_KEY":     "0",
		"APP__MAX_CONNECTIONS_PER_CLIENT": "0",
		"CACHE__MAX_STALENESS":            "3600",
	})
	waitCacheLive(t, svc)
	// A large stream first, so that what the first one ever costs (code paged in, pools made)
	// is not counted.
	warm, _ := open(t, svc, "/graphql", paddedCount("warm", pad), svc.Key)
	warm.close()

	rss := func() int64 {
		time.Sleep(2 * time.Second) // the last requests' work done, their buffers given back
		n, err := procstat.RSS(svc.PID())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	openAll := func(kind string, query func(i int) string) {
		all := make([]*sseStream, streams)
		for i := range all {
			s, body := subscribe(t, svc, "/graphql", query(i), svc.Key)
			if body != nil {
				t.Fatalf("%s stream %d: HTTP %d %s", kind, i+1, s.resp.StatusCode, body)
			}
			all[i] = s
		}
		for i, s := range all {
			if ev, _, ok := s.next(30 * time.Second); !ok || ev.name != "next" || strings.Contains(ev.data, `"errors"`) {
				t.Fatalf("%s stream %d: no first answer (%v %q %.200s)", kind, i+1, ok, ev.name, ev.data)
			}
		}
	}
	start := rss()
	openAll("small", func(i int) string { return paddedCount(strconv.Itoa(i), 0) })
	small := rss()
	openAll("large", func(i int) string { return paddedCount(strconv.Itoa(i), pad) })
	large := rss()

	perSmall := float64(small-start) / streams / 1024
	perLarge := float64(large-small) / streams / 1024
	t.Logf("RSS per stream: %.0f KiB with a small document, %.0f KiB with a document of %d KiB (service RSS %.1f MB -> %.1f MB -> %.1f MB)",
		perSmall, perLarge, pad>>10, float64(start)/1e6, float64(small)/1e6, float64(large)/1e6)
	// One copy of the document, the collector's headroom on it, and its connection (the small
	// streams' figure) stay under three times the document; the body's buffer (twice the
	// document, for fasthttp rounds it up to a power of two) kept as well would not.
	if limit := 3.0 * pad / 1024; perLarge > limit {
		t.Errorf("a stream with a %d KiB document costs %.0f KiB of RSS, want at most %.0f", pad>>10, perLarge, limit)
	}
}
