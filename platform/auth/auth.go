// Package auth checks API keys (specification section 5, contract sections 4 and 6.7): the
// single AUTHENTICATION__API_KEY, valid for every scope, and the named keys of
// AUTHENTICATION__API_KEYS_FILE with their scopes and rate limits, read again on SIGHUP and when
// the file changes (reload.go). Keys are kept only as SHA-256 digests and compared in constant
// time; no key, digest or hash is ever logged.
package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/time/rate"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/requestctx"
	"github.com/emsanalytics/emsquery/platform/responsebody"
)

// inFlightRetryAfter is the Retry-After of a request refused for its key's max_in_flight: when
// one of the key's requests ends is not known; a second is the order of a slow one.
const inFlightRetryAfter = 1

// ExportHeader is checked by the CSV export in addition to the configured header.
const ExportHeader = "SERVICE-X-API-KEY"

// key is one key in force.
type key struct {
	name   string
	digest [sha256.Size]byte
	scopes scopeSet
	rate   float64 // requests per second; 0: no limit
	burst  int
	// limiter is shared by the key's requests; a reload keeps it for a key of the same name.
	limiter *rate.Limiter
	// maxInFlight bounds the key's requests running at once (0: no bound); running counts them
	// (a reload keeps it for a key of the same name; nil for AUTHENTICATION__API_KEY).
	maxInFlight int
	running     *atomic.Int64
	// maxStreams bounds the key's live answers open at once (0: no bound of its own).
	maxStreams int
	// minCell is the key's small-cell threshold (0: none of its own); above 1 the key may use
	// only what SmallCellKey allows.
	minCell int
}

// SmallCellKey says whether a key's min_cell confines it (contract 6.12.4): with a threshold
// above 1 a key may use only the fields that suppress small counts or hold none, so the serve
// endpoint and the export, whose answers are counts and records, refuse it.
func SmallCellKey(minCell int) bool { return minCell > 1 }

// keySet is the keys in force. It is never changed once published: a reload builds a new one.
type keySet struct {
	keys     []key
	fromFile int // how many came from the file (the rest: AUTHENTICATION__API_KEY)
}

// find returns the key whose digest is presented's, or nil. It compares presented's digest with
// every key's, in constant time and without stopping at a match, so that the time taken tells
// neither the key nor which key matched (only how many keys there are). Digests have a fixed
// length, so the key's length does not show either.
func (s *keySet) find(presented string) *key {
	if presented == "" {
		return nil
	}
	return s.findDigest(sha256.Sum256([]byte(presented)))
}

func (s *keySet) findDigest(d [sha256.Size]byte) *key {
	found := -1
	for i := range s.keys {
		found = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(d[:], s.keys[i].digest[:]), i, found)
	}
	if found < 0 {
		return nil
	}
	return &s.keys[found]
}

func (s *keySet) byName(name string) *key {
	for i := range s.keys {
		if s.keys[i].name == name {
			return &s.keys[i]
		}
	}
	return nil
}

// Checker checks the keys of requests. Its keys can be replaced while it serves (reload.go).
type Checker struct {
	header   string
	bearerOK bool
	log      *slog.Logger
	file     string
	poll     time.Duration // 0: reload on SIGHUP only
	fallback *key          // AUTHENTICATION__API_KEY; nil when unset
	keys     atomic.Pointer[keySet]
	watch    *watcher
	failures *failureLimiter // AUTHENTICATION__FAILURES_PER_MINUTE

	fileState      atomic.Pointer[KeysFileState] // nil: the last reload worked
	reloadFailures metric.Int64Counter
}

// Options are the AUTHENTICATION__* settings.
type Options struct {
	Header            string        // AUTHENTICATION__API_KEY_HEADER
	APIKey            string        // AUTHENTICATION__API_KEY, valid for every scope; empty: none
	KeysFile          string        // AUTHENTICATION__API_KEYS_FILE; empty: none
	PollInterval      time.Duration // AUTHENTICATION__API_KEYS_POLL_INTERVAL; 0: reload on SIGHUP only
	FailuresPerMinute int           // AUTHENTICATION__FAILURES_PER_MINUTE; 0: no bound
}

// MinKeyLength is the length of AUTHENTICATION__API_KEY below which the service warns at
// start-up.
const MinKeyLength = 32

