package graphqlserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gofiber/fiber/v2"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/httpbridge"
)

// request is a GraphQL request as read, once, from the HTTP request: the parameters gqlgen
// executes, and what the answer's bytes depend on besides them (the cache key's parts).
type request struct {
	get         bool
	accept      string // the Accept header, which chooses the Content-Type
	ifNoneMatch string // the ETags the client holds
	contentType string // the answer's, negotiated from accept
	query       string
	operation   string
	variables   map[string]any
	extensions  map[string]any
	// vars and ext are variables and extensions in a canonical form (keys sorted, numbers as
	// written), so that the same values written differently are one question.
	vars, ext []byte
	readStart time.Time
	// live: the request is a stream's (a subscription over SSE, live.go).
	live bool
	// minCell is the small-cell threshold of the request's key (requestctx.MinCell): answers
	// of the same question differ by it, so it is part of the question's key.
	minCell int
	// prepared is the operation that subscribe prepared for a request it did not take (a
	// query, or a document that does not validate): execute runs or refuses it as it is, once,
	// rather than checking the document again.
	prepared *prepared
}

// prepared is what gqlgen's executor made of a request's parameters.
type prepared struct {
	rc   *graphql.OperationContext
	errs gqlerror.List
}

// readRequest reads the GraphQL request of c, or answers c with the refusal of one that is
// not one (and returns nil): a method other than GET and POST (405), a POST whose Content-Type
// is not application/json or whose body is compressed (415), an empty body, a body that is not
// one JSON object with the GraphQL-over-HTTP parameters of the right JSON types, or a GET with
// parameters that do not decode (400). Each gets a GraphQL errors body with BAD_USER_INPUT and
// a message that says what to send instead, never a copy of what was sent. A body that cannot
// be read (over APP__MAX_BODY_BYTES, not whole within APP__READ_TIMEOUT, cut) is not answered
// here: its error (a *fiber.Error) is returned, for the server's error handler, which answers
// as it does when the HTTP layer itself refuses a request.
func readRequest(c *fiber.Ctx) (*request, error) {
	start := time.Now()
	var (
		r   *request
		err error
	)
	switch c.Method() {
	case fiber.MethodPost:
		r, err = readPost(c)
	case fiber.MethodGet:
		r, err = readGet(c)
	default:
		c.Set(fiber.HeaderAllow, "GET, POST")
		refuse(c, fiber.StatusMethodNotAllowed,
			"method %s is not allowed on a GraphQL path: send the query with POST (Content-Type: application/json) or GET", c.Method())
		return nil, nil
	}
	if err != nil {
		var (
			ref *refusalError
			fe  *fiber.Error
		)
		switch {
		case errors.As(err, &fe):
			return nil, fe
		case errors.Is(err, httpbridge.ErrBodyWithheld):
			refuseWith(c, fiber.StatusUnauthorized, apierr.Unauthenticated, err.Error())
		case errors.As(err, &ref):
			refuse(c, ref.status, "%s", ref.msg)
		default:
			refuse(c, fiber.StatusBadRequest, "%s", err.Error())
		}
		return nil, nil
	}
	r.readStart = start
	r.accept = c.Get(fiber.HeaderAccept)
	r.ifNoneMatch = c.Get(fiber.HeaderIfNoneMatch)
	r.contentType = responseContentType(r.accept)
	return r, nil
}

// refusalError is a request refused with a status of its own.
type refusalError struct {
	status int
	msg    string
}

func (e *refusalError) Error() string { return e.msg }

const graphQLBodyHint = `send a JSON object such as {"query": "{ records_count { count } }", "variables": {}}`

