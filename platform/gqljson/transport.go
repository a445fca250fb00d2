package gqljson

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
)

// Transport wraps a gqlgen HTTP transport (transport.POST, transport.GET) so that the JSON
// written by Writer reaches the client directly. Without it, that JSON is copied into gqlgen's
// response buffer and then validated and copied again by the transport's json.Marshal of the
// response, which for a large list costs as much as writing it.
//
// Writer puts a token (a JSON string no other value can hold) in the response data where the
// field's JSON belongs; the transport marshals the response as usual, so status, headers,
// errors and extensions stay its own; writing it, the token is replaced by the JSON, which is
// what json.Marshal would have made of it: it has no insignificant white space and is escaped
// as json.Marshal escapes already (see AppendString).
type Transport struct {
	graphql.Transport
}

type heldKey struct{}

// held is one request's JSON waiting for its place in the response.
type held struct {
	mu   sync.Mutex
	json []heldPart
}

// heldPart is one root field's JSON: in chunks, or written by stream when its place comes,
// ctx being the root field's (for its error, should it fail).
type heldPart struct {
	chunks [][]byte
	stream func(w io.Writer) error
	ctx    context.Context
}

// token is `"<process nonce>-<n>"`.
var nonce = func() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "gqljson-" + hex.EncodeToString(b) + "-"
}()

// add keeps chunks and returns the token that stands for them.
func (h *held) add(b [][]byte) []byte {
	return h.addPart(heldPart{chunks: b})
}

// addStream keeps a stream (see List.Stream) and returns the token that stands for it.
func (h *held) addStream(ctx context.Context, stream func(w io.Writer) error) []byte {
	return h.addPart(heldPart{stream: stream, ctx: ctx})
}

func (h *held) addPart(p heldPart) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.json = append(h.json, p)
	return append(strconv.AppendInt([]byte(`"`+nonce), int64(len(h.json)-1), 10), '"')
}

// Do runs the wrapped transport with a response writer that puts the held JSON in place.
func (t Transport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	h := &held{}
	t.Transport.Do(&splicer{ResponseWriter: w, held: h}, r.WithContext(context.WithValue(r.Context(), heldKey{}, h)), exec)
}

type splicer struct {
	http.ResponseWriter
	held   *held
	failed bool // a stream failed: nothing more is written
}

var tokenStart = []byte(`"` + nonce)

func (s *splicer) Write(p []byte) (int, error) {
	if s.failed {
		return 0, errAnswerFailed
	}
	s.held.mu.Lock()
	pending := len(s.held.json) > 0
	s.held.mu.Unlock()
	if !pending {
		return s.ResponseWriter.Write(p)
	}
	n := len(p)
	for {
		i := bytes.Index(p, tokenStart)
		if i < 0 {
			break
		}
		j := i + len(tokenStart)
		k := j
		for k < len(p) && p[k] >= '0' && p[k] <= '9' {
			k++
		}
		id, err := strconv.Atoi(string(p[j:k]))
		if err != nil || k >= len(p) || p[k] != '"' {
			break
		}
		if _, err := s.ResponseWriter.Write(p[:i]); err != nil {
			return 0, err
		}
		if err := s.writeHeld(id); err != nil {
			return 0, err
		}
		p = p[k+1:]
	}
	if _, err := s.ResponseWriter.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

// SharedWriter is a response writer that can take a slice without copying it: p is not changed
// afterwards, and may be kept until the response is sent.
type SharedWriter interface {
	WriteShared(p []byte) (int, error)
}

// StreamWriter is a response writer that can drop what it holds while none of it was sent
// (Reset) and be told that the answer failed (Fail), so that a body partly sent is cut; the
// HTTP bridge's writer is one.
type StreamWriter interface {
	Reset() bool
	Fail(err error)
}

// errAnswerFailed stops the transport's writing after a stream failed.
var errAnswerFailed = errors.New("the answer failed while it was written")

// writeHeld writes held JSON number id (final already: see AppendString) and lets it go. A
// stream that fails ends the response: when nothing of it was sent yet, the response becomes
// the GraphQL error of the field (data null: the whole-table lists are non-null), with the
// errors the other fields had; otherwise the body is cut (StreamWriter.Fail).
func (s *splicer) writeHeld(id int) error {
	s.held.mu.Lock()
	var part heldPart
	if id < len(s.held.json) {
		part, s.held.json[id] = s.held.json[id], heldPart{}
	}
	s.held.mu.Unlock()
	if part.stream != nil {
		err := part.stream(s.ResponseWriter)
		if err == nil {
			return nil
		}
		s.failed = true
		sw, ok := s.ResponseWriter.(StreamWriter)
		if !ok {
			return err
		}
		contentType := s.ResponseWriter.Header().Get("Content-Type")
		if !sw.Reset() {
			sw.Fail(err)
			return errAnswerFailed
		}
		graphql.AddError(part.ctx, err)
		body, merr := json.Marshal(graphql.Response{Errors: graphql.GetErrors(part.ctx)})
		if merr != nil {
			sw.Fail(merr)
			return errAnswerFailed
		}
		if contentType != "" {
			s.ResponseWriter.Header().Set("Content-Type", contentType)
		}
		s.ResponseWriter.WriteHeader(http.StatusOK)
		_, _ = s.ResponseWriter.Write(body)
		return errAnswerFailed
	}
	chunks := part.chunks
	sw, shared := s.ResponseWriter.(SharedWriter)
	for _, c := range chunks {
		var err error
		if shared {
			_, err = sw.WriteShared(c)
		} else {
			_, err = s.ResponseWriter.Write(c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Flush passes a flush on, for transports that stream.
func (s *splicer) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
