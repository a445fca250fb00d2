// Live answers under soak: long-lived subscriptions over GraphQL over SSE, streams opened and
// closed during the run, and the ETL's loads that give them new answers.

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// liveQuestion is one distinct question the streams follow. digest turns a next event's data
// into the comparable form of its answer ("" and an error when it is not an answer).
type liveQuestion struct {
	name   string
	body   string
	digest func(data []byte) (string, error)
	// changes is false for a question the loads leave as it is (station_resources): its
	// streams must get no answer after the first.
	changes bool
}

// liveQuestions are the streams' questions: the count of all records and of the loads'
// station, unique_counts of urgency over a period that takes in the loads' records, and
// station_resources (which the loads do not change).
func liveQuestions(station string) []liveQuestion {
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	body := func(gql string) string {
		b, _ := json.Marshal(map[string]any{"query": gql})
		return string(b)
	}
	count := func(data []byte) (string, error) {
		var r struct {
			Data struct {
				RecordsCount *struct{ Count int64 } `json:"records_count"`
			}
		}
		if err := json.Unmarshal(data, &r); err != nil || r.Data.RecordsCount == nil {
			return "", fmt.Errorf("not a records_count answer: %.300s", data)
		}
		return strconv.FormatInt(r.Data.RecordsCount.Count, 10), nil
	}
	unique := func(data []byte) (string, error) {
		var r struct {
			Data struct {
				UniqueCounts []struct {
					Value *string
					Count int64
				} `json:"unique_counts"`
			}
		}
		if err := json.Unmarshal(data, &r); err != nil || r.Data.UniqueCounts == nil {
			return "", fmt.Errorf("not a unique_counts answer: %.300s", data)
		}
		var parts []string
		for _, u := range r.Data.UniqueCounts {
			v := "NULL"
			if u.Value != nil {
				v = *u.Value
			}
			parts = append(parts, v+"="+strconv.FormatInt(u.Count, 10))
		}
		slices.Sort(parts)
		return strings.Join(parts, " "), nil
	}
	raw := func(data []byte) (string, error) {
		if !bytes.Contains(data, []byte(`"station_resources"`)) {
			return "", fmt.Errorf("not a station_resources answer: %.300s", data)
		}
		return string(data), nil
	}
	return []liveQuestion{
		{"records_count", body(`subscription { records_count { count } }`), count, true},
		{"records_count station", body(fmt.Sprintf(`subscription { records_count(station: %s) { count } }`, quote(station))), count, true},
		{"unique_counts", body(fmt.Sprintf(`subscription { unique_counts(columns: ["degree_of_urgency"], start_date: %q, end_date: %q) { column value count } }`,
			uniqueFrom, uniqueTo)), unique, true},
		{"station_resources", body(`subscription { station_resources { station_id station_name resources { resource_id } } }`), raw, false},
	}
}

// The period of the unique_counts stream: the demo data's last month and the loads' year.
const uniqueFrom, uniqueTo = "2025-12-01", "2026-12-31"

// heldStreams is how many streams of each question stay open the whole run (50 in all).
var heldStreams = []int{20, 10, 10, 10}

// truth is what the answers must be: per question, the answer of each data version the soak
// made (a load), by SQL; and, for the load's question in the mix (records_count), the count.
type truth struct {
	mu   sync.Mutex
	gens []generation
}

// generation is the data after one load (the first: as loaded).
type generation struct {
	prepared  time.Time         // before the commit: its answers may be seen from here on
	committed time.Time         // the commit returned
	answers   map[string]string // question name -> digest (no entry: unchanged, not by SQL)
}

// allowed reports whether digest is an answer of question q that a stream may be sent now:
// the current generation's, or the previous one's while the current is being committed or
// within loadBound after its commit.
func (t *truth) allowed(q, digest string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	last := t.gens[len(t.gens)-1]
	if last.answers[q] == digest {
		return true
	}
	inWindow := last.committed.IsZero() || now.Sub(last.committed) < loadBound
	return inWindow && len(t.gens) > 1 && t.gens[len(t.gens)-2].answers[q] == digest
}

// countBetween reports whether n is the count of all records of a generation whose data may
// have been seen by a request sent at sent and answered at got.
func (t *truth) countBetween(n int64, sent, got time.Time) bool {
	want := strconv.FormatInt(n, 10)
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, g := range t.gens {
		validFrom := g.prepared
		if i == 0 {
			validFrom = time.Time{}
		}
		validTo := time.Time{} // still current
		if i+1 < len(t.gens) && !t.gens[i+1].committed.IsZero() {
			validTo = t.gens[i+1].committed.Add(loadBound)
		}
		if validFrom.After(got) || (!validTo.IsZero() && validTo.Before(sent)) {
			continue
		}
		if g.answers["records_count"] == want {
			return true
		}
	}
	return false
}

