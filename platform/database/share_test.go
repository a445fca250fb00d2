package database

// The pool's sharing (share.go): the fair gate on its own, and the request limit and the bounded
// collect on a real PostgreSQL.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/platform/requestctx"
)

// enterAsync starts g.enter(ctx, key) and returns a channel that receives its error when it
// returns.
func enterAsync(ctx context.Context, g *fairGate, key string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- g.enter(ctx, key) }()
	return ch
}

// waitQueued waits until g has n waiters.
func waitQueued(t *testing.T, g *fairGate, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		w := g.waiting
		g.mu.Unlock()
		if w == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want %d", w, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func granted(ch <-chan error) bool {
	select {
	case err := <-ch:
		return err == nil
	case <-time.After(50 * time.Millisecond):
		return false
	}
}

// One key's queue does not stand in front of another key's request: with key a holding both
// places and five more of a waiting, b, arriving last, gets the next free place (a still holds
// one, b none); then a's queue goes on in order.
func TestFairGateNextPlaceToTheKeyHoldingFewest(t *testing.T) {
	g := newFairGate(2)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := g.enter(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	var as []<-chan error
	for i := 0; i < 5; i++ {
		as = append(as, enterAsync(ctx, g, "a"))
		waitQueued(t, g, i+1)
	}
	b := enterAsync(ctx, g, "b")
	waitQueued(t, g, 6)
	g.leave("a")
	if !granted(b) {
		t.Fatal("b did not get the place a gave back")
	}
	for _, a := range as {
		if granted(a) {
			t.Fatal("a's queue got a place while b held it")
		}
	}
	g.leave("b")
	// a's waiters, first come first served: exactly one holds the place at a time.
	for i := range as {
		select {
		case err := <-as[i]:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Second):
			t.Fatalf("a's waiter %d did not get the place", i)
		}
		g.leave("a")
	}
	g.leave("a")
	if g.inUse != 0 || len(g.held) != 0 || g.waiting != 0 || len(g.queues) != 0 {
		t.Errorf("gate not empty: inUse %d held %v waiting %d", g.inUse, g.held, g.waiting)
	}
}

// Of two waiting keys holding as many, the one whose first waiter came first goes first; the
// anonymous key ("") is a key like the others.
func TestFairGateTieGoesToTheLongestWaiting(t *testing.T) {
	g := newFairGate(2)
	ctx := context.Background()
	_ = g.enter(ctx, "a")
	_ = g.enter(ctx, "")
	first := enterAsync(ctx, g, "")
	waitQueued(t, g, 1)
	second := enterAsync(ctx, g, "a")
	waitQueued(t, g, 2)
	g.leave("a") // a holds 0, "" holds 1: a's waiter goes first although it came later
	if !granted(second) || granted(first) {
		t.Fatal("the key holding fewer did not go first")
	}
	g.leave("a")
	if !granted(first) {
		t.Fatal("the anonymous key's waiter did not get the free place")
	}
}

// A waiter that gives up leaves the queue; one granted as it gave up hands the place on.
func TestFairGateCancelledWaiter(t *testing.T) {
	g := newFairGate(1)
	_ = g.enter(context.Background(), "a")
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := enterAsync(ctx, g, "b")
	waitQueued(t, g, 1)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("enter = %v, want context.Canceled", err)
	}
	waitQueued(t, g, 0)
	next := enterAsync(context.Background(), g, "c")
	waitQueued(t, g, 1)
	g.leave("a")
	if !granted(next) {
		t.Fatal("the place did not go on after a waiter gave up")
	}

	// Granted and cancelled at once: the place is not lost.
	g2 := newFairGate(1)
	_ = g2.enter(context.Background(), "a")
	for i := 0; i < 100; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		ch := enterAsync(ctx, g2, "b")
		waitQueued(t, g2, 1)
		go cancel()
		g2.leave("a")
		if err := <-ch; err == nil {
			g2.leave("b")
		}
		_ = g2.enter(context.Background(), "a")
	}
	g2.leave("a")
	if g2.inUse != 0 || g2.waiting != 0 {
		t.Errorf("places lost: inUse %d, waiting %d", g2.inUse, g2.waiting)
	}
}

