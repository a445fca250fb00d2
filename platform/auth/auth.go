// Package auth checks the API key of specification section 5 and contract section 4.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/platform/config"
)

// ExportHeader is checked by the CSV export in addition to the configured header.
const ExportHeader = "SERVICE-X-API-KEY"

// Checker compares presented keys with the configured one. It keeps only a digest of the key:
// comparing fixed-length digests in constant time reveals neither the key nor its length.
type Checker struct {
	header    string
	bearerOK  bool
	keyDigest [sha256.Size]byte
}

// NewChecker returns the checker for the settings. A key shorter than config.MinKeyLength is
// accepted (the specification has a short default) with a warning that never shows the key.
func NewChecker(a config.Authentication, log *slog.Logger) *Checker {
	if a.WeakKey() {
		log.Warn("AUTHENTICATION__API_KEY is shorter than 32 characters; choose a long random value",
			"min_length", config.MinKeyLength)
	}
	h := string(a.APIKeyHeader)
	return &Checker{
		header:    h,
		bearerOK:  strings.EqualFold(h, fiber.HeaderAuthorization),
		keyDigest: sha256.Sum256([]byte(a.APIKey.Reveal())),
	}
}

// Header is the configured header name.
func (c *Checker) Header() string { return c.header }

// valid compares one presented key with the configured one in constant time.
func (c *Checker) valid(presented string) bool {
	if presented == "" {
		return false
	}
	d := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(d[:], c.keyDigest[:]) == 1
}

// Allowed says whether the request carries the key in the configured header. With the
// Authorization header, both "<key>" and "Bearer <key>" are accepted.
func (c *Checker) Allowed(ctx *fiber.Ctx) bool {
	v := ctx.Get(c.header)
	if c.bearerOK {
		if scheme, rest, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "Bearer") {
			v = strings.TrimSpace(rest)
		}
	}
	return c.valid(v)
}

// ExportAllowed says whether the request also carries the key in SERVICE-X-API-KEY, which the
// export demands whatever the configured header is.
func (c *Checker) ExportAllowed(ctx *fiber.Ctx) bool {
	return c.Allowed(ctx) && c.valid(ctx.Get(ExportHeader))
}

// Require returns middleware that lets a request through only when check passes, and answers
// with deny otherwise. CORS preflights never carry keys, so they pass; the CORS middleware
// answers them before any handler runs.
func (c *Checker) Require(check func(*fiber.Ctx) bool, deny fiber.Handler) fiber.Handler {
	return func(ctx *fiber.Ctx) error {
		if ctx.Method() == fiber.MethodOptions {
			return ctx.Next()
		}
		if !check(ctx) {
			return deny(ctx)
		}
		return ctx.Next()
	}
}
