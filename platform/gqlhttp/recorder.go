package gqlhttp

import (
	"bytes"
	"net/http"
	"sort"

	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
)

// recorder is the writer an answer that identical requests may share is computed into: it holds
// the answer in memory, in parts (never copied to grow), up to limit bytes, so that the
// computation never waits on its own client's reading while others wait for it (contract 6.10:
// a caller never waits on another caller's reading). The answer is then kept (answer) and each
// request sends its own copy. Past limit the answer cannot be kept: outgrown is called (the
// requests waiting for it compute their own), what was held goes to the client's writer and the
// rest of the answer follows it there as it is written (a whole table streamed to its one
// client costs the cache nothing).
type recorder struct {
	w        gqlexec.ResponseWriter
	limit    int64
	outgrown func()
	// admit, when set, is asked before the answer goes on to the client's writer: an answer
	// sent while its rows are read needs a slot (LIMITS__MAX_STREAMED_ANSWERS); its refusal
	// fails the write, nothing of the answer having reached the client.
	admit  func() error
	status int
	parts  [][]byte
	size   int64
	over   bool // more than limit: passed on, nothing kept
	failed bool
}

// maxRecorded bounds the copy of one answer whatever CACHE__MAX_BYTES is, so that what an
// answer held in memory costs does not grow with the cache's size: larger answers are not kept.
const maxRecorded = 16 << 20

// recordPart is the size of the parts the copy is kept in.
const recordPart = 64 << 10

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(status int) {
	if r.over {
		r.w.WriteHeader(status)
		return
	}
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.over {
		return r.w.Write(p)
	}
	if r.size+int64(len(p)) > min(r.limit, maxRecorded) {
		if err := r.passOn(); err != nil {
			return 0, err
		}
		return r.w.Write(p)
	}
	r.size += int64(len(p))
	for rest := p; len(rest) > 0; {
		if n := len(r.parts); n == 0 || len(r.parts[n-1]) == cap(r.parts[n-1]) {
			r.parts = append(r.parts, make([]byte, 0, max(recordPart, min(len(rest), maxRecorded))))
		}
		last := &r.parts[len(r.parts)-1]
		k := min(len(rest), cap(*last)-len(*last))
		*last = append(*last, rest[:k]...)
		rest = rest[k:]
	}
	return len(p), nil
}

// Swap is Write for a whole chunk (gqljson's streamed lists): once passing on, the chunk goes to
// the client's writer as a whole where it takes one.
func (r *recorder) Swap(b []byte) ([]byte, error) {
	if s, ok := r.w.(swapper); ok && r.over {
		return s.Swap(b)
	}
	_, err := r.Write(b)
	return b[:0], err
}

type swapper interface {
	Swap(b []byte) ([]byte, error)
}

// passOn gives up keeping the answer: the requests waiting for it are let go, and what was held
// is written to the client's writer, which from now on takes every write.
func (r *recorder) passOn() error {
	if r.admit != nil {
		if err := r.admit(); err != nil {
			return err
		}
	}
	r.over = true
	if r.outgrown != nil {
		r.outgrown()
	}
	return r.flush()
}

// flush writes what is held to the client's writer: the answer, once it is complete (sent so
// by the request that computed it, kept or not).
func (r *recorder) flush() error {
	parts := r.parts
	r.parts = nil
	if r.status != 0 {
		r.w.WriteHeader(r.status)
	}
	for _, p := range parts {
		if _, err := r.w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// Reset drops what is held with what the client's writer drops.
func (r *recorder) Reset() bool {
	if !r.w.Reset() {
		return false
	}
	r.status, r.parts, r.size = 0, nil, 0
	r.failed = true // an answer that had to be reset is an error answer: never kept
	return true
}

func (r *recorder) Fail(err error) {
	r.failed = true
	r.w.Fail(err)
}

// AdmitStreaming is gqlexec.MemoryWriter's: admit is asked before the answer goes on to the
// client's writer.
func (r *recorder) AdmitStreaming(admit func() error) { r.admit = admit }

// answer is the recorded answer, nil when it may not be kept: a failure, a status other than
// 200, or more than limit bytes.
func (r *recorder) answer() *answercache.Answer {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	if r.over || r.failed || status != http.StatusOK {
		return nil
	}
	a := &answercache.Answer{Status: status, Body: bytes.Join(r.parts, nil)}
	if len(r.parts) == 1 {
		a.Body = r.parts[0]
	}
	h := r.w.Header()
	keys := make([]string, 0, len(h))
	for k := range h {
		if k != answercache.HeaderCacheStatus {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			a.Header = append(a.Header, [2]string{k, v})
		}
	}
	if a.Size() > r.limit {
		return nil
	}
	return a
}