func readPost(c *fiber.Ctx) (*request, error) {
	ct := c.Get(fiber.HeaderContentType)
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != fiber.MIMEApplicationJSON {
		if ct == "" {
			return nil, &refusalError{fiber.StatusUnsupportedMediaType, "no Content-Type: send the request as application/json"}
		}
		return nil, &refusalError{fiber.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q is not supported: send the request as application/json", shortText(ct))}
	}
	if enc := c.Get(fiber.HeaderContentEncoding); enc != "" && !strings.EqualFold(enc, "identity") {
		return nil, &refusalError{fiber.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q is not supported: send the body uncompressed", shortText(enc))}
	}
	// The body as received (Fiber's c.Body() would decompress it, without a bound), read as it
	// arrives. decodeGraphQLBody keeps no reference to it.
	body, err := httpbridge.ReadBody(c)
	if err != nil {
		return nil, err
	}
	p, err := decodeGraphQLBody(body.Bytes())
	body.Release()
	if err != nil {
		return nil, err
	}
	return p.request()
}

// graphQLParams are the GraphQL-over-HTTP parameters of a POST body, as sent.
type graphQLParams struct {
	Query         json.RawMessage `json:"query"`
	OperationName json.RawMessage `json:"operationName"`
	Variables     json.RawMessage `json:"variables"`
	Extensions    json.RawMessage `json:"extensions"`
}

// decodeGraphQLBody decodes body, which must be one JSON object whose GraphQL-over-HTTP
// parameters have their JSON types: query and operationName strings, variables and extensions
// objects (each may be null or absent). Other members are ignored, as gqlgen ignores them.
func decodeGraphQLBody(body []byte) (graphQLParams, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return graphQLParams{}, errors.New("the request body is empty: " + graphQLBodyHint)
	case trimmed[0] == '[':
		return graphQLParams{}, errors.New("the request body is a JSON array; batches of queries are not supported: " + graphQLBodyHint)
	case trimmed[0] != '{':
		if !json.Valid(body) {
			return graphQLParams{}, fmt.Errorf("the request body is not JSON: %s", graphQLBodyHint)
		}
		return graphQLParams{}, errors.New("the request body is not a JSON object: " + graphQLBodyHint)
	}
	var p graphQLParams
	// A body Unmarshal takes is one a Decoder takes with nothing after it; Unmarshal does it
	// without a Decoder's allocations, on every request. A body it refuses is decoded again
	// to say why.
	if json.Unmarshal(body, &p) != nil {
		p = graphQLParams{}
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&p); err != nil {
			return graphQLParams{}, fmt.Errorf("the request body is not valid JSON (%s): %s", jsonProblem(err), graphQLBodyHint)
		}
		if _, err := dec.Token(); err != io.EOF {
			return graphQLParams{}, errors.New("the request body has more after its JSON object: " + graphQLBodyHint)
		}
	}
	for _, m := range []struct {
		name  string
		value json.RawMessage
		want  byte
		what  string
	}{
		{"query", p.Query, '"', "a string"},
		{"operationName", p.OperationName, '"', "a string"},
		{"variables", p.Variables, '{', "a JSON object"},
		{"extensions", p.Extensions, '{', "a JSON object"},
	} {
		if len(m.value) > 0 && m.value[0] != m.want && string(m.value) != "null" {
			return graphQLParams{}, fmt.Errorf("%s must be %s (or null), not %s", m.name, m.what, jsonKind(m.value))
		}
	}
	return p, nil
}

func readGet(c *fiber.Ctx) (*request, error) {
	vals, err := url.ParseQuery(string(c.Request().URI().QueryString()))
	if err != nil {
		return nil, fmt.Errorf("the query string does not decode: %s", shortText(err.Error()))
	}
	p := graphQLParams{}
	if q := vals.Get("query"); q != "" {
		p.Query, _ = json.Marshal(q)
	}
	if o := vals.Get("operationName"); o != "" {
		p.OperationName, _ = json.Marshal(o)
	}
	for _, m := range []struct {
		name string
		to   *json.RawMessage
	}{{"variables", &p.Variables}, {"extensions", &p.Extensions}} {
		v := strings.TrimSpace(vals.Get(m.name))
		if v == "" || v == "null" {
			continue
		}
		if v[0] != '{' || !json.Valid([]byte(v)) {
			return nil, fmt.Errorf("query parameter %s must be a URL-encoded JSON object", m.name)
		}
		*m.to = json.RawMessage(v)
	}
	r, err := p.request()
	if err != nil {
		return nil, err
	}
	r.get = true
	return r, nil
}

// request decodes the parameters' values, as gqlgen's transports decode them (numbers as
// json.Number), and their canonical forms.
func (p graphQLParams) request() (*request, error) {
	r := &request{}
	for _, m := range []struct {
		raw json.RawMessage
		to  *string
	}{{p.Query, &r.query}, {p.OperationName, &r.operation}} {
		if len(m.raw) > 0 && string(m.raw) != "null" {
			if err := json.Unmarshal(m.raw, m.to); err != nil {
				return nil, fmt.Errorf("the request body is not valid JSON (%s): %s", jsonProblem(err), graphQLBodyHint)
			}
		}
	}
	var err error
	if r.variables, r.vars, err = canonicalObject(p.Variables); err != nil {
		return nil, errors.New("variables must be a JSON object")
	}
	if r.extensions, r.ext, err = canonicalObject(p.Extensions); err != nil {
		return nil, errors.New("extensions must be a JSON object")
	}
	return r, nil
}

// canonicalObject decodes a JSON object (numbers as json.Number) and encodes it again with its
// keys sorted and no spaces; an absent, null or empty object is nil in both forms ({} is what
// gqlgen makes of no variables too).
func canonicalObject(raw json.RawMessage) (map[string]any, []byte, error) {
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

// refuse answers with a GraphQL errors body whose code is BAD_USER_INPUT.
func refuse(c *fiber.Ctx, status int, format string, args ...any) {
	refuseWith(c, status, apierr.BadUserInput, fmt.Sprintf(format, args...))
}

// refuseWith answers c with status and a GraphQL errors body of one error, code and message.
func refuseWith(c *fiber.Ctx, status int, code apierr.Code, message string) {
	_ = c.Status(status).JSON(fiber.Map{
		"errors": []fiber.Map{{"message": message, "extensions": fiber.Map{"code": code}}},
	})
}

// jsonProblem describes a decoding error without quoting the body.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("%s at byte %d", syn.Error(), syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s must not be %s", typ.Field, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "it ends too early"
	}
	return shortText(err.Error())
}

func jsonKind(v json.RawMessage) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// shortText bounds a client-supplied text in a message.
func shortText(s string) string {
	const max = 100
	if utf8.RuneCountInString(s) > max {
		return string([]rune(s)[:max]) + "…"
	}
	return s
}
