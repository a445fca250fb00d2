// The load: the questions at a fixed rate, every answer checked.

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadGen sends the mix at a fixed rate from a pool of workers; a tick that finds every worker
// busy is counted as behind (the service did not keep up).
type loadGen struct {
	svc     *service
	queries []query
	varying func() query
	truth   *truth // the loads' records_count
	rate    int
	client  *http.Client
	jobs    chan int
	wg      sync.WaitGroup
	done    chan struct{}
	once    sync.Once

	sent, failed, behind atomic.Int64
	inflight             atomic.Int64
	paused               atomic.Bool
	mu                   sync.Mutex
	first                map[string][]byte // the first answer of each question (path and body)
	cacheStatus          map[string]int64  // answers by their Cache-Status header
	latencies            map[string][]time.Duration
	errs                 map[string]int // by kind
	examples             []string
}

// followsLoads is the one question of the mix the soak's loads change (records_count of all
// records); the others' periods and stations leave the loaded records out.
const followsLoads = "records_count"

// workers bounds the requests in flight; a tick that finds them all busy is skipped and counted.
const workers = 32

func newLoad(svc *service, queries []query, varying func() query, rate int, t *truth) *loadGen {
	return &loadGen{
		truth: t, svc: svc, queries: queries, varying: varying, rate: rate, cacheStatus: map[string]int64{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}},
		jobs:   make(chan int), done: make(chan struct{}),
		first: map[string][]byte{}, latencies: map[string][]time.Duration{}, errs: map[string]int{},
	}
}

func (l *loadGen) start() {
	for range workers {
		l.wg.Go(func() {
			for i := range l.jobs {
				if i%varyingEvery == varyingEvery-1 {
					l.do(l.varying())
				} else {
					l.do(l.queries[(i-i/varyingEvery)%len(l.queries)])
				}
			}
		})
	}
	l.wg.Go(func() {
		defer close(l.jobs)
		t := time.NewTicker(time.Second / time.Duration(l.rate))
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			case <-t.C:
			}
			if l.paused.Load() {
				continue
			}
			select {
			case l.jobs <- i:
			default:
				l.behind.Add(1) // every worker busy: the load fell behind its rate
			}
		}
	})
}

// quietWait is how long after the last request (and the load's connections closed) a quiet
// sample is taken. fasthttp keeps an idle worker goroutine for 10 s and looks for such workers
// every 10 s, so after 20 s none of the load's is left; the runtime metrics are at most a second
// old.
const quietWait = 22 * time.Second

// quiet pauses the load until no request is in flight, closes the load's kept-alive
// connections (each holds a goroutine of the server's) and waits for the runtime metrics to
// catch up.
func (l *loadGen) quiet() {
	l.paused.Store(true)
	for deadline := time.Now().Add(30 * time.Second); l.inflight.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	l.client.CloseIdleConnections()
	time.Sleep(quietWait)
}

func (l *loadGen) resume() { l.paused.Store(false) }

func (l *loadGen) stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}

func (l *loadGen) fail(kind, example string) {
	l.failed.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs[kind]++
	if len(l.examples) < 10 {
		l.examples = append(l.examples, time.Now().Format("15:04:05")+" "+example)
	}
}

func (l *loadGen) do(q query) {
	l.sent.Add(1)
	l.inflight.Add(1)
	defer l.inflight.Add(-1)
	req, _ := http.NewRequest(http.MethodPost, l.svc.url+q.path, strings.NewReader(q.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", l.svc.key)
	start := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		l.fail("transport", q.name+": "+err.Error())
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil {
		l.fail("transport", q.name+": "+err.Error())
		return
	}
	if resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"errors"`)) {
		l.fail("answer", fmt.Sprintf("%s: %d %.300s", q.name, resp.StatusCode, body))
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latencies[q.name] = append(l.latencies[q.name], took)
	l.cacheStatus[resp.Header.Get("Cache-Status")]++
	key := q.path + " " + q.body
	if q.name == followsLoads {
		// The loads change it: it must be the count of the data the request may have seen.
		var r struct {
			Data struct {
				RecordsCount struct{ Count int64 } `json:"records_count"`
			}
		}
		_ = json.Unmarshal(body, &r)
		if _, ok := l.first[key]; !ok {
			l.first[key] = body
		}
		if !l.truth.countBetween(r.Data.RecordsCount.Count, start, start.Add(took)) {
			l.mu.Unlock()
			l.fail("changed", fmt.Sprintf("%s: not the count of the data before or after a load: %.300s", q.name, body))
			l.mu.Lock()
		}
		return
	}
	if f, ok := l.first[key]; !ok {
		l.first[key] = body
	} else if !bytes.Equal(f, body) {
		l.mu.Unlock()
		l.fail("changed", fmt.Sprintf("%s: the answer differs from the first one: %.300s", q.name, body))
		l.mu.Lock()
	}
}
