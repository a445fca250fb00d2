package answercache

import (
	"context"
	"sync"
	"testing"
	"time"
)

func testCache() *Cache {
	return &Cache{store: newStore(1<<20, func(int) {})}
}

var v1 = Version{epoch: 1, ok: true}

// The requests that join a question in flight get the answer it ends with, and the cache keeps
// it; a request after that finds it kept.
func TestFlightSharesItsAnswer(t *testing.T) {
	c := testCache()
	k := keyN(1)
	a, f := c.Join(context.Background(), k, v1)
	if a != nil || f == nil {
		t.Fatalf("first request: answer %v, flight %v; want a flight to compute", a, f)
	}
	var wg sync.WaitGroup
	got := make([]*Answer, 5)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, f := c.Join(context.Background(), k, v1)
			if f != nil {
				t.Error("a second flight for a question in flight")
				f.End(nil)
			}
			got[i] = a
		}()
	}
	time.Sleep(20 * time.Millisecond)
	want := answerOf(10)
	f.End(want)
	f.End(answerOf(20)) // only the first End counts
	wg.Wait()
	for i, a := range got {
		if a != want {
			t.Errorf("waiter %d: %v, want the flight's answer", i, a)
		}
	}
	if a, f := c.Join(context.Background(), k, v1); a != want || f != nil {
		t.Errorf("after the flight: %v %v; want the kept answer", a, f)
	}
}

// A flight ended without an answer (too large to keep, or failed) lets its waiters go at once
// to compute their own, while its own request goes on; a waiter whose context ends stops
// waiting.
func TestFlightLetsWaitersGo(t *testing.T) {
	c := testCache()
	k := keyN(2)
	_, f := c.Join(context.Background(), k, v1)
	done := make(chan *Answer)
	go func() {
		a, g := c.Join(context.Background(), k, v1)
		if g != nil {
			t.Error("a waiter got a flight")
		}
		done <- a
	}()
	time.Sleep(20 * time.Millisecond)
	f.End(nil)
	select {
	case a := <-done:
		if a != nil {
			t.Errorf("waiter of a flight ended without an answer: %v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter still waits after End(nil)")
	}
	// The next request computes again, in a flight of its own.
	_, f2 := c.Join(context.Background(), k, v1)
	if f2 == nil {
		t.Fatal("no flight after one ended without an answer")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	if a, g := c.Join(ctx, k, v1); a != nil || g != nil {
		t.Errorf("a waiter whose context ended: %v %v", a, g)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the waiter left %s after its context ended", d)
	}
	f2.End(nil)
	// Another version is another question.
	if _, g := c.Join(context.Background(), k, Version{epoch: 2, ok: true}); g == nil {
		t.Error("no flight for the question in a new version")
	}
}

// Without a cache (or a version) every request computes its own.
func TestFlightWithoutCache(t *testing.T) {
	var c *Cache
	if a, f := c.Join(context.Background(), keyN(3), v1); a != nil || f != nil {
		t.Errorf("nil cache: %v %v", a, f)
	}
	f := (*Flight)(nil)
	f.End(answerOf(1)) // harmless
	a, mine := c.Share(keyN(3), v1, func() *Answer { return answerOf(3) })
	if !mine || a == nil {
		t.Errorf("Share without a cache: %v %v", a, mine)
	}
}