// NewChecker returns the checker for the settings, with the keys file read (an error names
// AUTHENTICATION__API_KEYS_FILE and stops the start) and watched for changes and SIGHUP until the
// cleanup. A key in AUTHENTICATION__API_KEY shorter than MinKeyLength is accepted (the
// specification has a short default) with a warning that never shows the key. mp counts failed
// reloads of the keys file.
func NewChecker(a Options, log *slog.Logger, mp metric.MeterProvider) (*Checker, func(), error) {
	reloadFailures, err := newReloadFailures(mp)
	if err != nil {
		return nil, nil, err
	}
	if a.APIKey != "" && len(a.APIKey) < MinKeyLength {
		log.Warn("AUTHENTICATION__API_KEY is shorter than 32 characters; choose a long random value",
			"min_length", MinKeyLength)
	}
	h := a.Header
	c := &Checker{
		header:   h,
		bearerOK: strings.EqualFold(h, fiber.HeaderAuthorization),
		log:      log,
		file:     strings.TrimSpace(a.KeysFile),
		poll:     a.PollInterval,
		failures: newFailureLimiter(int(a.FailuresPerMinute), log),

		reloadFailures: reloadFailures,
	}
	if k := a.APIKey; k != "" {
		c.fallback = &key{name: DefaultKeyName, digest: sha256.Sum256([]byte(k)), scopes: scopeSet(1<<len(AllScopes) - 1)}
	}
	var seen [sha256.Size]byte
	if c.file == "" {
		set := &keySet{}
		if c.fallback != nil {
			set.keys = append(set.keys, *c.fallback)
		}
		c.keys.Store(set)
		log.Info("API key: AUTHENTICATION__API_KEY (every scope)")
	} else {
		set, digest, err := c.load()
		if err != nil {
			return nil, nil, fmt.Errorf("AUTHENTICATION__API_KEYS_FILE: %s: %w", c.file, err)
		}
		c.keys.Store(set)
		seen = digest
		log.Info("API keys read", "file", c.file, "keys", set.fromFile, "names", set.names(),
			"default_key", c.fallback != nil, "poll_interval", c.poll.String())
		if len(set.keys) == 0 {
			log.Warn("no API key in force: the keys file lists none and AUTHENTICATION__API_KEY is not set; every request that needs a key is refused until the file lists one",
				"file", c.file)
		}
	}
	c.watch = startWatcher(c, seen)
	return c, c.watch.stop, nil
}

func (s *keySet) names() []string {
	out := make([]string, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, k.name)
	}
	return out
}

// Header is the configured header name.
func (c *Checker) Header() string { return c.header }

// presented is the key the request carries in the configured header. With the Authorization
// header, both "<key>" and "Bearer <key>" are accepted.
func (c *Checker) presented(ctx *fiber.Ctx) string {
	v := ctx.Get(c.header)
	if c.bearerOK {
		if scheme, rest, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "Bearer") {
			v = strings.TrimSpace(rest)
		}
	}
	return v
}

// CarriesKey says whether the request headers h carry a valid key, of any scope, in the
// configured header. It is asked before any of the request's body is read (a body that comes
// without a valid key is not read at all: platform/requestbody's HeaderReceived), so it counts no
// failure and checks no address: the key check of the route (Require) does both, and refuses.
func (c *Checker) CarriesKey(h *fasthttp.RequestHeader) bool {
	v := h.Peek(c.header)
	if c.bearerOK {
		if scheme, rest, ok := bytes.Cut(v, []byte(" ")); ok && bytes.EqualFold(scheme, []byte("Bearer")) {
			v = bytes.TrimSpace(rest)
		}
	}
	if len(v) == 0 {
		return false
	}
	return c.keys.Load().findDigest(sha256.Sum256(v)) != nil
}

// Refusal is an answer to a request the checker does not let through: 401 UNAUTHENTICATED,
// 403 FORBIDDEN or 429 RATE_LIMITED, with a message for the client.
type Refusal struct {
	Status  int
	Code    apierr.Code
	Message string
}

// Refuse writes a refusal in the body the route uses: a GraphQL errors body on GraphQL paths,
// the REST body elsewhere.
type Refuse func(*fiber.Ctx, Refusal) error

// keyNameLocal is the Fiber local that holds the name of the request's key.
const keyNameLocal = "emsquery.api_key.name"

