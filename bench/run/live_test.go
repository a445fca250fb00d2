package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

type ev struct{ name, data string }

func readAll(t *testing.T, s string) []ev {
	t.Helper()
	var got []ev
	if err := readSSE(strings.NewReader(s), func(name, data string) bool {
		got = append(got, ev{name, data})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestReadSSE(t *testing.T) {
	stream := ":\n\n" + // a heartbeat: no event
		"event: next\ndata: {\"data\":{\"records_count\":{\"count\":5}}}\n\n" +
		": a comment between fields\n" +
		"event: next\r\ndata:{\"a\":1}\r\ndata:  two spaces\r\n\r\n" + // CRLF, no space, two data lines
		"id: 7\nretry: 10\n\n" + // fields other than event and data: an event with empty data
		"event: complete\ndata:\n\n" +
		"event: next\ndata: cut short" // no blank line at the end: dropped
	want := []ev{
		{"next", `{"data":{"records_count":{"count":5}}}`},
		{"next", "{\"a\":1}\n two spaces"},
		{"complete", ""},
	}
	if got := readAll(t, stream); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}

	// Read a byte at a time: events do not depend on how the body arrives.
	var got []ev
	if err := readSSE(iotest.OneByteReader(strings.NewReader(stream)), func(name, data string) bool {
		got = append(got, ev{name, data})
		return true
	}); err != nil || !slices.Equal(got, want) {
		t.Errorf("one byte at a time: %v, got %q", err, got)
	}

	// false stops the reading.
	n := 0
	_ = readSSE(strings.NewReader(stream), func(string, string) bool { n++; return false })
	if n != 1 {
		t.Errorf("%d events after false, want 1", n)
	}

	// A failed read is returned.
	boom := errors.New("boom")
	if err := readSSE(iotest.ErrReader(boom), func(string, string) bool { return true }); !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
}

func TestCountOf(t *testing.T) {
	for _, c := range []struct {
		data string
		n    int64
		ok   bool
	}{
		{`{"data":{"records_count":{"count":100000}}}`, 100000, true},
		{`{"data":{"records_count":{"count":0}}}`, 0, true},
		{`{"errors":[{"message":"x"}]}`, 0, false},
		{`{"data":{"records_count":{"count":"7"}}}`, 0, false},
		{``, 0, false},
	} {
		if n, ok := countOf(c.data); n != c.n || ok != c.ok {
			t.Errorf("countOf(%s) = %d, %v; want %d, %v", c.data, n, ok, c.n, c.ok)
		}
	}
}

func TestPromSum(t *testing.T) {
	text := `# HELP db_client_operation_duration_seconds Duration.
# TYPE db_client_operation_duration_seconds histogram
db_client_operation_duration_seconds_bucket{db_operation_name="records count",le="0.005"} 3
db_client_operation_duration_seconds_count{db_operation_name="records count",db_system_name="postgresql",otel_scope_name="x"} 4
db_client_operation_duration_seconds_count{db_operation_name="records count, old",otel_scope_name="x"} 100
db_client_operation_duration_seconds_count{db_system_name="postgresql",db_operation_name="data version"} 9
db_client_operation_duration_seconds_sum{db_operation_name="records count"} 0.25
emsquery_streams_recomputations_total{http_route="/graphql",otel_scope_name="x"} 3
emsquery_streams_recomputations_total{http_route="/serve/graphql",otel_scope_name="x"} 2
emsquery_streams_recomputations_total_extra 50
emsquery_streams_open 1000
`
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
		found  bool
	}{
		{"db_client_operation_duration_seconds_count", []string{`db_operation_name="records count"`}, 4, true},
		{"db_client_operation_duration_seconds_count", []string{`db_operation_name="data version"`}, 9, true},
		{"db_client_operation_duration_seconds_count", nil, 113, true},
		{"emsquery_streams_recomputations_total", nil, 5, true},
		{"emsquery_streams_recomputations_total", []string{`http_route="/graphql"`}, 3, true},
		{"emsquery_streams_open", nil, 1000, true},
		{"emsquery_streams_pushes_total", nil, 0, false},
	} {
		got, found := promSum(text, c.name, c.labels...)
		if got != c.want || found != c.found {
			t.Errorf("promSum(%s, %v) = %v, %v; want %v, %v", c.name, c.labels, got, found, c.want, c.found)
		}
	}
}

func TestSummarizeAndWorst(t *testing.T) {
	var lat []time.Duration
	for i := 1000; i >= 1; i-- { // 1..1000 ms, out of order
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	s := summarize(lat)
	if s.N != 1000 || s.Min != time.Millisecond || s.Max != time.Second || s.P50 != 500*time.Millisecond || s.P99 != 990*time.Millisecond {
		t.Errorf("summarize: %+v", s)
	}
	if lat[0] != time.Second {
		t.Error("summarize sorted its argument")
	}
	if z := summarize(nil); z != (latencies{}) {
		t.Errorf("summarize(nil) = %+v", z)
	}
	w := worst([]liveRound{
		{Lat: latencies{N: 10, Max: 30, P50: 5, P99: 29}},
		{Lat: latencies{N: 10, Max: 20, P50: 9, P99: 19}},
	})
	if w != (latencies{N: 10, Min: 0, Max: 30, P50: 9, P99: 29}) {
		t.Errorf("worst: %+v", w)
	}
}

func TestLiveTargets(t *testing.T) {
	round := func(got int, max time.Duration, recomputations float64) liveRound {
		return liveRound{Got: got, Lat: latencies{N: 1000, Max: max, P50: max / 2, P99: max}, Recomputations: recomputations, Statements: recomputations, Pushes: 1000}
	}
	ok := liveResult{Scenario: liveScenario{Questions: 1, Streams: 1000}, RSSBefore: 30 << 20, RSSOpen: 70 << 20, PeakRSS: 75 << 20,
		Rounds: []liveRound{round(1000, 80*time.Millisecond, 1), round(1000, 90*time.Millisecond, 1)}}
	for _, tg := range ok.targets() {
		if !tg.Met || tg.None {
			t.Errorf("want met: %+v", tg)
		}
	}
	if got := ok.targets()[2].Measured; !strings.Contains(got, "41 KiB per stream") {
		t.Errorf("per stream: %s", got)
	}

	bad := ok
	bad.Rounds = []liveRound{round(1000, 80*time.Millisecond, 1), round(999, 1100*time.Millisecond, 2)}
	bad.PeakRSS = 150 << 20
	for i, tg := range bad.targets() {
		if tg.Met {
			t.Errorf("target %d: want missed: %+v", i, tg)
		}
	}

	many := ok
	many.Scenario.Questions = 100
	many.Rounds = []liveRound{round(1000, 80*time.Millisecond, 100)}
	tgs := many.targets()
	if !tgs[0].Met || !tgs[1].Met || !tgs[2].None {
		t.Errorf("100 questions: %+v", tgs)
	}
	many.Rounds = []liveRound{round(1000, 80*time.Millisecond, 101)}
	if many.targets()[1].Met {
		t.Error("101 recomputations for 100 questions met the target")
	}
}
