package graphqlserver

import (
	"bytes"
	"net/http"
	"sort"

	"github.com/emsanalytics/emsquery/platform/answercache"
)

// recorder is the writer an answer that may be kept is written into: it passes every write on
// to the client's writer at once and keeps a copy for the cache, in parts (never copied to grow),
// up to limit bytes; past that the copy is dropped and the answer is not kept (a whole table
// streamed to its client costs the cache nothing).
type recorder struct {
	w      responseWriter
	limit  int64
	status int
	parts  [][]byte
	size   int64
	over   bool // more than limit: nothing kept
	failed bool
}

// maxRecorded bounds the copy of one answer whatever CACHE__MAX_BYTES is, so that what a
// streamed answer costs does not grow with the cache's size: larger answers are not kept.
const maxRecorded = 16 << 20

// recordPart is the size of the parts the copy is kept in.
const recordPart = 64 << 10

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.w.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.size += int64(len(p))
	switch {
	case r.over:
	case r.size > min(r.limit, maxRecorded):
		r.over, r.parts = true, nil
	default:
		for rest := p; len(rest) > 0; {
			if n := len(r.parts); n == 0 || len(r.parts[n-1]) == cap(r.parts[n-1]) {
				r.parts = append(r.parts, make([]byte, 0, max(recordPart, min(len(rest), maxRecorded))))
			}
			last := &r.parts[len(r.parts)-1]
			k := min(len(rest), cap(*last)-len(*last))
			*last = append(*last, rest[:k]...)
			rest = rest[k:]
		}
	}
	return r.w.Write(p)
}

// Reset drops the copy with what the client's writer drops.
func (r *recorder) Reset() bool {
	if !r.w.Reset() {
		return false
	}
	r.status, r.parts, r.size, r.over = 0, nil, 0, false
	r.failed = true // an answer that had to be reset is an error answer: never kept
	return true
}

func (r *recorder) Fail(err error) {
	r.failed = true
	r.w.Fail(err)
}

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