// KeyName is the name of the key the request was checked with ("" before the check, or when it
// carried no valid key): for the access line and the request metrics. Never the key.
func KeyName(ctx *fiber.Ctx) string {
	name, _ := ctx.Locals(keyNameLocal).(string)
	return name
}

// Require returns middleware that lets a request through only with a valid key that has scope
// and is within its rate. The export (ScopeExport) also needs the same key in
// SERVICE-X-API-KEY (one header does both when it is the configured header). CORS preflights
// never carry keys, so they pass; the CORS middleware answers them before any handler runs.
func (c *Checker) Require(scope Scope, refuse Refuse) fiber.Handler {
	return func(ctx *fiber.Ctx) error {
		if ctx.Method() == fiber.MethodOptions {
			return ctx.Next()
		}
		ip := remoteIP(ctx)
		if wait := c.failures.blocked(ip); wait > 0 {
			return c.refuseGuesser(ctx, refuse, wait)
		}
		set := c.keys.Load()
		k := set.find(c.presented(ctx))
		if k == nil || scope == ScopeExport && !strings.EqualFold(c.header, ExportHeader) && set.find(ctx.Get(ExportHeader)) != k {
			c.failures.fail(ip)
			return refuse(ctx, Refusal{Status: fiber.StatusUnauthorized, Code: apierr.Unauthenticated, Message: c.unauthorizedMessage(ctx, scope)})
		}
		ctx.Locals(keyNameLocal, k.name)
		if !k.scopes.has(scope) {
			return refuse(ctx, Refusal{Status: fiber.StatusForbidden, Code: apierr.Forbidden, Message: fmt.Sprintf(
				"the API key %q may not use %s (scope %s); its scopes: %s", k.name, scopePath(scope), scope, strings.Join(k.scopes.names(), ", "))})
		}
		if SmallCellKey(k.minCell) && (scope == ScopeServe || scope == ScopeExport) {
			return refuse(ctx, Refusal{Status: fiber.StatusForbidden, Code: apierr.Forbidden, Message: fmt.Sprintf(
				"the API key %q has min_cell %d: it may use only the EMS performance measures, station_resources and resources on /graphql, and /lookups/graphql, not %s",
				k.name, k.minCell, scopePath(scope))})
		}
		if wait := k.wait(time.Now()); wait > 0 {
			secs := int(math.Ceil(wait.Seconds()))
			ctx.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
			return refuse(ctx, Refusal{Status: fiber.StatusTooManyRequests, Code: apierr.RateLimited, Message: fmt.Sprintf(
				"the API key %q is over its rate limit (%s requests per second, burst %d); retry after %d s",
				k.name, strconv.FormatFloat(k.rate, 'f', -1, 64), k.burst, secs)})
		}
		// The key's name goes with the request's context: the database shares its connections
		// fairly between keys (platform/database); and what it was let in with, for a stream
		// that outlasts this check.
		g := &grant{c: c, digest: k.digest, scope: scope, maxStreams: k.maxStreams}
		uctx := requestctx.WithGrant(requestctx.WithKeyName(ctx.UserContext(), k.name), g)
		if k.minCell > 0 {
			uctx = requestctx.WithMinCell(uctx, k.minCell)
		}
		ctx.SetUserContext(uctx)
		if k.maxInFlight <= 0 || k.running == nil {
			return ctx.Next()
		}
		return c.inFlight(ctx, k, g, refuse)
	}
}

// grant is a request's requestctx.Grant.
type grant struct {
	c          *Checker
	digest     [sha256.Size]byte
	scope      Scope
	maxStreams int
	leave      atomic.Pointer[func()] // ends the request's count in max_in_flight; nil when not counted
}

// InForce looks the key up by its digest in the keys in force now: removed, replaced by another
// key of the same name, or without the scope, it is not.
func (g *grant) InForce() bool {
	set := g.c.keys.Load()
	for i := range set.keys {
		if set.keys[i].digest == g.digest {
			return set.keys[i].scopes.has(g.scope)
		}
	}
	return false
}

func (g *grant) MaxStreams() int { return g.maxStreams }

func (g *grant) LeaveInFlight() {
	if f := g.leave.Swap(nil); f != nil {
		(*f)()
	}
}

