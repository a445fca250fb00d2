package graphqlserver

import (
	"net/http"
	"sort"

	"github.com/emsanalytics/emsquery/platform/answercache"
)

// recorder is the writer an answer that may be kept is written into: it passes every write on
// to the client's writer at once and keeps a copy for the cache, up to limit bytes; past that
// the copy is dropped and the answer is not kept (a whole table streamed to its client costs
// the cache nothing).
type recorder struct {
	w      responseWriter
	limit  int64
	status int
	body   []byte
	size   int64
	over   bool // more than limit: nothing kept
	failed bool
}

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
	case r.size > r.limit:
		r.over, r.body = true, nil
	default:
		r.body = append(r.body, p...)
	}
	return r.w.Write(p)
}

// Reset drops the copy with what the client's writer drops.
func (r *recorder) Reset() bool {
	if !r.w.Reset() {
		return false
	}
	r.status, r.body, r.size, r.over = 0, nil, 0, false
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
	a := &answercache.Answer{Status: status, Body: r.body}
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
