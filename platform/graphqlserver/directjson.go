package graphqlserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/gqljson"
	"github.com/emsanalytics/emsquery/platform/keyslots"
)

// The direct-JSON path. platform/gqljson writes a root field's JSON (from its resolver's value,
// or from a statement's rows through List), instead of gqlgen's per-field marshalers; here is
// where that JSON waits and how it reaches the client:
//
//   - rootFields (gqlgen's root field middleware) gives each root field a slot in its context;
//     List, or fields (gqlgen's field middleware, for a value a resolver returned), fills it
//     with JSON, or with a stream that writes the JSON later;
//   - the field then marshals, in gqlgen's response, as a token: a JSON string no value can
//     hold, standing for its part of the response's parts;
//   - writing the response (parts.write), each token is replaced by its part: JSON held, or a
//     stream that reads its rows now and writes them to the client as it reads them.
//
// So status, headers, errors and the envelope stay gqlgen's; the JSON written here is what
// json.Marshal would have made of it (no insignificant white space, escaped as json.Marshal
// escapes: see platform/jsonscalar).

type slotKey struct{}

// slot is one root field being resolved.
type slot struct {
	w      *gqljson.Writer
	field  *ast.Field
	json   [][]byte              // the field's JSON, in chunks
	stream func(io.Writer) error // or what writes it when the response reaches it
}

func (s *slot) filled() bool { return s.json != nil || s.stream != nil }

type directJSON struct{ w *gqljson.Writer }

// rootFields is a graphql.RootFieldMiddleware.
func (d directJSON) rootFields(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	rfc := graphql.GetRootFieldContext(ctx)
	if rfc == nil || rfc.Field.Field == nil || !d.w.MayWrite(rfc.Field.Definition) {
		return next(ctx)
	}
	s := &slot{w: d.w, field: rfc.Field.Field}
	m := next(context.WithValue(ctx, slotKey{}, s))
	if !s.filled() {
		return m
	}
	p := part{chunks: s.json, stream: s.stream, ctx: ctx}
	ps, _ := ctx.Value(partsKey{}).(*parts)
	return graphql.WriterFunc(func(out io.Writer) {
		if ps == nil { // an executor used without an Endpoint: into gqlgen's buffer
			_ = p.writeTo(out)
			return
		}
		_, _ = out.Write(ps.add(p))
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
	s, _ := ctx.Value(slotKey{}).(*slot)
	if s == nil || s.field != fc.Field.Field || s.filled() {
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
	s.json = chunks
	return placeholder, nil
}

type partsKey struct{}

// parts are one response's root-field JSON waiting for its place, and the slot among
// LIMITS__MAX_STREAMED_ANSWERS its whole-table lists hold while they are sent.
type parts struct {
	mu   sync.Mutex
	list []part

	// slots bound the answers sent while their rows are read (nil: no bound); key is the
	// request's key name, release gives its slot back (nil: none taken), refused is why one was
	// not given: the request is then refused as a whole (429 or 503).
	slots   *keyslots.Slots
	key     string
	release func()
	refused *apierr.Error
	// inMemory says the answer is made into memory first (a recorder: the answer cache's),
	// where a whole-table list is read at the database's pace: its slot is taken only if the
	// answer outgrows what is kept and goes on at its client's (wholeLists, then passOn).
	inMemory   bool
	wholeLists bool
}

// whole notes a whole-table list in the answer: its slot is taken now when the answer goes to
// its client as it is made, or once it outgrows memory otherwise (streamed).
func (ps *parts) whole() error {
	if ps.inMemory {
		ps.mu.Lock()
		ps.wholeLists = true
		ps.mu.Unlock()
		return nil
	}
	return ps.takeStreamed()
}

// streamed is the recorder's admission when an answer outgrows memory: an answer with a
// whole-table list now holds its connection at its client's pace, and takes its slot.
func (ps *parts) streamed() error {
	ps.mu.Lock()
	whole := ps.wholeLists
	ps.mu.Unlock()
	if !whole {
		return nil
	}
	return ps.takeStreamed()
}

// takeStreamed takes the request's slot for a whole-table list, once for all its lists (they
// are sent one after another), or says why not.
func (ps *parts) takeStreamed() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.slots == nil || ps.release != nil {
		return nil
	}
	if ps.refused != nil {
		return ps.refused
	}
	release, err := ps.slots.Take(ps.key)
	if err != nil {
		ps.refused = err
		return err
	}
	ps.release = release
	return nil
}

// done gives back the request's slot, once its lists were sent (or failed).
func (ps *parts) done() {
	ps.mu.Lock()
	release := ps.release
	ps.mu.Unlock()
	if release != nil {
		release()
	}
}

// part is one root field's JSON: chunks, or a stream that writes it, ctx being the root
// field's (for its error, should the stream fail).
type part struct {
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

// token is `"<process nonce>-<n>"`.
var nonce = func() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "gqljson-" + hex.EncodeToString(b) + "-"
}()

var tokenStart = []byte(`"` + nonce)

// add keeps p and returns the token that stands for it.
func (ps *parts) add(p part) []byte {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.list = append(ps.list, p)
	return append(strconv.AppendInt([]byte(`"`+nonce), int64(len(ps.list)-1), 10), '"')
}

func (ps *parts) take(id int) part {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var p part
	if id >= 0 && id < len(ps.list) {
		p, ps.list[id] = ps.list[id], part{}
	}
	return p
}

// errAnswerFailed is what write reports of an answer whose stream failed.
var errAnswerFailed = errors.New("the answer failed while it was written")

// write writes gqlgen's response resp to w, each token replaced by its part. A stream that
// fails ends the answer: when nothing of it was sent yet (w.Reset), the answer becomes the
// field's error (data null: the lists streamed are non-null), with the errors the other fields
// had; otherwise the body is cut (w.Fail). It returns errAnswerFailed then.
func (ps *parts) write(w responseWriter, resp *graphql.Response) error {
	b, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	for {
		i := bytes.Index(b, tokenStart)
		if i < 0 {
			break
		}
		j := i + len(tokenStart)
		k := j
		for k < len(b) && b[k] >= '0' && b[k] <= '9' {
			k++
		}
		id, err := strconv.Atoi(string(b[j:k]))
		if err != nil || k >= len(b) || b[k] != '"' {
			break
		}
		if _, err := w.Write(b[:i]); err != nil {
			return err
		}
		p := ps.take(id)
		if err := p.writeTo(w); err != nil {
			if p.stream == nil {
				return err // the client's connection: nothing more can be sent
			}
			ps.fail(w, p, err)
			return errAnswerFailed
		}
		b = b[k+1:]
	}
	_, err = w.Write(b)
	return err
}

// fail ends an answer whose stream failed with err (see write).
func (ps *parts) fail(w responseWriter, p part, err error) {
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