// refuseGuesser answers a request from an address over AUTHENTICATION__FAILURES_PER_MINUTE.
func (c *Checker) refuseGuesser(ctx *fiber.Ctx, refuse Refuse, wait time.Duration) error {
	secs := int(math.Ceil(wait.Seconds()))
	ctx.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
	return refuse(ctx, Refusal{Status: fiber.StatusTooManyRequests, Code: apierr.RateLimited, Message: fmt.Sprintf(
		"too many requests with a missing or wrong API key from this address (AUTHENTICATION__FAILURES_PER_MINUTE=%d); no key is checked for it until the minute is over: retry after %d s",
		c.failures.limit, secs)})
}

// Valid says whether the request carries a valid key, of any scope: for routes that anyone may
// call and that show more to a key holder (/v1/healthz). A wrong key counts against the
// address's AUTHENTICATION__FAILURES_PER_MINUTE like any other (else such a route would be a
// way around the bound); no key at all does not (health probes send none). From an address
// over the bound, no key is checked: false.
func (c *Checker) Valid(ctx *fiber.Ctx) bool {
	presented := c.presented(ctx)
	if presented == "" {
		return false
	}
	ip := remoteIP(ctx)
	if c.failures.blocked(ip) > 0 {
		return false
	}
	if c.keys.Load().find(presented) == nil {
		c.failures.fail(ip)
		return false
	}
	return true
}

// remoteIP is the request's client address: the connection's peer, or the client a trusted
// proxy names (APP__TRUSTED_PROXIES), never a header anyone else can write.
func remoteIP(ctx *fiber.Ctx) netip.Addr {
	if addr, ok := requestctx.ClientAddress(ctx.UserContext()); ok {
		return addr
	}
	ip, _ := netip.AddrFromSlice(ctx.Context().RemoteIP())
	return ip.Unmap()
}

// inFlight runs the rest of the request as one of k's max_in_flight, or refuses it with 429
// when that many are running. The request counts until its response has been sent: a GraphQL
// answer may stream long after the handler returned (responsebody.AfterBody tells when it ends).
func (c *Checker) inFlight(ctx *fiber.Ctx, k *key, g *grant, refuse Refuse) error {
	running := k.running
	if n := running.Add(1); n > int64(k.maxInFlight) {
		running.Add(-1)
		ctx.Set(fiber.HeaderRetryAfter, strconv.Itoa(inFlightRetryAfter))
		return refuse(ctx, Refusal{Status: fiber.StatusTooManyRequests, Code: apierr.RateLimited, Message: fmt.Sprintf(
			"the API key %q has %d requests running, its max_in_flight; retry after %d s, when one has ended",
			k.name, k.maxInFlight, inFlightRetryAfter)})
	}
	// Given back once: when the response has been sent, or before, when the request becomes a
	// stream (LeaveInFlight).
	var once sync.Once
	leave := func() { once.Do(func() { running.Add(-1) }) }
	g.leave.Store(&leave)
	handedOver := false
	defer func() {
		if !handedOver { // a panic below: the recover middleware answers
			leave()
		}
	}()
	err := ctx.Next()
	responsebody.AfterBody(ctx, func(int64, error) { leave() })
	handedOver = true
	return err
}

// wait takes one request from the key's rate and returns zero, or returns how long the client
// should wait before the next request would be allowed (and takes nothing).
func (k *key) wait(now time.Time) time.Duration {
	if k.limiter == nil {
		return 0
	}
	r := k.limiter.ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	return d
}

func (c *Checker) unauthorizedMessage(ctx *fiber.Ctx, scope Scope) string {
	if scope == ScopeExport {
		if !strings.EqualFold(c.header, ExportHeader) {
			return "missing or wrong API key: the export needs the same key in both the " + c.header + " and the " + ExportHeader + " header"
		}
		return "missing or wrong API key: send it in the " + ExportHeader + " header"
	}
	if ctx.Get(c.header) == "" {
		return "missing API key: send it in the " + c.header + " header"
	}
	return "wrong API key in header " + c.header
}

// scopePath is what a scope gives access to, for messages.
func scopePath(s Scope) string {
	switch s {
	case ScopeGraphQL:
		return "/graphql"
	case ScopeServe:
		return "/serve/graphql"
	case ScopeLookups:
		return "/lookups/graphql"
	default:
		return "the CSV export"
	}
}
