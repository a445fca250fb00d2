package app

import (
	"bytes"
	"io"
	"net/http"
	"runtime"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/valyala/fasthttp"

	"github.com/emsanalytics/emsquery/platform/gqljson"
)

// directJSONTypes are the object types whose values platform/gqljson writes to JSON itself
// instead of gqlgen's per-field marshalers: plain structs bound field by field with json tags,
// with built-in scalars, lists and each other. The large lists (patients, oxygens, the main
// report's rows) are why; even a list of twenty stations costs gqlgen three times as much. A
// lone small object (records_count's) is cheaper through gqlgen, so RecordsCount is not here.
// app's tests check the answers are gqlgen's own, byte for byte.
var directJSONTypes = []string{
	"Patient", "Oxygen", "Resource", "StationResources", "StationResource",
	"DistinctValue", "UniqueCount",
	"MainReport", "MainReportRow", "MainReportSummary", "ValueCount", "Station",
}

// bulkFields answer whole tables (hundreds of thousands of rows): see gqljson.LimitBulk.
var bulkFields = []string{"patients", "oxygens"}

// directJSON is off only in the tests that compare with gqlgen's own marshaling.
var directJSON = true

// directJSONTransport wraps a gqlgen transport so that the JSON platform/gqljson writes goes to
// the client without being copied and re-validated (see gqljson.Transport).
func directJSONTransport(t graphql.Transport) graphql.Transport {
	if !directJSON {
		return t
	}
	return gqljson.Transport{Transport: t}
}

// useDirectJSON installs platform/gqljson's middlewares on srv.
func useDirectJSON(srv *handler.Server, es graphql.ExecutableSchema) {
	if !directJSON {
		return
	}
	w := gqljson.New(es.Schema(), directJSONTypes...)
	// Whole tables: a few at a time, as many as there are processors to write them.
	w.LimitBulk(runtime.GOMAXPROCS(0), bulkFields...)
	srv.AroundRootFields(w.RootFields)
	srv.AroundFields(w.Fields)
}

// bridgeWriter is the http.ResponseWriter netHTTP gives gqlgen: it writes status, headers and
// body into the fasthttp response as fasthttp's adaptor does, and takes JSON that
// platform/gqljson hands over (gqljson.SharedWriter) without copying it: the response body then
// becomes a stream of the parts in order, sent after the handler returns.
type bridgeWriter struct {
	resp   *fasthttp.Response
	header http.Header
	status int
	parts  [][]byte // the body, once a shared part came; nil before
	size   int
}

var _ gqljson.SharedWriter = (*bridgeWriter)(nil)

func (w *bridgeWriter) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header)
	}
	return w.header
}

func (w *bridgeWriter) WriteHeader(status int) { w.status = status }

func (w *bridgeWriter) Write(p []byte) (int, error) {
	if w.parts == nil {
		w.resp.AppendBody(p)
		return len(p), nil
	}
	w.parts = append(w.parts, bytes.Clone(p))
	w.size += len(p)
	return len(p), nil
}

// sharedMin is the size from which a shared part is sent from where it is; smaller answers
// are copied into fasthttp's buffer as any other.
const sharedMin = 64 << 10

// WriteShared keeps p, which its writer leaves unchanged, until the response is sent.
func (w *bridgeWriter) WriteShared(p []byte) (int, error) {
	if w.parts == nil && len(p) < sharedMin {
		return w.Write(p)
	}
	if w.parts == nil {
		body := w.resp.Body()
		w.parts = [][]byte{bytes.Clone(body)}
		w.size = len(body)
		w.resp.ResetBody()
	}
	w.parts = append(w.parts, p)
	w.size += len(p)
	return len(p), nil
}

// Flush does nothing: the response is sent when the handler returns, as with the adaptor.
func (w *bridgeWriter) Flush() {}

// finish sets the status, the headers (Content-Type sniffed when the handler set none, as the
// adaptor does) and, with shared parts, the body stream.
func (w *bridgeWriter) finish() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.resp.SetStatusCode(w.status)
	haveContentType := false
	for k, vv := range w.header {
		if k == fasthttp.HeaderContentType {
			haveContentType = true
		}
		for _, v := range vv {
			w.resp.Header.Add(k, v)
		}
	}
	var head []byte
	if w.parts == nil {
		head = w.resp.Body()
	} else {
		for _, p := range w.parts {
			head = append(head, p[:min(len(p), 512-len(head))]...)
			if len(head) == 512 {
				break
			}
		}
		w.resp.SetBodyStream(&partsReader{parts: w.parts}, w.size)
	}
	if !haveContentType {
		w.resp.Header.Set(fasthttp.HeaderContentType, http.DetectContentType(head[:min(len(head), 512)]))
	}
}

// partsReader reads parts one after the other; fasthttp sends it with WriteTo, part by part.
type partsReader struct {
	parts [][]byte
}

func (r *partsReader) Read(p []byte) (int, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

func (r *partsReader) WriteTo(w io.Writer) (int64, error) {
	var sum int64
	for len(r.parts) > 0 {
		n, err := w.Write(r.parts[0])
		sum += int64(n)
		r.parts[0] = r.parts[0][n:]
		if err != nil {
			return sum, err
		}
		r.parts = r.parts[1:]
	}
	return sum, nil
}
