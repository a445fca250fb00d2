package gqlhttp

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
	"unsafe"

	"github.com/gofiber/fiber/v2"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/gqlexec"
	"github.com/emsanalytics/emsquery/platform/requestbody"
)

// request is a GraphQL request as read, once, from the HTTP request: the parameters gqlgen
// executes, and what the answer's bytes depend on besides them (the cache key's parts).
type request struct {
	*gqlexec.Request
	ifNoneMatch string // the ETags the client holds
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
func readRequest(c *fiber.Ctx, bodies *plainBodies) (*request, error) {
	start := time.Now()
	var (
		r   *request
		err error
	)
	switch c.Method() {
	case fiber.MethodPost:
		r, err = readPost(c, bodies)
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
		case errors.Is(err, requestbody.ErrBodyWithheld):
			refuseWith(c, fiber.StatusUnauthorized, apierr.Unauthenticated, err.Error())
		case errors.As(err, &ref):
			refuse(c, ref.status, "%s", ref.msg)
		default:
			refuse(c, fiber.StatusBadRequest, "%s", err.Error())
		}
		return nil, nil
	}
	r.ReadStart = start
	r.Accept = c.Get(fiber.HeaderAccept)
	r.ifNoneMatch = c.Get(fiber.HeaderIfNoneMatch)
	r.ContentType = gqlexec.ResponseContentType(r.Accept)
	return r, nil
}

// refusalError is a request refused with a status of its own.
type refusalError struct {
	status int
	msg    string
}

func (e *refusalError) Error() string { return e.msg }

const graphQLBodyHint = `send a JSON object such as {"query": "{ records_count { count } }", "variables": {}}`

func readPost(c *fiber.Ctx, bodies *plainBodies) (*request, error) {
	ct := c.Get(fiber.HeaderContentType)
	if !isJSON(ct) {
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
	body, err := requestbody.ReadBody(c)
	if err != nil {
		return nil, err
	}
	if r := bodies.request(body.Bytes()); r != nil {
		body.Release()
		return r, nil
	}
	p, err := decodeGraphQLBody(body.Bytes())
	body.Release()
	if err != nil {
		return nil, err
	}
	return p.request()
}

// isJSON says whether the Content-Type ct is application/json, with parameters or not: the
// usual header is compared as it is, without ParseMediaType's map of parameters.
func isJSON(ct string) bool {
	if strings.EqualFold(ct, fiber.MIMEApplicationJSON) {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == fiber.MIMEApplicationJSON
}

// plainParams are the GraphQL-over-HTTP parameters of a body whose query and operationName are
// strings (or null), as decodePlainBody reads them.
type plainParams struct {
	Query         string          `json:"query"`
	OperationName string          `json:"operationName"`
	Variables     json.RawMessage `json:"variables"`
	Extensions    json.RawMessage `json:"extensions"`
}

// decodePlainBody is the request of body when one decoding gives it whole, as almost every
// client sends it: a JSON object whose query and operationName are strings and whose variables
// and extensions are objects (each may be null or absent). It is nil for any other body, which
// decodeGraphQLBody then decodes again to say what is wrong: graphQLParams' raw values need a
// second decoding of each string, a third of the light path's time in reading a request.
func decodePlainBody(body []byte) *request {
	var p plainParams
	if json.Unmarshal(body, &p) != nil {
		return nil
	}
	r := &request{Request: &gqlexec.Request{Query: p.Query, Operation: p.OperationName}}
	if r.objects(p.Variables, p.Extensions) != nil {
		return nil
	}
	return r
}

// plainBodies keeps the query and operation name of recent bodies that have neither variables
// nor extensions, by their bytes: a dashboard sends the same few bodies over and over, and
// decoding one (encoding/json, a few microseconds) was the larger part of reading a light
// request. A body of another kind, or longer than maxKeptBody, is decoded each time. At most
// keptBodies entries of at most twice maxKeptBody bytes each (the body and its query): under
// 5 MiB an endpoint, whatever the callers send. A caller sending ever new bodies only evicts
// others' (which are then decoded again), at one lookup and one insertion a request.
type plainBodies struct {
	kept *lru.Cache[string, plainRequest]
}

// plainRequest is what a kept body asks: a request without variables or extensions, which
// the body may give as empty objects.
type plainRequest struct {
	query, operation     string
	emptyVars, emptyExts bool
}

// request is a new request for p, as decodePlainBody gives it (an empty object a map of its
// own).
func (p plainRequest) request() *request {
	r := &request{Request: &gqlexec.Request{Query: p.query, Operation: p.operation}}
	if p.emptyVars {
		r.Variables = map[string]any{}
	}
	if p.emptyExts {
		r.Extensions = map[string]any{}
	}
	return r
}

const (
	keptBodies  = 1024
	maxKeptBody = 2 << 10
)

func newPlainBodies() *plainBodies {
	kept, err := lru.New[string, plainRequest](keptBodies)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &plainBodies{kept: kept}
}

// request is the request of body when decodePlainBody gives it, from the kept bodies when it
// was decoded before; nil when decodePlainBody gives none.
func (b *plainBodies) request(body []byte) *request {
	if len(body) > maxKeptBody {
		return decodePlainBody(body)
	}
	// A view of the body for the lookup only; a kept key is a copy.
	if p, ok := b.kept.Get(unsafe.String(unsafe.SliceData(body), len(body))); ok {
		return p.request()
	}
	r := decodePlainBody(body)
	if r != nil && len(r.Variables) == 0 && len(r.Extensions) == 0 {
		b.kept.Add(string(body), plainRequest{query: r.Query, operation: r.Operation, emptyVars: r.Variables != nil, emptyExts: r.Extensions != nil})
	}
	return r
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
	r.Get = true
	return r, nil
}

// request decodes the parameters' values, as gqlgen's transports decode them (numbers as
// json.Number), and their canonical forms (gqlexec.CanonicalObject).
func (p graphQLParams) request() (*request, error) {
	r := &request{Request: &gqlexec.Request{}}
	for _, m := range []struct {
		raw json.RawMessage
		to  *string
	}{{p.Query, &r.Query}, {p.OperationName, &r.Operation}} {
		if len(m.raw) > 0 && string(m.raw) != "null" {
			if err := json.Unmarshal(m.raw, m.to); err != nil {
				return nil, fmt.Errorf("the request body is not valid JSON (%s): %s", jsonProblem(err), graphQLBodyHint)
			}
		}
	}
	if err := r.objects(p.Variables, p.Extensions); err != nil {
		return nil, err
	}
	return r, nil
}

// objects sets r's variables and extensions, and their canonical forms, from their JSON.
func (r *request) objects(variables, extensions json.RawMessage) error {
	var err error
	if r.Variables, r.Vars, err = gqlexec.CanonicalObject(variables); err != nil {
		return errors.New("variables must be a JSON object")
	}
	if r.Extensions, r.Ext, err = gqlexec.CanonicalObject(extensions); err != nil {
		return errors.New("extensions must be a JSON object")
	}
	return nil
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
