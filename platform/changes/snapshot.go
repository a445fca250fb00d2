// Package changes tells a watcher when the database's data may have changed, for the answers
// kept in memory (platform/answercache) to follow. Snapshot is the change source that reads each
// host's data version on a connection of its own and listens for NOTIFY.
package changes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/emsanalytics/emsquery/platform/database"
)

// opDataVersion is the data version poll's operation (db.client.operation.duration).
const opDataVersion = "data version"

// Pauses between failed attempts to connect the watch connection: doubling from the first to
// the last.
const (
	watchRetryFirst = 250 * time.Millisecond
	watchRetryLast  = 15 * time.Second
)

// Watcher is told what a change source sees. host is the configured host's index (0 to Hosts()-1):
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

// Snapshot is the change source that reads where each host's data stands (dataVersion): a
// poll every interval, and in between a NOTIFY on channel (unless empty) at once.
type Snapshot struct {
	db       *database.DB
	channel  string
	interval time.Duration
	// version reads host's version on its watch connection: dataVersion, or the replication
	// source's (which shares the watch's connections, LISTEN and reconnection).
	version func(ctx context.Context, host int, conn *pgx.Conn, timeout time.Duration) (string, error)
}

// NewSnapshot returns the source that watches db's hosts.
func NewSnapshot(db *database.DB, channel string, interval time.Duration) *Snapshot {
	s := &Snapshot{db: db, channel: channel, interval: interval}
	s.version = s.dataVersion
	return s
}

// Hosts is how many database hosts are configured: Watch reports on each.
func (s *Snapshot) Hosts() int { return s.db.Hosts() }

// Watch keeps a connection of its own to each configured host until ctx ends: every interval it
// reads that host's data version, and in between it listens on the channel (unless empty). With
// several hosts every host is watched, whatever its role and DATABASE__TARGET_SESSION_ATTRS:
// the pool may read from any of them (load balancing, prefer-standby falling back and
// returning, a failover), and a standby makes a change visible later than the primary, so only
// each host's own version says when its answers change. The connections are not the pool's,
// so a busy pool never delays them (and they hold no pooled connection while they wait); they
// are built from the pool's settings, so they reach the same servers with the same
// credentials and TLS. A broken connection is replaced, with a growing pause while that fails.
func (s *Snapshot) Watch(ctx context.Context, w Watcher) {
	ccs := s.db.HostConnConfigs()
	if len(ccs) < 2 {
		s.watchHost(ctx, 0, ccs[0], w)
		return
	}
	var wg sync.WaitGroup
	for i, cc := range ccs {
		wg.Go(func() { s.watchHost(ctx, i, cc, w) })
	}
	wg.Wait()
}

// watchHost is Watch for one host, reached with cc.
func (s *Snapshot) watchHost(ctx context.Context, host int, cc *pgx.ConnConfig, w Watcher) {
	pause := watchRetryFirst
	for ctx.Err() == nil {
		err := s.watchOnce(ctx, host, cc, w, func() { pause = watchRetryFirst })
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
func (s *Snapshot) watchOnce(ctx context.Context, host int, cc *pgx.ConnConfig, w Watcher, connected func()) error {
	channel, interval := s.channel, s.interval
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
		v, err := s.version(ctx, host, conn, interval)
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
func (s *Snapshot) dataVersion(ctx context.Context, _ int, conn *pgx.Conn, timeout time.Duration) (string, error) {
	const q = `SELECT CASE WHEN pg_is_in_recovery() THEN 'replayed ' || pg_last_wal_replay_lsn()::text
	ELSE 'snapshot ' || pg_current_snapshot()::text END`
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var v *string
	err := conn.QueryRow(qctx, q).Scan(&v)
	s.db.Measure(ctx, opDataVersion, start, err)
	if err != nil {
		return "", fmt.Errorf("%s: %w", opDataVersion, database.ClassifyContext(qctx, err))
	}
	if v == nil {
		// A standby that replays from an archive only, before its first record.
		return "", fmt.Errorf("%s: the server has replayed no WAL yet", opDataVersion)
	}
	return *v, nil
}