// streamMetrics are the service's stream metrics the report gives.
var streamMetrics = []string{"emsquery_streams_open", "emsquery_streams_pushes_total", "emsquery_streams_recomputations_total"}

// loadBound is how soon after a load's commit (and its NOTIFY) every stream must have the new
// answer, and how long the previous answer may still be seen.
const loadBound = 5 * time.Second

// liveStream is one open subscription.
type liveStream struct {
	q       liveQuestion
	held    bool
	opened  time.Time
	cancel  context.CancelFunc
	resp    *http.Response
	closing atomic.Bool

	mu      sync.Mutex
	digest  string    // the last answer
	at      time.Time // when it came
	answers int       // next events
	first   chan struct{}
	ended   chan struct{}
}

// streams runs the live side of the soak.
type streams struct {
	svc   *service
	qs    []liveQuestion
	truth *truth
	every time.Duration // churn: a stream opened this often

	mu       sync.Mutex
	open     map[*liveStream]bool
	delays   []time.Duration // per stream and load: the new answer's delay after the commit
	errs     map[string]int
	examples []string
	service  map[string]float64 // the service's stream metrics after the run (streamMetrics)

	opened, closed, answers, comments, churning atomic.Int64
	paused                                      atomic.Bool
	done                                        chan struct{}
	wg                                          sync.WaitGroup
	once                                        sync.Once
}

func newStreams(svc *service, qs []liveQuestion, t *truth, churnEvery time.Duration) *streams {
	return &streams{svc: svc, qs: qs, truth: t, every: churnEvery, open: map[*liveStream]bool{}, errs: map[string]int{}, done: make(chan struct{})}
}

func (s *streams) fail(kind, example string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[kind]++
	if len(s.examples) < 10 {
		s.examples = append(s.examples, time.Now().Format("15:04:05")+" "+example)
	}
}

// subscribe opens a stream of q and starts reading it; it returns once the response's header
// has come (the first answer comes later: see liveStream.first).
func (s *streams) subscribe(q liveQuestion, held bool) (*liveStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.svc.url+"/graphql", strings.NewReader(q.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("x-api-key", s.svc.key)
	// A connection of its own per stream (graphql-sse's distinct connections mode).
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("HTTP %d %.300s", resp.StatusCode, body)
	}
	ls := &liveStream{q: q, held: held, opened: time.Now(), cancel: cancel, resp: resp, first: make(chan struct{}), ended: make(chan struct{})}
	s.opened.Add(1)
	s.mu.Lock()
	s.open[ls] = true
	s.mu.Unlock()
	go s.read(ls)
	return ls, nil
}

