package gqlexec

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/emsanalytics/emsquery/platform/answercache"
)

// Request is a GraphQL request as read, once, from the HTTP request: the parameters gqlgen
// executes, and what the answer's bytes depend on besides them (the cache key's parts).
type Request struct {
	Get         bool
	Accept      string // the Accept header, which chooses the Content-Type
	ContentType string // the answer's, negotiated from Accept
	Query       string
	Operation   string
	Variables   map[string]any
	Extensions  map[string]any
	// Vars and Ext are Variables and Extensions in a canonical form (CanonicalObject), so
	// that the same values written differently are one question.
	Vars, Ext []byte
	ReadStart time.Time
	// Live: the request is a stream's (a subscription over SSE, platform/gqllive).
	Live bool
	// MinCell is the small-cell threshold of the request's key (requestctx.MinCell): answers
	// of the same question differ by it, so it is part of the question's key.
	MinCell int
	// prepared is the operation Prepare made of the request: Execute runs or refuses it as it
	// is, once, rather than checking the document again.
	prepared *Prepared
}

// params are r's parameters for gqlgen's executor.
func (r *Request) params() *graphql.RawParams {
	return &graphql.RawParams{
		Query:         r.Query,
		OperationName: r.Operation,
		Variables:     r.Variables,
		Extensions:    r.Extensions,
		ReadTime:      graphql.TraceTiming{Start: r.ReadStart, End: graphql.Now()},
	}
}

// Key is the cache key of r at route: everything the answer's bytes depend on. That is the
// endpoint, the method (GET and POST are answered alike, but a GET refuses mutations), the
// Accept header (it chooses the Content-Type), the document, the operation name, and the
// variables and extensions (persisted queries) in their canonical forms; and the key's
// small-cell threshold when it has one (contract 6.12.4: the same question, suppressed
// otherwise).
func (r *Request) Key(route string) answercache.Key {
	method := "POST"
	if r.Get {
		method = "GET"
	}
	if r.MinCell > 0 {
		return answercache.KeyOf([]byte(route), []byte(method), []byte(r.Accept), []byte(r.Query), []byte(r.Operation), r.Vars, r.Ext, []byte("min_cell="+strconv.Itoa(r.MinCell)))
	}
	return answercache.KeyOf([]byte(route), []byte(method), []byte(r.Accept), []byte(r.Query), []byte(r.Operation), r.Vars, r.Ext)
}

// CanonicalObject decodes a JSON object (numbers as json.Number, as gqlgen's transports
// decode them) and encodes it again with its keys sorted and no spaces; an absent, null or
// empty object is nil in both forms ({} is what gqlgen makes of no variables too).
func CanonicalObject(raw json.RawMessage) (map[string]any, []byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, nil, err
	}
	if len(m) == 0 {
		return m, nil, nil
	}
	b, err := json.Marshal(m)
	return m, b, err
}

// The response types gqlgen's transports negotiate from Accept (without explicit headers, and
// with application/json as the default): see ResponseContentType.
const (
	MIMEJSON            = "application/json"
	MIMEGraphQLResponse = "application/graphql-response+json"
)

// ResponseContentType is the answer's Content-Type for the Accept header accept, as gqlgen's
// POST and GET transports choose it.
func ResponseContentType(accept string) string {
	if accept == "" {
		return MIMEJSON
	}
	for _, part := range strings.Split(accept, ",") {
		mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mediaType {
		case "*/*", "application/*", MIMEJSON:
			return MIMEJSON
		case MIMEGraphQLResponse:
			return MIMEGraphQLResponse
		}
	}
	return MIMEGraphQLResponse
}

// statusFor is the status of a request error, as gqlgen's transports give it: 422 (400 with
// application/graphql-response+json) for a protocol error (parse, validation, our limits), 200
// otherwise.
func statusFor(contentType string, errs gqlerror.List) int {
	if errcode.GetErrorKind(errs) != errcode.KindProtocol {
		return http.StatusOK
	}
	if contentType == MIMEGraphQLResponse {
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}
