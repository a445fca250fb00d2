package logging

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// recordingWriter keeps every write, as a file would, and how large each was; while gate is
// set, a write waits for it to close.
type recordingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes []int
	delay  time.Duration
	gate   chan struct{}
	gated  chan struct{} // closed when a write first waits for gate
	once   sync.Once
}

func (r *recordingWriter) Write(p []byte) (int, error) {
	time.Sleep(r.delay)
	if r.gate != nil {
		r.once.Do(func() { close(r.gated) })
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, len(p))
	return r.buf.Write(p)
}

func (r *recordingWriter) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// queuedLogger logs through a queue of maxQueue records into out, as plain "msg" lines of
// slog's text handler without time and level.
func queuedLogger(out *recordingWriter, maxBatch, maxQueue int) (*slog.Logger, *recordQueue) {
	o := newOutput(out, maxBatch)
	q := newRecordQueue([]*output{o}, maxQueue)
	h := slog.NewTextHandler(o, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
			return slog.Attr{}
		}
		return a
	}})
	return slog.New(queuedHandler{q, h}), q
}

// Every record arrives, each logger's in its order, whole, in writes no larger than the batch;
// Close returns only once all are written, and records after it still arrive.
func TestQueueLosesNoRecord(t *testing.T) {
	out := &recordingWriter{delay: 50 * time.Microsecond}
	const batch = 4096
	log, q := queuedLogger(out, batch, maxQueued)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			wl := log.With("writer", g)
			for i := range lines {
				wl.Info("line", "i", i, "pad", "p"+strings.Repeat("x", i%300))
			}
		})
	}
	wg.Wait()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	log.Info("after close")
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines+1 || got[len(got)-1] != "msg=\"after close\"" {
		t.Fatalf("%d lines written, want %d and the line after Close last (%q)", len(got), writers*lines+1, got[len(got)-1])
	}
	next := make([]int, writers)
	for _, l := range got[:len(got)-1] {
		var g, i int
		if _, err := fmt.Sscanf(l, "msg=line writer=%d i=%d", &g, &i); err != nil {
			t.Fatalf("a line cut or mixed: %q", l)
		}
		if i != next[g] || !strings.HasSuffix(l, " pad=p"+strings.Repeat("x", i%300)) {
			t.Fatalf("writer %d: line %d where %d was due, or cut: %q", g, i, next[g], l)
		}
		next[g]++
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	for _, n := range out.writes {
		if n > batch {
			t.Errorf("a write of %d bytes, more than the batch of %d", n, batch)
		}
	}
	if len(out.writes) >= writers*lines/10 {
		t.Errorf("%d writes for %d lines: too little was gathered", len(out.writes), writers*lines)
	}
}

// Records logged one after the other keep that order whatever handler (attributes, groups)
// formats each, and a record changed by its caller after Handle is written as it was logged.
func TestQueueKeepsOrderAcrossHandlers(t *testing.T) {
	out := &recordingWriter{}
	log, q := queuedLogger(out, 0, maxQueued)
	a, b := log.With("h", "a"), log.WithGroup("g").With("h", "b")
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "own", 0)
	r.AddAttrs(slog.Int("n", 1))
	for i := range 3 {
		a.Info("m", "i", i)
		b.Info("m", "i", i)
	}
	_ = log.Handler().Handle(t.Context(), r)
	r.AddAttrs(slog.Int("added", 2)) // after Handle: not in the line
	log.Info("last")
	_ = q.Close()
	want := "msg=m h=a i=0\nmsg=m g.h=b g.i=0\nmsg=m h=a i=1\nmsg=m g.h=b g.i=1\nmsg=m h=a i=2\nmsg=m g.h=b g.i=2\nmsg=own n=1\nmsg=last\n"
	if got := out.String(); got != want {
		t.Fatalf("written:\n%s\nwant:\n%s", got, want)
	}
}

// A record reaches the output soon without Close.
func TestQueueFlushesByItself(t *testing.T) {
	out := &recordingWriter{}
	log, q := queuedLogger(out, 0, maxQueued)
	defer q.Close()
	log.Info("one")
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "msg=one\n" {
		if time.Now().After(deadline) {
			t.Fatalf("the line was not written without Close: %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// While the output does not take writes, at most maxQueue records wait besides the batch being
// written: the loggers past that wait, and every record arrives once the output takes writes
// again.
func TestQueueBoundsWaitingRecords(t *testing.T) {
	out := &recordingWriter{gate: make(chan struct{}), gated: make(chan struct{})}
	const maxQueue = 10
	log, q := queuedLogger(out, 0, maxQueue)
	var (
		logged  sync.WaitGroup
		entered atomic.Int64
	)
	const loggers, each = 4, 50
	for g := range loggers {
		logged.Go(func() {
			for i := range each {
				log.Info("r", "g", g, "i", i)
				entered.Add(1)
			}
		})
	}
	// The formatter takes a batch and blocks writing it; the loggers fill the queue behind it,
	// then wait.
	select {
	case <-out.gated:
	case <-time.After(5 * time.Second):
		t.Fatal("no write reached the output")
	}
	time.Sleep(50 * time.Millisecond)
	q.mu.Lock()
	n := len(q.pending)
	q.mu.Unlock()
	if n > maxQueue {
		t.Fatalf("%d records waiting, more than %d", n, maxQueue)
	}
	if e := entered.Load(); e > 2*maxQueue {
		t.Fatalf("%d records taken while the output is stuck, more than the batch and the queue (%d)", e, 2*maxQueue)
	}
	close(out.gate)
	logged.Wait()
	_ = q.Close()
	if got := strings.Count(out.String(), "\n"); got != loggers*each {
		t.Fatalf("%d lines written, want %d", got, loggers*each)
	}
}

// A record is written as it was when logged, although the bytes its strings viewed were reused
// since (as Fiber's request values are once the request is answered), and a LogValuer is
// resolved when the record is logged.
func TestQueueOwnsTheRecordsStrings(t *testing.T) {
	out := &recordingWriter{}
	log, q := queuedLogger(out, 0, maxQueued)
	buf := []byte("request-one")
	view := unsafe.String(unsafe.SliceData(buf), len(buf))
	key := []byte("key")
	keyView := unsafe.String(unsafe.SliceData(key), len(key))
	counter := &countingValuer{}
	log.Info("seen", "id", view, keyView, 1, slog.Group("g", "inner", view, "v", counter))
	copy(buf, "XXXXXXXXXXX")
	copy(key, "QQQ")
	counter.n = 99
	_ = q.Close()
	if got, want := out.String(), "msg=seen id=request-one key=1 g.inner=request-one g.v=1\n"; got != want {
		t.Fatalf("written %q, want %q", got, want)
	}
}

// countingValuer's value is how often it was resolved, unless set.
type countingValuer struct{ n int }

func (c *countingValuer) LogValue() slog.Value {
	c.n++
	return slog.IntValue(c.n)
}
