package logging

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// recordQueue takes log records off the callers' path. A caller's Handle only copies the record
// into the queue; a goroutine of the queue's own formats what gathered, every flushDelay, through
// the handlers (JSON, text) into the outputs' buffers, and writes each buffer in as few writes as
// the output allows. Formatting an access line (slog's JSON handler, several microseconds) and
// writing it (a system call) each cost a light request a measurable share of its time.
//
// Records keep their order: one goroutine formats them all, in the order they came. No record
// is dropped: a caller waits while maxQueued records are still waiting, and Close formats and
// writes everything before it returns; records after Close are formatted and written at once.
// A process that dies without Close (SIGKILL) loses at most the records of the last flushDelay.
//
// A record is formatted after Handle returns, when the strings it holds may have been reused:
// Fiber's request values are views of fasthttp's buffers, valid only until the request is
// answered. So add copies the record's message, keys and strings into one allocation of its own
// and resolves its LogValuers first (owned). A value of another kind (an error, a duration) is
// kept as it is, and must not change once logged: the service logs no mutable value.
type recordQueue struct {
	outs     []*output
	maxQueue int

	mu      sync.Mutex
	room    sync.Cond // signalled when pending is taken
	pending []queued
	spare   []queued
	closed  bool
	kick    chan struct{} // a record is pending (capacity 1); closed by Close
	done    chan struct{} // the formatter has written everything and stopped

	fmu sync.Mutex // held while records are formatted into outs and written
}

// queued is a record and the handler (with its attributes and groups) that formats it.
type queued struct {
	h slog.Handler
	r slog.Record
}

const (
	// flushDelay lets records gather before they are formatted and written; it bounds how late
	// a line reaches its file. Each write costs more than its bytes: a write to a file blocks
	// long enough for Go's runtime to hand the writer's processor to another thread, and its
	// monitor thread then polls every 20 µs for a while (perf shows that thread's sleeps among
	// the service's top costs). At 5 ms (up to 200 writes a second), a light request cost about
	// 20 µs more processor time than at 100 ms, on two shared cores.
	flushDelay = 100 * time.Millisecond
	// maxQueued bounds the records waiting (a few hundred bytes each, with their values).
	maxQueued = 16384
	// defaultBatch is the largest single write.
	defaultBatch = 256 << 10
)

// newRecordQueue starts the formatter of the handlers that write into outs.
func newRecordQueue(outs []*output, maxQueue int) *recordQueue {
	q := &recordQueue{outs: outs, maxQueue: maxQueue, kick: make(chan struct{}, 1), done: make(chan struct{})}
	q.room.L = &q.mu
	go q.formatter()
	return q
}

// add queues r for h.
func (q *recordQueue) add(h slog.Handler, r slog.Record) {
	r = owned(r)
	q.mu.Lock()
	for len(q.pending) >= q.maxQueue && !q.closed {
		q.room.Wait()
	}
	if q.closed {
		// A record logged after Close: after everything queued, straight through.
		q.mu.Unlock()
		<-q.done
		q.fmu.Lock()
		defer q.fmu.Unlock()
		_ = h.Handle(context.Background(), r)
		q.flushOutputs()
		return
	}
	if len(q.pending) == 0 {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
	q.pending = append(q.pending, queued{h, r})
	q.mu.Unlock()
}

func (q *recordQueue) formatter() {
	defer close(q.done)
	for {
		_, open := <-q.kick
		if open {
			time.Sleep(flushDelay)
		}
		q.mu.Lock()
		batch := q.pending
		q.pending, q.spare = q.spare[:0], nil
		q.mu.Unlock()
		q.fmu.Lock()
		for i := range batch {
			// A handler's error is not retried: slog ignores its handlers' errors as well.
			_ = batch[i].h.Handle(context.Background(), batch[i].r)
		}
		q.flushOutputs()
		q.fmu.Unlock()
		clear(batch) // the records' values are garbage now
		q.mu.Lock()
		q.spare = batch[:0]
		q.room.Broadcast()
		q.mu.Unlock()
		if !open {
			return
		}
	}
}

// flushOutputs writes what the outputs hold; fmu is held.
func (q *recordQueue) flushOutputs() {
	for _, o := range q.outs {
		o.flush()
	}
}

// Close formats and writes every queued record and stops the formatter; later records are
// formatted and written directly.
func (q *recordQueue) Close() error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.kick) // under mu: no add is sending on it
		q.room.Broadcast()
	}
	q.mu.Unlock()
	<-q.done
	return nil
}

