package gqljson

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	json [][][]byte
}

// token is `"<process nonce>-<n>"`.
var nonce = func() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "gqljson-" + hex.EncodeToString(b) + "-"
}()

// add keeps chunks and returns the token that stands for them.
func (h *held) add(b [][]byte) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.json = append(h.json, b)
	return append(strconv.AppendInt([]byte(`"`+nonce), int64(len(h.json)-1), 10), '"')
}

// Do runs the wrapped transport with a response writer that puts the held JSON in place.
func (t Transport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	h := &held{}
	t.Transport.Do(&splicer{ResponseWriter: w, held: h}, r.WithContext(context.WithValue(r.Context(), heldKey{}, h)), exec)
}

type splicer struct {
	http.ResponseWriter
	held *held
}

var tokenStart = []byte(`"` + nonce)

func (s *splicer) Write(p []byte) (int, error) {
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

// writeHeld writes held JSON number id (final already: see AppendString) and lets it go.
func (s *splicer) writeHeld(id int) error {
	s.held.mu.Lock()
	var chunks [][]byte
	if id < len(s.held.json) {
		chunks, s.held.json[id] = s.held.json[id], nil
	}
	s.held.mu.Unlock()
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
