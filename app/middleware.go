package app

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/clientaddr"
	"github.com/emsanalytics/emsquery/platform/requestctx"
	"github.com/emsanalytics/emsquery/platform/responsebody"
)

// stripRootPath lets every route answer both at /prefix/... (a proxy that keeps the prefix)
// and at /... (a proxy that strips it).
func stripRootPath(prefix string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p := c.Path()
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			rest := strings.TrimPrefix(p, prefix)
			if rest == "" {
				rest = "/"
			}
			c.Path(rest)
		}
		return c.Next()
	}
}

// maxRequestIDLength bounds an id taken from the caller; longer or odd ones are replaced so that
// log lines stay readable and cannot be forged into several lines.
const maxRequestIDLength = 128

// saneRequestID drops an incoming X-Request-ID that is too long or has characters outside a
// conservative set, so that the request id middleware generates a new one.
func saneRequestID(c *fiber.Ctx) error {
	id := c.Get(fiber.HeaderXRequestID)
	if id == "" {
		return c.Next()
	}
	ok := len(id) <= maxRequestIDLength
	for i := 0; ok && i < len(id); i++ {
		b := id[i]
		ok = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-_.:", b) >= 0
	}
	if !ok {
		c.Request().Header.Del(fiber.HeaderXRequestID)
	}
	return c.Next()
}

// requestContext puts the request id into the request's context.Context, which resolvers and
// repositories receive and loggers read.
// clientAddress puts the request's client address in its context: the peer's, or the one a
// trusted proxy names (platform/clientaddr), for the failed-key throttle, the access line and
// the trace.
func clientAddress(r *clientaddr.Resolver) fiber.Handler {
	return func(c *fiber.Ctx) error {
		peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
		h := &c.Request().Header
		addr := r.Of(peer, h.PeekAll(fiber.HeaderXForwardedFor), h.PeekAll("Forwarded"))
		c.SetUserContext(requestctx.WithClientAddress(c.UserContext(), addr))
		return c.Next()
	}
}

func requestContext(c *fiber.Ctx) error {
	id, _ := c.Locals("requestid").(string)
	c.SetUserContext(requestctx.WithRequestID(c.UserContext(), id))
	return c.Next()
}

// accessLog writes one line per request: method, path, status, duration, the name of the API
// key it was checked with (key_name, when it had a valid one), request id and trace id (the
// logger adds those two from the context). Headers, and so keys, are never logged.
func accessLog(log *slog.Logger) fiber.Handler {
	return func(c *fiber.Ctx) error {
		start := time.Now()
		path := c.OriginalURL()
		if i := strings.IndexByte(path, '?'); i >= 0 {
			// Query strings may hold filter values; the path is enough to find the request.
			path = path[:i]
		}
		err := c.Next()
		if err != nil {
			// Let the error handler write the response now, so the line has the final status.
			if herr := c.App().ErrorHandler(c, err); herr != nil {
				_ = c.SendStatus(fiber.StatusInternalServerError)
			}
			err = nil
		}
		status := c.Response().StatusCode()
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		ctx := c.UserContext()
		h := log.Handler()
		if !h.Enabled(ctx, level) {
			return err
		}
		// Copies: fasthttp reuses the request's buffers once it is answered.
		method, path, name := strings.Clone(c.Method()), strings.Clone(path), auth.KeyName(c)
		client, _ := requestctx.ClientAddress(ctx)
		// The line is written when the answer's last byte went out: a streamed answer's size
		// and duration are known only then (and it may be cut: cut=true, the reason).
		responsebody.AfterSent(c, func(size int64, serr error) {
			// The record is built here rather than by log.Log, which would also take the
			// caller's program counter (runtime.Callers, for a source location no handler of
			// ours writes) and box each attribute in an interface first, on every request.
			r := slog.NewRecord(time.Now(), level, "request", 0)
			r.AddAttrs(slog.String("method", method), slog.String("path", path), slog.Int("status", status),
				slog.Int64("size", size), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
			if client.IsValid() {
				r.AddAttrs(slog.String("client_address", client.String()))
			}
			if name != "" {
				r.AddAttrs(slog.String("key_name", name))
			}
			if serr != nil {
				r.AddAttrs(slog.Bool("cut", true), slog.String("error", serr.Error()))
			}
			_ = h.Handle(ctx, r)
		})
		return err
	}
}

// recovered logs a panic with the request id; Fiber's recover middleware turns it into a 500.
func recovered(log *slog.Logger) func(c *fiber.Ctx, e any) {
	return func(c *fiber.Ctx, e any) {
		log.ErrorContext(c.UserContext(), "panic", "error", fmt.Sprint(e), "path", c.Path())
	}
}
