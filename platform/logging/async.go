package logging

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// asyncWriter takes log lines off the requests' path: Write only copies the line into a buffer,
// and a goroutine of its own writes what gathered, every line in order, in as few writes as the
// output allows (one system call per request was the access log's cost). No line is dropped: a
// writer waits while maxPending bytes are still unwritten, and Close writes everything before it
// returns. A process that dies without Close (SIGKILL) loses at most the lines of the last
// flushDelay.
type asyncWriter struct {
	out      io.Writer
	maxBatch int // bytes per write to out, cut between lines (rotatingFile refuses a write larger than a file)

	mu      sync.Mutex
	room    sync.Cond // signalled when pending shrinks
	pending []byte
	spare   []byte
	closed  bool
	kick    chan struct{} // a line is pending (capacity 1); closed by Close
	done    chan struct{} // the flusher has written everything and stopped
}

const (
	// flushDelay lets lines gather before a write; it bounds how late a line reaches its file.
	// Each write costs more than its bytes: a write to a file blocks long enough for Go's
	// runtime to hand the writer's processor to another thread, and its monitor thread then
	// polls every 20 µs for a while (perf shows that thread's sleeps among the service's top
	// costs). At 5 ms (up to 200 writes a second), a light request cost about 20 µs more
	// processor time than at 100 ms, on two shared cores.
	flushDelay = 100 * time.Millisecond
	// maxPending bounds the memory of lines not yet written; past it, writers wait.
	maxPending = 4 << 20
	// defaultBatch is the largest single write.
	defaultBatch = 256 << 10
)

// newAsyncWriter starts the flusher of out; maxBatch (0: defaultBatch) bounds a single write.
func newAsyncWriter(out io.Writer, maxBatch int) *asyncWriter {
	if maxBatch <= 0 || maxBatch > defaultBatch {
		maxBatch = defaultBatch
	}
	w := &asyncWriter{out: out, maxBatch: maxBatch, kick: make(chan struct{}, 1), done: make(chan struct{})}
	w.room.L = &w.mu
	go w.flusher()
	return w
}

// Write queues p, one log line (slog handlers write a whole record at once).
func (w *asyncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	for len(w.pending) >= maxPending && !w.closed {
		w.room.Wait()
	}
	if w.closed {
		// A line logged after Close: after everything queued, straight through.
		w.mu.Unlock()
		<-w.done
		return w.out.Write(p)
	}
	if len(w.pending) == 0 {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	w.pending = append(w.pending, p...)
	w.mu.Unlock()
	return len(p), nil
}

func (w *asyncWriter) flusher() {
	defer close(w.done)
	for {
		_, open := <-w.kick
		if open {
			time.Sleep(flushDelay)
		}
		w.mu.Lock()
		batch := w.pending
		w.pending, w.spare = w.spare[:0], nil
		w.mu.Unlock()
		w.writeOut(batch)
		w.mu.Lock()
		w.spare = batch[:0]
		w.room.Broadcast()
		w.mu.Unlock()
		if !open {
			return
		}
	}
}

// writeOut writes b in pieces of at most maxBatch bytes, cut after a newline (a line longer
// than that is written alone).
func (w *asyncWriter) writeOut(b []byte) {
	for len(b) > 0 {
		n := len(b)
		if n > w.maxBatch {
			if i := bytes.LastIndexByte(b[:w.maxBatch], '\n'); i >= 0 {
				n = i + 1
			} else if i := bytes.IndexByte(b, '\n'); i >= 0 {
				n = i + 1
			}
		}
		// A failed write is not retried: slog ignores its handlers' write errors as well.
		_, _ = w.out.Write(b[:n])
		b = b[n:]
	}
}

// Close writes every pending line and stops the flusher; later lines are written directly.
func (w *asyncWriter) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.kick) // under mu: no Write is sending on it
		w.room.Broadcast()
	}
	w.mu.Unlock()
	<-w.done
	return nil
}
