// Package apierr holds the error codes clients see and maps any error to one of them. It is the
// one place where internal errors become client codes, so a driver message or SQL text never
// leaks to a caller by accident.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Code is a machine-readable error code, sent as extensions.code (GraphQL) or error.code (REST).
type Code string

const (
	BadUserInput       Code = "BAD_USER_INPUT"
	Unauthenticated    Code = "UNAUTHENTICATED"
	Forbidden          Code = "FORBIDDEN"    // a valid key without the route's scope
	RateLimited        Code = "RATE_LIMITED" // a key over its rate (with Retry-After)
	ServiceUnavailable Code = "SERVICE_UNAVAILABLE"
	Internal           Code = "INTERNAL"
	NotFound           Code = "NOT_FOUND"
	PayloadTooLarge    Code = "PAYLOAD_TOO_LARGE"
	Timeout            Code = "TIMEOUT"
	// ResultTooLarge: an answer of more rows than LIMITS__MAX_ROWS, found while reading it.
	ResultTooLarge Code = "RESULT_TOO_LARGE"
)

// Error is an error with a client code and a message safe to show the client.
type Error struct {
	Code    Code
	Message string
	Err     error // the cause, for the log only
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// BadInput reports a request the client must change; the message names what is wrong.
func BadInput(format string, args ...any) *Error {
	return &Error{Code: BadUserInput, Message: fmt.Sprintf(format, args...)}
}

// Unavailable reports that the database cannot serve now; the client may retry.
func Unavailable(cause error) *Error {
	return &Error{Code: ServiceUnavailable, Message: "the database is unavailable; try again later", Err: cause}
}

// TooManyRows reports an answer that has more than max rows, the bound of the setting named
// (LIMITS__MAX_ROWS): the client must narrow the question, as for BAD_USER_INPUT, but only the
// database could tell.
func TooManyRows(setting string, max int) *Error {
	return &Error{Code: ResultTooLarge, Message: fmt.Sprintf(
		"the answer has more than %s=%d rows; narrow it (dates, filters, fewer or coarser columns)", setting, max)}
}

// TimedOut reports that a query ran longer than the database's statement timeout
// (LIMITS__STATEMENT_TIMEOUT) allows, when its value is not at hand; see StatementTimedOut.
func TimedOut(cause error) *Error {
	return &Error{Code: Timeout, Message: StatementTimeoutMessage, Err: cause}
}

// StatementTimedOut reports a query stopped at LIMITS__STATEMENT_TIMEOUT (d).
func StatementTimedOut(d time.Duration, cause error) *Error {
	return &Error{Code: Timeout, Message: "the query ran longer than " + setting("LIMITS__STATEMENT_TIMEOUT", d) + " allows; " + narrowIt, Err: cause}
}

// RequestTimedOut reports a request stopped at LIMITS__REQUEST_TIMEOUT (d).
func RequestTimedOut(d time.Duration, cause error) *Error {
	return &Error{Code: Timeout, Message: "the request took longer than " + setting("LIMITS__REQUEST_TIMEOUT", d) + " allows; " + narrowIt, Err: cause}
}

// ExportTimedOut reports an export stopped at LIMITS__EXPORT_TIMEOUT (d).
func ExportTimedOut(d time.Duration, cause error) *Error {
	return &Error{Code: Timeout, Message: "the export ran longer than " + setting("LIMITS__EXPORT_TIMEOUT", d) + " allows; export a shorter period", Err: cause}
}

// The TIMEOUT messages for when the limit's value is not at hand; they still name the setting.
const (
	StatementTimeoutMessage = "the query ran longer than LIMITS__STATEMENT_TIMEOUT allows; " + narrowIt
	RequestTimeoutMessage   = "the request took longer than LIMITS__REQUEST_TIMEOUT allows; " + narrowIt
	narrowIt                = "narrow it (dates, filters) or try again later"
)

// setting is "NAME=<seconds>s", as the settings are given in seconds.
func setting(name string, d time.Duration) string {
	return name + "=" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// InternalMessage is all a client learns of an unexpected error; the detail goes to the log.
const InternalMessage = "internal error; the service log has the details under this request id"

// Classify returns the code and client message for err. Unexpected errors become Internal with
// a generic message.
func Classify(err error) (Code, string) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, e.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The request's own deadline (LIMITS__REQUEST_TIMEOUT) passed.
		return Timeout, RequestTimeoutMessage
	}
	return Internal, InternalMessage
}

// Status is the HTTP status for a code on the REST endpoints.
func Status(code Code) int {
	switch code {
	case BadUserInput, ResultTooLarge:
		return http.StatusBadRequest
	case Unauthenticated:
		return http.StatusUnauthorized
	case Forbidden:
		return http.StatusForbidden
	case RateLimited:
		return http.StatusTooManyRequests
	case ServiceUnavailable:
		return http.StatusServiceUnavailable
	case NotFound:
		return http.StatusNotFound
	case PayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case Timeout:
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}

// Body is the REST error body: {"error":{"code":"...","message":"..."}}.
type Body struct {
	Error BodyError `json:"error"`
}

type BodyError struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// NewBody returns the REST error body for code and message.
func NewBody(code Code, message string) Body {
	return Body{Error: BodyError{Code: code, Message: message}}
}
