package database

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// opDataVersion is the data version poll's operation (db.client.operation.duration).
const opDataVersion = "data version"

// Pauses between failed attempts to connect the watch connection: doubling from the first to
// the last.
const (
	watchRetryFirst = 250 * time.Millisecond
	watchRetryLast  = 15 * time.Second
)

// Watcher is told what DB.Watch sees. host is the configured host's index (0 to Hosts()-1):
// each host is watched on a connection of its own.
type Watcher interface {
	// Version: host's data version (see dataVersion's statement) read by a poll sent at sent.
	Version(host int, v string, sent time.Time)
	// Notified: a notification on the channel arrived.
	Notified()
	// Lost: host's connection failed or broke. Until its next Version the data may have
	// changed there unseen, and notifications sent meanwhile are lost.
	Lost(host int, err error)
	// Unlistened: the server refused LISTEN (a hot standby cannot listen); polling goes on,
	// and LISTEN is tried again when the connection is replaced.
	Unlistened(err error)
}

// Hosts is how many database hosts are configured: Watch reports on each.
func (db *DB) Hosts() int { return len(db.endpoints) }

// Watch keeps a connection of its own to each configured host until ctx ends: every interval it
// reads that host's data version, and in between it listens on channel (unless empty). With
// several hosts every host is watched, whatever its role and DATABASE__TARGET_SESSION_ATTRS:
// the pool may read from any of them (load balancing, prefer-standby falling back and
// returning, a failover), and a standby makes a change visible later than the primary, so only
// each host's own version says when its answers change. The connections are not the pool's,
// so a busy pool never delays them (and they hold no pooled connection while they wait); they
// are built from the pool's settings, so they reach the same servers with the same
// credentials and TLS. A broken connection is replaced, with a growing pause while that fails.
func (db *DB) Watch(ctx context.Context, channel string, interval time.Duration, w Watcher) {
	base := db.pool.Config().ConnConfig
	if len(db.endpoints) < 2 {
		db.watchHost(ctx, 0, base, channel, interval, w)
		return
	}
	var wg sync.WaitGroup
	for i := range db.endpoints {
		cc := base.Copy()
		if i > 0 {
			fb := base.Fallbacks[i-1]
			cc.Host, cc.Port, cc.TLSConfig = fb.Host, fb.Port, fb.TLSConfig
		}
		cc.Fallbacks, cc.ValidateConnect = nil, nil
		wg.Go(func() { db.watchHost(ctx, i, cc, channel, interval, w) })
	}
	wg.Wait()
}

// watchHost is Watch for one host, reached with cc.
func (db *DB) watchHost(ctx context.Context, host int, cc *pgx.ConnConfig, channel string, interval time.Duration, w Watcher) {
	pause := watchRetryFirst
	for ctx.Err() == nil {
		err := db.watchOnce(ctx, host, cc, channel, interval, w, func() { pause = watchRetryFirst })
		if ctx.Err() != nil {
			return
		}
		w.Lost(host, err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, watchRetryLast)
	}
}

// watchOnce connects, listens, and polls until the connection fails or ctx ends; connected is
// called once the first poll worked.
func (db *DB) watchOnce(ctx context.Context, host int, cc *pgx.ConnConfig, channel string, interval time.Duration, w Watcher, connected func()) error {
	cctx, cancel := context.WithTimeout(ctx, max(interval, 5*time.Second))
	cc = cc.Copy()
	// Told apart from the pool's sessions in pg_stat_activity.
	cc.RuntimeParams["application_name"] = "emsquery cache watch"
	conn, err := pgx.ConnectConfig(cctx, cc)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	listening := false
	if channel != "" {
		_, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			listening = true
		case errors.As(err, &pgErr):
			// Refused (a hot standby cannot listen): the connection is fine for polling.
			w.Unlistened(err)
		default:
			return fmt.Errorf("listen: %w", err)
		}
	}
	for first := true; ; first = false {
		sent := time.Now()
		v, err := db.dataVersion(ctx, conn, interval)
		if err != nil {
			return err
		}
		w.Version(host, v, sent)
		if first {
			connected()
		}
		next := sent.Add(interval)
		if !listening {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(next)):
			}
			continue
		}
		for {
			wctx, cancel := context.WithDeadline(ctx, next)
			_, err := conn.WaitForNotification(wctx)
			cancel()
			if err == nil {
				w.Notified()
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pgconn.Timeout(err) && !conn.IsClosed() {
				break // time for the next poll
			}
			return fmt.Errorf("wait for notification: %w", err)
		}
	}
}

// dataVersion reads where the server's data stands. On a primary that is its snapshot of the
// transactions that write (pg_current_snapshot(): the oldest still running, the next to come,
// those running between): every data change is made by a transaction that has a transaction id
// (INSERT, UPDATE, DELETE, TRUNCATE, ALTER TABLE ... RENAME), and once it commits it has left
// the snapshot, so two polls that read the same snapshot saw no commit between them; queries,
// VACUUM and checkpoints have no transaction id and leave it as it was (the WAL position, which
// they move, made every one of them look like a change). On a hot standby it is the replay
// position, which moves when a change is replayed, that is when it becomes visible there. The
// poll is measured like the repositories' statements, with a timeout of interval (a slower
// answer is out of date anyway).
func (db *DB) dataVersion(ctx context.Context, conn *pgx.Conn, timeout time.Duration) (string, error) {
	const q = `SELECT CASE WHEN pg_is_in_recovery() THEN 'replayed ' || pg_last_wal_replay_lsn()::text
	ELSE 'snapshot ' || pg_current_snapshot()::text END`
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var v *string
	err := conn.QueryRow(qctx, q).Scan(&v)
	db.metrics.operation(ctx, opDataVersion, start, err)
	if err != nil {
		return "", fmt.Errorf("%s: %w", opDataVersion, ClassifyContext(qctx, err))
	}
	if v == nil {
		// A standby that replays from an archive only, before its first record.
		return "", fmt.Errorf("%s: the server has replayed no WAL yet", opDataVersion)
	}
	return *v, nil
}
