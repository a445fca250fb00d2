// Package requestctx carries per-request facts through context.Context: the request id, so that
// log lines and error reports written deep in a resolver name the request they belong to, and
// the name of the API key the request was let in with, so that the database shares its
// connections fairly between keys without knowing of HTTP or keys.
package requestctx

import "context"

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id carried by ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

type keyNameKey struct{}

// WithKeyName returns ctx carrying the name of the request's API key (never the key).
func WithKeyName(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, keyNameKey{}, name)
}

// KeyName returns the name of the API key carried by ctx, or "" (no key: internal work).
func KeyName(ctx context.Context) string {
	name, _ := ctx.Value(keyNameKey{}).(string)
	return name
}
