package database

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// HostState is one configured database host as CheckHosts found it.
type HostState struct {
	Host  string // host:port as configured
	State string // "ok", "unreachable" or "no answer"
}

// CheckHosts connects to each configured host on a connection of its own, all at once, and runs
// SELECT 1, so that the health check can say which hosts are down while the pool works on the
// others. With a single host it returns nil: the pool's own check says it all. It ignores
// DATABASE__TARGET_SESSION_ATTRS: a standby that answers is up even when the service only uses
// the primary.
func (db *DB) CheckHosts(ctx context.Context) []HostState {
	if len(db.endpoints) < 2 {
		return nil
	}
	base := db.pool.Config().ConnConfig
	out := make([]HostState, len(db.endpoints))
	var wg sync.WaitGroup
	for i, e := range db.endpoints {
		cc := base.Copy()
		if i > 0 {
			fb := base.Fallbacks[i-1]
			cc.Host, cc.Port, cc.TLSConfig = fb.Host, fb.Port, fb.TLSConfig
		}
		cc.Fallbacks, cc.ValidateConnect = nil, nil
		out[i].Host = e.String()
		wg.Go(func() { out[i].State = checkHost(ctx, cc) })
	}
	wg.Wait()
	return out
}

func checkHost(ctx context.Context, cc *pgx.ConnConfig) string {
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
		return "ok"
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return "no answer"
	default:
		return "unreachable"
	}
}
