package answercache

import (
	"net/http"
	"sort"

	"github.com/emsanalytics/emsquery/platform/gqljson"
)

// recorder is the response writer the engine writes a computed answer into. Plain writes are
// copied (their buffers are the writer's to reuse); JSON that platform/gqljson hands over as
// shared is kept where it is, as the HTTP bridge itself would keep it until it is sent.
type recorder struct {
	header http.Header
	status int
	parts  [][]byte
	owned  bool // the last part is the recorder's own, so plain writes may extend it
	size   int
}

var _ gqljson.SharedWriter = (*recorder)(nil)

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.owned {
		r.parts[len(r.parts)-1] = append(r.parts[len(r.parts)-1], p...)
	} else {
		r.parts = append(r.parts, append(make([]byte, 0, max(len(p), 512)), p...))
		r.owned = true
	}
	r.size += len(p)
	return len(p), nil
}

func (r *recorder) WriteShared(p []byte) (int, error) {
	r.parts = append(r.parts, p)
	r.owned = false
	r.size += len(p)
	return len(p), nil
}

// answer is what was written, without the body (that stays in parts).
func (r *recorder) answer() *answer {
	a := &answer{status: r.status}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	keys := make([]string, 0, len(r.header))
	for k := range r.header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range r.header[k] {
			a.header = append(a.header, [2]string{k, v})
		}
	}
	return a
}
