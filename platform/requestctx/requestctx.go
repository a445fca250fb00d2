// Package requestctx carries per-request facts through context.Context: the request id, so that
// log lines and error reports written deep in a resolver name the request they belong to, and
// the name of the API key the request was let in with, so that the database shares its
// connections fairly between keys without knowing of HTTP or keys.
package requestctx

import (
	"context"
	"net/netip"
)

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

// Grant is what the key check let a request in with, for work that outlasts the check: a live
// answer (contract 6.11) streams for hours, and its key may be revoked meanwhile.
type Grant interface {
	// InForce says whether the key is still in force with the request's scope (a reload of
	// the keys file may have removed it or its scope).
	InForce() bool
	// MaxStreams is the key's max_streams (0: no bound of its own; LIMITS__MAX_STREAMS_PER_KEY
	// bounds it).
	MaxStreams() int
	// LeaveInFlight stops counting the request in its key's max_in_flight: a stream counts
	// in max_streams instead, for as long as it lasts.
	LeaveInFlight()
}

type grantKey struct{}

// WithGrant returns ctx carrying the request's grant.
func WithGrant(ctx context.Context, g Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, g)
}

// GrantOf returns the grant carried by ctx, or nil (no key check: tests, internal work).
func GrantOf(ctx context.Context) Grant {
	g, _ := ctx.Value(grantKey{}).(Grant)
	return g
}

type clientAddressKey struct{}

// WithClientAddress returns ctx carrying the request's client address: its connection's peer,
// or the client a trusted proxy names (platform/clientaddr).
func WithClientAddress(ctx context.Context, addr netip.Addr) context.Context {
	return context.WithValue(ctx, clientAddressKey{}, addr)
}

// ClientAddress returns the client address carried by ctx; not ok when none is.
func ClientAddress(ctx context.Context) (netip.Addr, bool) {
	addr, ok := ctx.Value(clientAddressKey{}).(netip.Addr)
	return addr, ok
}

type minCellKey struct{}

// WithMinCell returns ctx carrying the small-cell threshold of the request's key (its min_cell
// in the keys file, contract 6.12.4): the fields that suppress small counts take it, the answer
// cache keeps such a key's answers apart, and a key with a threshold above 1 may use only some
// fields.
func WithMinCell(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, minCellKey{}, n)
}

// MinCell returns the key's small-cell threshold carried by ctx, or 0.
func MinCell(ctx context.Context) int {
	n, _ := ctx.Value(minCellKey{}).(int)
	return n
}
