package gqlexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/gqlfield"
	"github.com/emsanalytics/emsquery/platform/gqljson"
	"github.com/emsanalytics/emsquery/platform/keyslots"
)

// The direct-JSON path. platform/gqljson writes a root field's JSON (from its resolver's value,
// or from a statement's rows through gqlfield.List), instead of gqlgen's per-field marshalers.
// The JSON goes one way, from the resolver to the client:
//
//   - rootFields (gqlgen's root field middleware) gives each root field a gqlfield.Place in its
//     context; gqlfield.List, or fields (gqlgen's field middleware, for a value a resolver
//     returned), fills it with JSON, or with a stream that writes the JSON later;
//   - when gqlgen writes its response's data into its buffer, such a field writes nothing
//     there: it notes its part at the offset where its value goes (answer.place);
//   - answer.write writes the response: the envelope, gqlgen's data up to each part, the part
//     (JSON held, or a stream that reads its rows now and writes them as it reads them), and the
//     rest of the data.
//
// So status, headers, errors and the envelope stay gqlgen's; the JSON written here is what
// json.Marshal would have made of it (no insignificant white space, escaped as json.Marshal
// escapes: see platform/jsonscalar).

type directJSON struct{ w *gqljson.Writer }

// rootFields is a graphql.RootFieldMiddleware.
func (d directJSON) rootFields(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	rfc := graphql.GetRootFieldContext(ctx)
	if rfc == nil || rfc.Field.Field == nil || !d.w.MayWrite(rfc.Field.Definition) {
		return next(ctx)
	}
	a := answerOf(ctx)
	var admit func() error
	if a != nil {
		admit = a.whole
	}
	place := gqlfield.NewPlace(d.w, rfc.Field.Field, admit)
	m := next(gqlfield.WithPlace(ctx, place))
	if !place.Filled() {
		return m
	}
	p := part{chunks: place.JSON(), stream: place.Stream(), ctx: ctx}
	return graphql.WriterFunc(func(out io.Writer) {
		if buf, ok := out.(*bytes.Buffer); ok && a != nil && a.place(buf, p) {
			return
		}
		// An executor used without Execute, or data written elsewhere than gqlgen's response
		// buffer: the JSON goes in place, held.
		_ = p.writeTo(out)
	})
}

// fields is a graphql.FieldMiddleware: it writes a root field's value here when gqljson can.
func (d directJSON) fields(ctx context.Context, next graphql.Resolver) (any, error) {
	res, err := next(ctx)
	if err != nil || res == nil {
		return res, err
	}
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Object != "Query" {
		return res, err
	}
	place := gqlfield.PlaceOf(ctx)
	if !place.For(fc.Field.Field) {
		return res, err
	}
	oc := graphql.GetOperationContext(ctx)
	if oc == nil {
		return res, err
	}
	chunks, placeholder, ok := d.w.Value(oc, fc, res)
	if !ok {
		return res, err
	}
	place.Hold(chunks)
	return placeholder, nil
}

type answerKey struct{}

func withAnswer(ctx context.Context, a *answer) context.Context {
	return context.WithValue(ctx, answerKey{}, a)
}

func answerOf(ctx context.Context) *answer {
	a, _ := ctx.Value(answerKey{}).(*answer)
	return a
}

// answer is one response being made: its root fields' JSON, each at its place in gqlgen's data,
// and the slot among LIMITS__MAX_STREAMED_ANSWERS its whole-table lists hold while they are
// sent.
type answer struct {
	mu    sync.Mutex
	parts []part        // in the order of their offsets
	data  *bytes.Buffer // gqlgen's buffer of the response's data, which the offsets are in

	// slots bound the answers sent while their rows are read (nil: no bound); key is the
	// request's key name, release gives its slot back (nil: none taken), refused is why one was
	// not given: the request is then refused as a whole (429 or 503).
	slots   *keyslots.Slots
	key     string
	release func()
	refused *apierr.Error
	// inMemory says the answer is made into memory first (a MemoryWriter: the answer cache's),
	// where a whole-table list is read at the database's pace: its slot is taken only if the
	// answer outgrows what is kept and goes on at its client's (wholeLists, then streamed).
	inMemory   bool
	wholeLists bool
}

// part is one root field's JSON: chunks, or a stream that writes it, ctx being the root
// field's (for its error, should the stream fail); at is its offset in gqlgen's data.
type part struct {
	at     int
	chunks [][]byte
	stream func(io.Writer) error
	ctx    context.Context
}

func (p part) writeTo(w io.Writer) error {
	if p.stream != nil {
		return p.stream(w)
	}
	for _, c := range p.chunks {
		if _, err := w.Write(c); err != nil {
			return err
		}
	}
	return nil
}

// place notes p at the end of what gqlgen wrote into buf so far, and says whether it could (buf
// is the response's data, the one buffer all parts are in).
func (a *answer) place(buf *bytes.Buffer, p part) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.data == nil {
		a.data = buf
	} else if a.data != buf {
		return false
	}
	p.at = buf.Len()
	a.parts = append(a.parts, p)
	return true
}

// whole notes a whole-table list in the answer: its slot is taken now when the answer goes to
// its client as it is made, or once it outgrows memory otherwise (streamed).
func (a *answer) whole() error {
	if a.inMemory {
		a.mu.Lock()
		a.wholeLists = true
		a.mu.Unlock()
		return nil
	}
	return a.takeStreamed()
}

