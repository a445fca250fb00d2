package app

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/sync/singleflight"

	"github.com/emsanalytics/emsquery/platform/answercache"
	"github.com/emsanalytics/emsquery/platform/apierr"
	"github.com/emsanalytics/emsquery/platform/auth"
	"github.com/emsanalytics/emsquery/platform/database"
)

func ping(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// healthCheckTimeout bounds SELECT 1; the answer comes within a second more even when the
// database hangs.
const healthCheckTimeout = 2 * time.Second

// healthCheckEvery is how often, at most, the database is checked: answers within it share the
// last check. Health is open to anyone, without a key, and each check costs a statement and,
// with several hosts, a new connection per host; without the bound, a caller could make the
// service open connections to the database as fast as it can send requests.
const healthCheckEvery = time.Second

// healthResult is one check of the database and its hosts.
type healthResult struct {
	done  time.Time
	err   error
	hosts []database.HostState
}

// healthChecker runs the check at most once per healthCheckEvery: callers that come while one
// runs wait for it and share its result (singleflight), and callers within healthCheckEvery of
// its end get it from memory.
type healthChecker struct {
	db    *database.DB
	group singleflight.Group
	last  atomic.Pointer[healthResult]
}

func (h *healthChecker) result(ctx context.Context) *healthResult {
	if r := h.last.Load(); r != nil && time.Since(r.done) < healthCheckEvery {
		return r
	}
	v, _, _ := h.group.Do("check", func() (any, error) {
		// A flight that ended a moment ago may have left a fresh result.
		if r := h.last.Load(); r != nil && time.Since(r.done) < healthCheckEvery {
			return r, nil
		}
		// The check is shared: a caller that leaves must not cancel it for the others.
		r := h.check(context.WithoutCancel(ctx))
		h.last.Store(r)
		return r, nil
	})
	return v.(*healthResult)
}

// check is 200 while the pool can run SELECT 1, on whichever host serves it. With several
// database hosts it also says how each one answered on a connection of its own, checked at the
// same time, and it is ok while any host answers and suits DATABASE__TARGET_SESSION_ATTRS, even
// when the pool's check fails: with the pool empty, its new connection first waits out a host
// that hangs (up to 4 s, longer than the check's 2 s), and requests still find the host that
// answers.
func (h *healthChecker) check(ctx context.Context) *healthResult {
	ctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
	defer cancel()
	hostsDone := make(chan []database.HostState, 1)
	go func() { hostsDone <- h.db.CheckHosts(ctx) }()
	err := h.db.Ping(ctx)
	hosts := <-hostsDone
	if err != nil && database.AnyServes(hosts) {
		err = nil
	}
	return &healthResult{done: time.Now(), err: err, hosts: hosts}
}

// healthz answers the database check (see healthChecker). With several database hosts the body
// says how each answered: to a caller with a valid key by address ("hosts": {"db1:5432": "ok",
// "db2:5432": "unreachable"}), to anyone else by position in DATABASE__HOST only ("hosts":
// {"1": "ok", "2": "unreachable"}): health needs no key, and the database's addresses are no
// business of anonymous callers. With AUTHENTICATION__API_KEYS_FILE it also says whether the
// file's last reload worked ("keys_file": "ok", or when and, to a key holder, why it failed).
// To a key holder, with answers kept in memory, "changes" is the change source and its state
// ({"source": "replication", "state": "streaming", ...}, contract 6.13).
func healthz(db *database.DB, checker *auth.Checker, cache *answercache.Cache, draining *atomic.Bool) fiber.Handler {
	h := &healthChecker{db: db}
	return func(c *fiber.Ctx) error {
		if draining.Load() {
			// Stopping (APP__SHUTDOWN_DELAY): out of the load balancer's rotation first, without
			// asking the database.
			return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "draining"})
		}
		r := h.result(c.UserContext())
		body := fiber.Map{"status": "ok", "database": "ok"}
		if r.err != nil {
			body = fiber.Map{"status": "unavailable", "database": healthReason(r.err)}
		}
		keyHolder := checker.Valid(c)
		if r.hosts != nil {
			m := make(map[string]string, len(r.hosts))
			for i, host := range r.hosts {
				if keyHolder {
					m[host.Host] = host.State
				} else {
					m[strconv.Itoa(i+1)] = host.State
				}
			}
			body["hosts"] = m
		}
		if h, ok := cache.Health(); ok && keyHolder {
			body["changes"] = h
		}
		if st, ok := checker.KeysFile(); ok {
			switch {
			case st.FailedAt.IsZero():
				body["keys_file"] = "ok"
			case keyHolder:
				body["keys_file"] = "reload failed at " + st.FailedAt.UTC().Format(time.RFC3339) + ": " + st.Reason
			default:
				body["keys_file"] = "reload failed at " + st.FailedAt.UTC().Format(time.RFC3339)
			}
		}
		if r.err != nil {
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