// owned is r with its LogValuers resolved and its message, keys and strings copied into one
// string of its own, its attributes in a slice of its own (the caller may add to r after).
func owned(r slog.Record) slog.Record {
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	size := len(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		a = resolved(a)
		attrs = append(attrs, a)
		size += stringBytes(a)
		return true
	})
	var b strings.Builder
	b.Grow(size)
	b.WriteString(r.Message)
	for _, a := range attrs {
		gatherStrings(&b, a)
	}
	arena := b.String()
	o := slog.NewRecord(r.Time, r.Level, arena[:len(r.Message)], r.PC)
	at := len(r.Message)
	for i := range attrs {
		attrs[i] = rebase(attrs[i], arena, &at)
	}
	o.AddAttrs(attrs...)
	return o
}

// resolved is a with its LogValuers resolved, a group's in a slice of its own.
func resolved(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup {
		group := a.Value.Group()
		own := make([]slog.Attr, len(group))
		for i := range group {
			own[i] = resolved(group[i])
		}
		a.Value = slog.GroupValue(own...)
	}
	return a
}

// stringBytes is the length of what gatherStrings appends for a.
func stringBytes(a slog.Attr) int {
	n := len(a.Key)
	switch a.Value.Kind() {
	case slog.KindString:
		n += len(a.Value.String())
	case slog.KindGroup:
		for _, g := range a.Value.Group() {
			n += stringBytes(g)
		}
	}
	return n
}

// gatherStrings appends a's key and string values, a group's recursively, in the order rebase
// takes them back.
func gatherStrings(b *strings.Builder, a slog.Attr) {
	b.WriteString(a.Key)
	switch a.Value.Kind() {
	case slog.KindString:
		b.WriteString(a.Value.String())
	case slog.KindGroup:
		for _, g := range a.Value.Group() {
			gatherStrings(b, g)
		}
	}
}

// rebase is a, resolved, with its key and strings taken from arena at *at, as gatherStrings
// put them there; a group's attributes are rebased in place (resolved made them a's own).
func rebase(a slog.Attr, arena string, at *int) slog.Attr {
	take := func(n int) string {
		s := arena[*at : *at+n]
		*at += n
		return s
	}
	a.Key = take(len(a.Key))
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(take(len(a.Value.String())))
	case slog.KindGroup:
		group := a.Value.Group()
		for i := range group {
			group[i] = rebase(group[i], arena, at)
		}
	}
	return a
}

// queuedHandler is a handler whose records h formats later, in q's goroutine.
type queuedHandler struct {
	q *recordQueue
	h slog.Handler
}

func (h queuedHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h queuedHandler) Handle(_ context.Context, r slog.Record) error {
	h.q.add(h.h, r)
	return nil
}

func (h queuedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return queuedHandler{h.q, h.h.WithAttrs(attrs)}
}

func (h queuedHandler) WithGroup(name string) slog.Handler {
	return queuedHandler{h.q, h.h.WithGroup(name)}
}

// output gathers the lines a handler writes (whole lines: slog's handlers write a record in one
// Write) between writes to w, which are at most maxBatch bytes unless one line is longer
// (rotatingFile refuses a write larger than a file). Only the queue's formatter, or a caller
// holding fmu, writes into it.
type output struct {
	w        io.Writer
	maxBatch int
	buf      []byte
}

func (o *output) Write(p []byte) (int, error) {
	if len(o.buf) > 0 && len(o.buf)+len(p) > o.maxBatch {
		o.flush()
	}
	o.buf = append(o.buf, p...)
	return len(p), nil
}

// flush writes the gathered lines. A failed write is not retried: slog ignores its handlers'
// write errors as well.
func (o *output) flush() {
	if len(o.buf) > 0 {
		_, _ = o.w.Write(o.buf)
	}
	if cap(o.buf) > 2*o.maxBatch {
		o.buf = nil // a line longer than a batch grew it
		return
	}
	o.buf = o.buf[:0]
}

// newOutput is an output to w; maxBatch ≤ 0 or above defaultBatch is defaultBatch.
func newOutput(w io.Writer, maxBatch int) *output {
	if maxBatch <= 0 || maxBatch > defaultBatch {
		maxBatch = defaultBatch
	}
	return &output{w: w, maxBatch: maxBatch}
}
