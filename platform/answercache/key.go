package answercache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
)

// params are the GraphQL-over-HTTP parameters of a request, as gqlgen's GET and POST
// transports read them.
type params struct {
	Query         string          `json:"query"`
	OperationName string          `json:"operationName"`
	Variables     json.RawMessage `json:"variables"`
	Extensions    json.RawMessage `json:"extensions"`
}

var errNotCacheable = errors.New("not a GraphQL GET or POST")

// keyOf is the key of the question a request asks of the endpoint at route: everything the
// answer's bytes depend on. That is the endpoint, the method (GET and POST are different
// transports), the Accept header (it chooses the Content-Type), the document, the operation
// name, and the variables and extensions (persisted queries) in a canonical form: decoded and
// encoded again as gqlgen decodes them (numbers as written, keys sorted, the last of duplicate
// keys), so that the same values written differently are one question. body is a POST's body.
func keyOf(route string, r *http.Request, body []byte) (key, error) {
	var p params
	switch r.Method {
	case http.MethodPost:
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&p); err != nil {
			return key{}, err
		}
	case http.MethodGet:
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return key{}, err
		}
		p.Query, p.OperationName = q.Get("query"), q.Get("operationName")
		p.Variables, p.Extensions = json.RawMessage(q.Get("variables")), json.RawMessage(q.Get("extensions"))
	default:
		return key{}, errNotCacheable
	}
	vars, err := canonical(p.Variables)
	if err != nil {
		return key{}, err
	}
	ext, err := canonical(p.Extensions)
	if err != nil {
		return key{}, err
	}
	h := sha256.New()
	for _, part := range [][]byte{
		[]byte(route), []byte(r.Method), []byte(r.Header.Get("Accept")),
		[]byte(p.Query), []byte(p.OperationName), vars, ext,
	} {
		// Each part with its length first, so no two different lists of parts hash alike.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var k key
	h.Sum(k[:0])
	return k, nil
}

// canonical re-encodes a JSON object (keys sorted, numbers as written, no spaces); an absent,
// null or empty object is empty, anything but an object an error.
func canonical(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil // {} is what gqlgen makes of no variables too
	}
	return json.Marshal(m)
}
