package answercache

import (
	"net/http"
	"sort"

	"github.com/emsanalytics/emsquery/platform/gqljson"
)

// recorder is the response writer the engine writes a computed answer into: it passes every
// write on to the client's writer at once and keeps a copy of the answer for the cache, up to
// limit bytes; past that the copy is dropped and the answer is not kept (a whole table streamed
// to its client costs the cache nothing). Plain writes are copied (their buffers are the
// writer's to reuse); JSON that platform/gqljson hands over as shared is kept where it is.
type recorder struct {
	w      http.ResponseWriter
	limit  int
	status int
	parts  [][]byte
	owned  bool // the last part is the recorder's own, so plain writes may extend it
	size   int
	over   bool // more than limit: nothing kept
	failed bool
	wrote  bool
}

var (
	_ gqljson.SharedWriter = (*recorder)(nil)
	_ gqljson.StreamWriter = (*recorder)(nil)
)

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.w.WriteHeader(status)
}

func (r *recorder) keep(p []byte, shared bool) {
	r.size += len(p)
	if r.over {
		return
	}
	if r.size > r.limit {
		r.over, r.parts = true, nil
		return
	}
	switch {
	case shared:
		r.parts = append(r.parts, p)
		r.owned = false
	case r.owned:
		r.parts[len(r.parts)-1] = append(r.parts[len(r.parts)-1], p...)
	default:
		r.parts = append(r.parts, append(make([]byte, 0, max(len(p), 512)), p...))
		r.owned = true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	r.keep(p, false)
	return r.w.Write(p)
}

func (r *recorder) WriteShared(p []byte) (int, error) {
	r.wrote = true
	r.keep(p, true)
	if sw, ok := r.w.(gqljson.SharedWriter); ok {
		return sw.WriteShared(p)
	}
	return r.w.Write(p)
}

// Reset drops the copy with what the client's writer drops.
func (r *recorder) Reset() bool {
	sw, ok := r.w.(gqljson.StreamWriter)
	if !ok || !sw.Reset() {
		return false
	}
	r.status, r.parts, r.owned, r.size, r.over = 0, nil, false, 0, false
	r.failed = true // an answer that had to be reset is an error answer: never kept
	return true
}

func (r *recorder) Fail(err error) {
	r.failed = true
	if sw, ok := r.w.(gqljson.StreamWriter); ok {
		sw.Fail(err)
	}
}

// answer is what was written, without the body (that stays in parts).
func (r *recorder) answer() *answer {
	a := &answer{status: r.status}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	h := r.w.Header()
	keys := make([]string, 0, len(h))
	for k := range h {
		if k != HeaderCacheStatus {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			a.header = append(a.header, [2]string{k, v})
		}
	}
	return a
}
