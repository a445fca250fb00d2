package app

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/database"
)

func ping(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// healthCheckTimeout bounds SELECT 1; the answer comes within a second more even when the
// database hangs.
const healthCheckTimeout = 2 * time.Second

// healthz is 200 while the pool can run SELECT 1, on whichever host serves it. With several
// database hosts the body also says how each one answered on a connection of its own
// ("hosts": {"db1:5432": "ok", "db2:5432": "unreachable"}), checked at the same time, and it is
// 200 while any host answers and suits DATABASE__TARGET_SESSION_ATTRS, even when the pool's
// check fails: with the pool empty, its new connection first waits out a host that hangs
// (up to 4 s, longer than the check's 2 s), and requests still find the host that answers.
func healthz(db *database.DB) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(c.UserContext(), healthCheckTimeout)
		defer cancel()
		hostsDone := make(chan []database.HostState, 1)
		go func() { hostsDone <- db.CheckHosts(ctx) }()
		err := db.Ping(ctx)
		hosts := <-hostsDone
		if err != nil && database.AnyServes(hosts) {
			err = nil
		}
		body := fiber.Map{"status": "ok", "database": "ok"}
		if err != nil {
			body = fiber.Map{"status": "unavailable", "database": healthReason(err)}
		}
		if hosts != nil {
			m := make(map[string]string, len(hosts))
			for _, h := range hosts {
				m[h.Host] = h.State
			}
			body["hosts"] = m
		}
		if err != nil {
			return c.Status(fiber.StatusServiceUnavailable).JSON(body)
		}
		return c.JSON(body)
	}
}

// healthReason is a short, safe description of why the database check failed.
func healthReason(err error) string {
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Code == apierr.ServiceUnavailable {
		if errors.Is(err, context.DeadlineExceeded) {
			return "no free connection"
		}
		return "unreachable"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer within 2s"
	}
	return "error"
}
