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

func healthz(db *database.DB) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(c.UserContext(), healthCheckTimeout)
		defer cancel()
		if err := db.Ping(ctx); err != nil {
			return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "database": healthReason(err)})
		}
		return c.JSON(fiber.Map{"status": "ok", "database": "ok"})
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
