package logging

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingWriter keeps every write, as a file would, and how large each was.
type recordingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes []int
	delay  time.Duration
}

func (r *recordingWriter) Write(p []byte) (int, error) {
	time.Sleep(r.delay)
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

// Every line arrives, each writer's in its order, whole, in writes no larger than the batch;
// Close returns only once all are written, and lines after it still arrive.
func TestAsyncWriterLosesNoLine(t *testing.T) {
	out := &recordingWriter{delay: 50 * time.Microsecond}
	const batch = 4096
	w := newAsyncWriter(out, batch)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				line := fmt.Sprintf("writer %d line %d %s\n", g, i, strings.Repeat("x", i%300))
				if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
					t.Errorf("Write = %d, %v", n, err)
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("after close\n")); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines+1 || got[len(got)-1] != "after close" {
		t.Fatalf("%d lines written, want %d and the line after Close last", len(got), writers*lines+1)
	}
	next := make([]int, writers)
	for _, l := range got[:len(got)-1] {
		var g, i int
		if _, err := fmt.Sscanf(l, "writer %d line %d", &g, &i); err != nil {
			t.Fatalf("a line cut or mixed: %q", l)
		}
		if i != next[g] || !strings.HasSuffix(l, " "+strings.Repeat("x", i%300)) {
			t.Fatalf("writer %d: line %d where %d was due, or cut: %q", g, i, next[g], l)
		}
		next[g]++
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	for _, n := range out.writes {
		if n > batch && n != len("after close\n") {
			t.Errorf("a write of %d bytes, more than the batch of %d", n, batch)
		}
	}
	if len(out.writes) >= writers*lines {
		t.Errorf("%d writes for %d lines: nothing was gathered", len(out.writes), writers*lines)
	}
}

// A line reaches the output soon without Close.
func TestAsyncWriterFlushesByItself(t *testing.T) {
	out := &recordingWriter{}
	w := newAsyncWriter(out, 0)
	defer w.Close()
	_, _ = w.Write([]byte("one\n"))
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "one\n" {
		if time.Now().After(deadline) {
			t.Fatal("the line was not written without Close")
		}
		time.Sleep(time.Millisecond)
	}
}
