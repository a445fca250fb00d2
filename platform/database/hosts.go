package database

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// HostState is one configured database host as CheckHosts found it.
type HostState struct {
	Host  string // host:port as configured
	State string // HostOK, HostUnsuitable, HostUnreachable or HostNoAnswer
}

// The states of a host as CheckHosts reports them.
const (
	// HostOK: it ran SELECT 1 and suits DATABASE__TARGET_SESSION_ATTRS, so the pool may use it.
	HostOK = "ok"
	// HostUnsuitable: it ran SELECT 1 but is not what DATABASE__TARGET_SESSION_ATTRS asks for
	// (a standby with primary, a primary with standby), so the pool never uses it.
	HostUnsuitable  = "unsuitable"
	HostUnreachable = "unreachable"
	HostNoAnswer    = "no answer"
)

// AnyServes says whether one of hosts can serve the pool: the health check counts the service
// up while one does, even when the pool's own check found no connection in time (a new
// connection first waits out a host that hangs).
func AnyServes(hosts []HostState) bool {
	for _, h := range hosts {
		if h.State == HostOK {
			return true
		}
	}
	return false
}

// CheckHosts connects to each configured host on a connection of its own, all at once, and runs
// SELECT 1, so that the health check can say which hosts are down while the pool works on the
// others. With a single host it returns nil: the pool's own check says it all. A host that
// answers is checked against DATABASE__TARGET_SESSION_ATTRS as the pool checks a new connection
// (with prefer-standby every host suits: the pool falls back to any), so that "ok" means the
// pool may use it.
func (db *DB) CheckHosts(ctx context.Context) []HostState {
	if len(db.endpoints) < 2 {
		return nil
	}
	base := db.pool.Config().ConnConfig
	validate := base.ValidateConnect
	if db.preferStandby {
		validate = nil
	}
	out := make([]HostState, len(db.endpoints))
	var wg sync.WaitGroup
	for i, e := range db.endpoints {
		cc := base.Copy()
		// The host's own attempts: with sslmode allow or prefer, with TLS and without.
		if groups := attemptGroups(&cc.Config); i < len(groups) {
			setAttempts(&cc.Config, groups[i:i+1])
		}
		cc.ValidateConnect = nil
		out[i].Host = e.String()
		wg.Go(func() { out[i].State = checkHost(ctx, cc, validate) })
	}
	wg.Wait()
	return out
}

func checkHost(ctx context.Context, cc *pgx.ConnConfig, validate pgconn.ValidateConnectFunc) string {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err == nil {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = conn.Close(cctx)
		}()
		var one int
		err = conn.QueryRow(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol).Scan(&one)
	}
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return HostNoAnswer
	default:
		return HostUnreachable
	}
	if validate != nil {
		if err := validate(ctx, conn.PgConn()); err != nil {
			if ctx.Err() != nil {
				return HostNoAnswer
			}
			if conn.IsClosed() {
				return HostUnreachable
			}
			return HostUnsuitable
		}
	}
	return HostOK
}

// Hosts is how many database hosts are configured.
func (db *DB) Hosts() int { return len(db.endpoints) }

// HostConnConfigs returns a connection config for each configured host, in their order, for
// connections of their own beside the pool (the change source's): built from the pool's
// settings, so that they reach the same servers with the same credentials and TLS, each to its
// one host.
func (db *DB) HostConnConfigs() []*pgx.ConnConfig {
	base := db.pool.Config().ConnConfig
	if len(db.endpoints) < 2 {
		return []*pgx.ConnConfig{base.Copy()}
	}
	out := make([]*pgx.ConnConfig, len(db.endpoints))
	for i := range db.endpoints {
		cc := base.Copy()
		if i > 0 {
			fb := base.Fallbacks[i-1]
			cc.Host, cc.Port, cc.TLSConfig = fb.Host, fb.Port, fb.TLSConfig
		}
		cc.Fallbacks, cc.ValidateConnect = nil, nil
		out[i] = cc
	}
	return out
}