// streamed is a MemoryWriter's admission when an answer outgrows memory: an answer with a
// whole-table list now holds its connection at its client's pace, and takes its slot.
func (a *answer) streamed() error {
	a.mu.Lock()
	whole := a.wholeLists
	a.mu.Unlock()
	if !whole {
		return nil
	}
	return a.takeStreamed()
}

// takeStreamed takes the request's slot for a whole-table list, once for all its lists (they
// are sent one after another), or says why not.
func (a *answer) takeStreamed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.slots == nil || a.release != nil {
		return nil
	}
	if a.refused != nil {
		return a.refused
	}
	release, err := a.slots.Take(a.key)
	if err != nil {
		a.refused = err
		return err
	}
	a.release = release
	return nil
}

// done gives back the request's slot, once its lists were sent (or failed).
func (a *answer) done() {
	a.mu.Lock()
	release := a.release
	a.mu.Unlock()
	if release != nil {
		release()
	}
}

// envelopeSize is the size of the buffer write gathers an answer's envelope and small parts in
// (envelopes): a part that does not fit is written from where it is.
const envelopeSize = 16 << 10

// envelopes are write's buffers, reused: each answer otherwise allocated one of its size.
var envelopes = sync.Pool{New: func() any { b := make([]byte, 0, envelopeSize); return &b }}

// errAnswerFailed is what write reports of an answer whose stream failed.
var errAnswerFailed = errors.New("the answer failed while it was written")

// errPartsLost is a response whose data is not the buffer its parts were placed in: a bug.
var errPartsLost = errors.New("gqlexec: the response's data is not where its root fields were placed")

// tail is what json.Marshal writes of a graphql.Response after its data.
type tail struct {
	Label      string         `json:"label,omitempty"`
	Path       ast.Path       `json:"path,omitempty"`
	HasNext    *bool          `json:"hasNext,omitempty"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// write writes gqlgen's response resp to w as json.Marshal would, each part written at its
// place in the data. A stream that fails ends the answer: when nothing of it was sent yet
// (w.Reset), the answer becomes the field's error (data null: the lists streamed are non-null),
// with the errors the other fields had; otherwise the body is cut (w.Fail). It returns
// errAnswerFailed then.
func (a *answer) write(w ResponseWriter, resp *graphql.Response) error {
	a.mu.Lock()
	parts, data := a.parts, a.data
	a.parts = nil
	a.mu.Unlock()
	if len(parts) == 0 {
		b, err := json.Marshal(resp)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	// Once written (or failed), the parts' held JSON is no longer used: every writer copies.
	defer func() {
		for _, p := range parts {
			gqljson.Release(p.chunks)
		}
	}()
	if d := data.Bytes(); len(d) != len(resp.Data) || len(d) == 0 || &d[0] != &resp.Data[0] {
		a.fail(w, parts[0], errPartsLost)
		return errAnswerFailed
	}
	buf := envelopes.Get().(*[]byte)
	defer func() {
		if cap(*buf) == envelopeSize {
			envelopes.Put(buf)
		}
	}()
	b := append((*buf)[:0], '{')
	if len(resp.Errors) > 0 {
		errs, err := json.Marshal(resp.Errors)
		if err != nil {
			return err
		}
		b = append(append(append(b, `"errors":`...), errs...), ',')
	}
	b = append(b, `"data":`...)
	at := 0
	for _, p := range parts {
		b = appendData(b, resp.Data[at:p.at])
		at = p.at
		if p.stream == nil && len(b)+chunksLen(p.chunks) <= cap(b) {
			for _, c := range p.chunks {
				b = append(b, c...)
			}
			continue
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		b = b[:0]
		if err := p.writeTo(w); err != nil {
			if p.stream == nil {
				return err // the client's connection: nothing more can be sent
			}
			a.fail(w, p, err)
			return errAnswerFailed
		}
	}
	b = appendData(b, resp.Data[at:])
	if resp.Label != "" || len(resp.Path) > 0 || resp.HasNext != nil || len(resp.Extensions) > 0 {
		t, err := json.Marshal(tail{resp.Label, resp.Path, resp.HasNext, resp.Extensions})
		if err != nil {
			return err
		}
		b = append(append(b, ','), t[1:]...)
	} else {
		b = append(b, '}')
	}
	*buf = b[:0]
	_, err := w.Write(b)
	return err
}

func chunksLen(chunks [][]byte) int {
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	return n
}

const hexDigits = "0123456789abcdef"

// appendData appends a piece of gqlgen's data (its text between two parts, outside any string)
// as json.Marshal writes a json.RawMessage: without white space outside strings, and with <, >,
// & and U+2028, U+2029 escaped.
func appendData(dst, src []byte) []byte {
	inString, escaped := false, false
	start := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
			i += 2
			start = i + 1
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

// fail ends an answer whose stream failed with err (see write).
func (a *answer) fail(w ResponseWriter, p part, err error) {
	// The field's error, as any: presented (and logged with the request id, for a code the
	// client sees only as a code) whether the answer can still carry it or is cut.
	graphql.AddError(p.ctx, err)
	contentType := w.Header().Get("Content-Type")
	if !w.Reset() {
		w.Fail(err)
		return
	}
	body, merr := json.Marshal(graphql.Response{Errors: limitErrors(graphql.GetErrors(p.ctx))})
	if merr != nil {
		w.Fail(merr)
		return
	}
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