// The statements of one context under WithRequestLimit(ctx, 2) hold at most 2 connections at
// once, whichever helper runs them (rows read one by one, raw rows as the whole-table lists
// stream them, one row), while the pool has more; statements of another request are not held up
// by them.
func TestRequestLimitBoundsConnections(t *testing.T) {
	t.Parallel()
	cfg, _, _ := clusterConfig(t)
	cfg.Database.PoolSize, cfg.Database.MaxOverflow = 6, 0
	db, _ := open(t, cfg)
	ctx := WithRequestLimit(requestctx.WithKeyName(context.Background(), "k"), 2)

	var holding, most atomic.Int32
	hold := func() {
		n := holding.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(60 * time.Millisecond)
		holding.Add(-1)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 9)
	for i := 0; i < 3; i++ {
		wg.Add(3)
		go func() {
			defer wg.Done()
			var one int
			errs <- db.ForEachRow(ctx, "t", "SELECT 1", nil, []any{&one}, func() error { hold(); return nil })
		}()
		go func() {
			defer wg.Done()
			_, err := db.ForEachRawRow(ctx, "t", "SELECT 1", nil, []int16{pgx.TextFormatCode}, func([][]byte) bool { hold(); return true })
			errs <- err
		}()
		go func() {
			defer wg.Done()
			var slept string
			errs <- db.QueryRow(ctx, "t", "SELECT pg_sleep(0.06)::text", nil, &slept)
		}()
	}
	// Another request meanwhile: its own slots, not the first one's.
	other := WithRequestLimit(context.Background(), 1)
	start := time.Now()
	var one int
	if err := db.QueryRow(other, "t", "SELECT 1", nil, &one); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("another request waited %s", d)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d statements of the request held connections at once, want at most 2", m)
	}
	if db.gate.inUse != 0 {
		t.Errorf("%d gate places still held", db.gate.inUse)
	}
}

// The wait for the request's own slot ends with the request (its deadline), not with
// DATABASE__POOL_TIMEOUT, and gives nothing away.
func TestRequestLimitWaitEndsWithTheRequest(t *testing.T) {
	t.Parallel()
	cfg, _, _ := clusterConfig(t)
	cfg.Database.PoolSize, cfg.Database.PoolTimeout = 2, 100*time.Millisecond
	db, _ := open(t, cfg)
	ctx, cancel := context.WithTimeout(WithRequestLimit(context.Background(), 1), 2*time.Second)
	defer cancel()
	// A connection ready first: on a loaded machine, opening one can take longer than the
	// 100 ms pool timeout set here, and the test is of the wait for the request's slot.
	// A connection whose opening outlasts one try goes on opening in the pool, so tries
	// again until one is ready (or 10 s have passed).
	var warm int
	for try := 0; ; try++ {
		err := db.QueryRow(context.Background(), "t", "SELECT 1", nil, &warm)
		if err == nil {
			break
		}
		if try == 100 {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	release, holding := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var one int
		done <- db.ForEachRow(ctx, "t", "SELECT 1", nil, []any{&one}, func() error { close(holding); <-release; return nil })
	}()
	// The first statement holds the request's one slot (it is reading its row) before the
	// second asks: on a loaded machine a fixed sleep let the second go first.
	select {
	case <-holding:
	case err := <-done:
		t.Fatalf("the first statement ended before it held the slot: %v", err)
	}
	second := make(chan error, 1)
	go func() {
		var one int
		second <- db.QueryRow(ctx, "t", "SELECT 1", nil, &one)
	}()
	time.Sleep(400 * time.Millisecond) // past DATABASE__POOL_TIMEOUT: still waiting its turn
	select {
	case err := <-second:
		t.Fatalf("the second statement ended while the first held the request's slot: %v", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatalf("the second statement after its turn came: %v", err)
	}
}

// CollectAtMost reads at most max rows: one more is the caller's error, as it is.
func TestCollectAtMost(t *testing.T) {
	t.Parallel()
	cfg, _, _ := clusterConfig(t)
	db, _ := open(t, cfg)
	ctx := context.Background()
	tooMany := errors.New("too many")
	got, err := CollectAtMost(ctx, db, "t", "SELECT generate_series(1, 100)", nil, 100, tooMany, pgx.RowTo[int32])
	if err != nil || len(got) != 100 || got[99] != 100 {
		t.Fatalf("100 rows at most 100: %d rows, %v", len(got), err)
	}
	if cap(got) > 100 {
		t.Errorf("room for %d rows, more than the 100 allowed", cap(got))
	}
	got, err = CollectAtMost(ctx, db, "t", "SELECT generate_series(1, 100000)", nil, 100, tooMany, pgx.RowTo[int32])
	if !errors.Is(err, tooMany) || got != nil {
		t.Fatalf("100,000 rows at most 100: %d rows, %v; want the caller's error", len(got), err)
	}
	if _, err = CollectAtMost(ctx, db, "t", "SELECT generate_series(1, 101)", nil, 100, nil, pgx.RowTo[int32]); !errors.Is(err, ErrTooManyRows) {
		t.Fatalf("101 rows at most 100: %v, want ErrTooManyRows", err)
	}
	// The connection is fine afterwards.
	var one int
	if err := db.QueryRow(ctx, "t", "SELECT 1", nil, &one); err != nil || one != 1 {
		t.Fatalf("after: %v", err)
	}
}
