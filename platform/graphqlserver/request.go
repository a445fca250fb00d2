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
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// CheckRequest is the Fiber middleware that answers a GraphQL request that is not one, before
// gqlgen reads it: a method other than GET and POST (405), a POST whose Content-Type is not
// application/json or whose body is compressed (415), an empty body, a body that is not one JSON
// object with the GraphQL-over-HTTP parameters of the right JSON types, or a GET with parameters
// that do not decode (400). Each gets a GraphQL errors body with BAD_USER_INPUT and a message that says what
// to send instead. gqlgen would answer most of these without a code (which the error presenter
// would turn into INTERNAL), some with the whole body echoed in the message.
func CheckRequest(c *fiber.Ctx) error {
	switch c.Method() {
	case fiber.MethodPost:
		return checkGraphQLPost(c)
	case fiber.MethodGet:
		return checkGraphQLGet(c)
	default:
		c.Set(fiber.HeaderAllow, "GET, POST")
		return graphQLRefusal(c, fiber.StatusMethodNotAllowed,
			"method %s is not allowed on a GraphQL path: send the query with POST (Content-Type: application/json) or GET", c.Method())
	}
}

const graphQLBodyHint = `send a JSON object such as {"query": "{ records_count { count } }", "variables": {}}`

func checkGraphQLPost(c *fiber.Ctx) error {
	ct := c.Get(fiber.HeaderContentType)
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != fiber.MIMEApplicationJSON {
		if ct == "" {
			return graphQLRefusal(c, fiber.StatusUnsupportedMediaType, "no Content-Type: send the request as application/json")
		}
		return graphQLRefusal(c, fiber.StatusUnsupportedMediaType, "Content-Type %q is not supported: send the request as application/json", shortText(ct))
	}
	if enc := c.Get(fiber.HeaderContentEncoding); enc != "" && !strings.EqualFold(enc, "identity") {
		return graphQLRefusal(c, fiber.StatusUnsupportedMediaType, "Content-Encoding %q is not supported: send the body uncompressed", shortText(enc))
	}
	// The body as received: Fiber's c.Body() would decompress it, without a bound.
	if err := checkGraphQLBody(c.Request().Body()); err != nil {
		return graphQLRefusal(c, fiber.StatusBadRequest, "%s", err.Error())
	}
	return c.Next()
}

// graphQLParams are the GraphQL-over-HTTP parameters of a POST body, as sent.
type graphQLParams struct {
	Query         json.RawMessage `json:"query"`
	OperationName json.RawMessage `json:"operationName"`
	Variables     json.RawMessage `json:"variables"`
	Extensions    json.RawMessage `json:"extensions"`
}

// checkGraphQLBody checks that body is one JSON object whose GraphQL-over-HTTP parameters have
// their JSON types: query and operationName strings, variables and extensions objects (each may
// be null or absent). Other members are ignored, as gqlgen ignores them.
func checkGraphQLBody(body []byte) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return errors.New("the request body is empty: " + graphQLBodyHint)
	case trimmed[0] == '[':
		return errors.New("the request body is a JSON array; batches of queries are not supported: " + graphQLBodyHint)
	case trimmed[0] != '{':
		if !json.Valid(body) {
			return fmt.Errorf("the request body is not JSON: %s", graphQLBodyHint)
		}
		return errors.New("the request body is not a JSON object: " + graphQLBodyHint)
	}
	var p graphQLParams
	// A body Unmarshal takes is one a Decoder takes with nothing after it; Unmarshal does it
	// without a Decoder's allocations, on every request. A body it refuses is decoded again
	// to say why.
	if json.Unmarshal(body, &p) != nil {
		p = graphQLParams{}
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("the request body is not valid JSON (%s): %s", jsonProblem(err), graphQLBodyHint)
		}
		if _, err := dec.Token(); err != io.EOF {
			return errors.New("the request body has more after its JSON object: " + graphQLBodyHint)
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
			return fmt.Errorf("%s must be %s (or null), not %s", m.name, m.what, jsonKind(m.value))
		}
	}
	return nil
}

func checkGraphQLGet(c *fiber.Ctx) error {
	vals, err := url.ParseQuery(string(c.Request().URI().QueryString()))
	if err != nil {
		return graphQLRefusal(c, fiber.StatusBadRequest, "the query string does not decode: %s", shortText(err.Error()))
	}
	for _, name := range []string{"variables", "extensions"} {
		v := strings.TrimSpace(vals.Get(name))
		if v == "" || v == "null" {
			continue
		}
		if v[0] != '{' || !json.Valid([]byte(v)) {
			return graphQLRefusal(c, fiber.StatusBadRequest, "query parameter %s must be a URL-encoded JSON object", name)
		}
	}
	return c.Next()
}

// graphQLRefusal answers with a GraphQL errors body whose code is BAD_USER_INPUT.
func graphQLRefusal(c *fiber.Ctx, status int, format string, args ...any) error {
	return c.Status(status).JSON(fiber.Map{
		"errors": []fiber.Map{{"message": fmt.Sprintf(format, args...), "extensions": fiber.Map{"code": apierr.BadUserInput}}},
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