// read follows a stream's events (fields up to a blank line; a line starting with ':' a
// comment) and checks each answer.
func (s *streams) read(ls *liveStream) {
	defer close(ls.ended)
	sc := bufio.NewScanner(ls.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var name string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name != "" || len(data) > 0 {
				s.event(ls, name, strings.Join(data, "\n"))
			}
			name, data = "", nil
		case strings.HasPrefix(line, ":"):
			s.comments.Add(1)
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	ls.resp.Body.Close()
	if !ls.closing.Load() {
		err := sc.Err()
		if err == nil {
			err = io.EOF
		}
		s.fail("ended", fmt.Sprintf("%s: the stream ended after %s and %d answers: %v", ls.q.name, time.Since(ls.opened).Round(time.Second), ls.answers, err))
	}
}

func (s *streams) event(ls *liveStream, name, data string) {
	now := time.Now()
	if name != "next" {
		if !ls.closing.Load() {
			s.fail("complete", fmt.Sprintf("%s: event %q %.300s", ls.q.name, name, data))
		}
		return
	}
	s.answers.Add(1)
	if strings.Contains(data, `"errors"`) {
		s.fail("answer", fmt.Sprintf("%s: %.300s", ls.q.name, data))
		return
	}
	d, err := ls.q.digest([]byte(data))
	if err != nil {
		s.fail("answer", ls.q.name+": "+err.Error())
		return
	}
	ls.mu.Lock()
	prev, firstAnswer := ls.digest, ls.answers == 0
	ls.digest, ls.at = d, now
	ls.answers++
	ls.mu.Unlock()
	if firstAnswer {
		close(ls.first)
	}
	switch {
	case !firstAnswer && d == prev:
		s.fail("repeated", fmt.Sprintf("%s: an answer the same as the last one sent: %.200s", ls.q.name, d))
	case !ls.q.changes:
		// Not by SQL: every stream of it must have the first stream's answer, once.
		s.truth.mu.Lock()
		want, ok := s.truth.gens[0].answers[ls.q.name]
		if !ok {
			s.truth.gens[0].answers[ls.q.name] = d
			want = d
		}
		s.truth.mu.Unlock()
		if d != want || !firstAnswer {
			s.fail("wrong", fmt.Sprintf("%s: a second answer, or not the first stream's: %.200s", ls.q.name, d))
		}
	case !s.truth.allowed(ls.q.name, d, now):
		s.fail("wrong", fmt.Sprintf("%s: %.200s is not SQL's answer", ls.q.name, d))
	}
}

// close ends a stream from the client's side.
func (s *streams) close(ls *liveStream) {
	ls.closing.Store(true)
	ls.cancel()
	<-ls.ended
	s.mu.Lock()
	delete(s.open, ls)
	s.mu.Unlock()
	s.closed.Add(1)
}

// hold opens the streams held the whole run and waits for their first answers.
func (s *streams) hold() error {
	var all []*liveStream
	for i, q := range s.qs {
		for range heldStreams[i] {
			ls, err := s.subscribe(q, true)
			if err != nil {
				return fmt.Errorf("open a %s stream: %w", q.name, err)
			}
			all = append(all, ls)
		}
	}
	for _, ls := range all {
		select {
		case <-ls.first:
		case <-ls.ended:
			return fmt.Errorf("a %s stream ended before its first answer", ls.q.name)
		case <-time.After(30 * time.Second):
			return fmt.Errorf("a %s stream: no first answer within 30 s", ls.q.name)
		}
	}
	return nil
}

// startChurn opens a stream every s.every, of the questions in turn, and closes it after 5 to
// 30 s (drawn, seeded), while not paused.
func (s *streams) startChurn() {
	r := mrand.New(mrand.NewPCG(2026, 32))
	s.wg.Go(func() {
		t := time.NewTicker(s.every)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-s.done:
				return
			case <-t.C:
			}
			if s.paused.Load() {
				continue
			}
			q := s.qs[i%len(s.qs)]
			hold := 5*time.Second + time.Duration(r.Int64N(int64(25*time.Second)))
			s.churning.Add(1)
			s.wg.Go(func() {
				defer s.churning.Add(-1)
				ls, err := s.subscribe(q, false)
				if err != nil {
					s.fail("refused", q.name+": "+err.Error())
					return
				}
				if s.paused.Load() {
					s.close(ls) // opened as the churn paused
					return
				}
				timer := time.NewTimer(hold)
				defer timer.Stop()
				select {
				case <-ls.first:
				case <-ls.ended:
				case <-time.After(30 * time.Second):
					s.fail("first", q.name+": no first answer within 30 s")
				case <-s.done:
				}
				select {
				case <-timer.C:
				case <-s.done:
				case <-ls.ended:
				}
				s.close(ls)
			})
		}
	})
}

// pause stops opening streams and closes the churned ones (the held ones stay): for a quiet
// sample.
func (s *streams) pause() {
	s.paused.Store(true)
	s.mu.Lock()
	var churned []*liveStream
	for ls := range s.open {
		if !ls.held {
			churned = append(churned, ls)
		}
	}
	s.mu.Unlock()
	for _, ls := range churned {
		ls.closing.Store(true)
		ls.cancel()
	}
	for deadline := time.Now().Add(40 * time.Second); s.churning.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *streams) heldCount() int {
	n := 0
	for _, h := range heldStreams {
		n += h
	}
	return n
}

func (s *streams) resume() { s.paused.Store(false) }

// stop ends the churn, and then closes every stream left.
func (s *streams) stop() {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
	s.mu.Lock()
	left := make([]*liveStream, 0, len(s.open))
	for ls := range s.open {
		left = append(left, ls)
	}
	s.mu.Unlock()
	for _, ls := range left {
		s.close(ls)
	}
}

// waitFor checks, after a load committed at committed, that every stream open then (and not
// closed by the soak since) has the load's answer within loadBound, and records each delay.
func (s *streams) waitFor(g generation) {
	s.mu.Lock()
	var check []*liveStream
	for ls := range s.open {
		if ls.q.changes {
			check = append(check, ls)
		}
	}
	s.mu.Unlock()
	deadline := g.committed.Add(loadBound)
	for len(check) > 0 {
		left := check[:0]
		for _, ls := range check {
			ls.mu.Lock()
			d, at := ls.digest, ls.at
			ls.mu.Unlock()
			switch {
			case ls.closing.Load():
			case d == g.answers[ls.q.name]:
				s.mu.Lock()
				s.delays = append(s.delays, max(at.Sub(g.committed), 0))
				s.mu.Unlock()
			default:
				left = append(left, ls)
			}
		}
		check = left
		if len(check) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, ls := range check {
				ls.mu.Lock()
				d := ls.digest
				ls.mu.Unlock()
				s.fail("late", fmt.Sprintf("%s: not SQL's answer %.100s %s after the load's commit (has %.100s)", ls.q.name, g.answers[ls.q.name], loadBound, d))
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// problems is the streams' problems, as the report lists them.
func (s *streams) problems() ([]string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p []string
	for kind, n := range s.errs {
		p = append(p, fmt.Sprintf("%d stream %s errors", n, kind))
	}
	slices.Sort(p)
	return p, slices.Clone(s.examples)
}
