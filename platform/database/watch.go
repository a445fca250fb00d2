package database

import (
	"context"
	"errors"
	"fmt"
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

// Watcher is told what DB.Watch sees.
type Watcher interface {
	// Version: the data version (see DataVersion's statement) read by a poll sent at sent.
	Version(v string, sent time.Time)
	// Notified: a notification on the channel arrived.
	Notified()
	// Lost: the connection failed or broke. Until the next Version the data may have changed
	// unseen, and notifications sent meanwhile are lost.
	Lost(err error)
	// Unlistened: the server refused LISTEN (a hot standby cannot listen); polling goes on,
	// and LISTEN is tried again when the connection is replaced.
	Unlistened(err error)
}

// Watch keeps a connection of its own to the database until ctx ends: every interval it reads
// the data version, and in between it listens on channel (unless empty). It is not one of the
// pool's, so a busy pool never delays it (and it holds no pooled connection while it waits);
// it is built from the pool's settings, so it reaches the same server with the same
// credentials and TLS. A broken connection is replaced, with a growing pause while that fails.
func (db *DB) Watch(ctx context.Context, channel string, interval time.Duration, w Watcher) {
	pause := watchRetryFirst
	for ctx.Err() == nil {
		err := db.watchOnce(ctx, channel, interval, w, func() { pause = watchRetryFirst })
		if ctx.Err() != nil {
			return
		}
		w.Lost(err)
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
func (db *DB) watchOnce(ctx context.Context, channel string, interval time.Duration, w Watcher, connected func()) error {
	cctx, cancel := context.WithTimeout(ctx, max(interval, 5*time.Second))
	cc := db.pool.Config().ConnConfig.Copy()
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
		w.Version(v, sent)
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

// dataVersion reads where the server's data stands in its write-ahead log: every committed
// change to any table (INSERT, UPDATE, DELETE, TRUNCATE, ALTER TABLE ... RENAME) moves it, reads
// never do. On a primary that is the WAL insert position, which moves before a commit becomes
// visible (also with synchronous_commit off, where the flushed position would lag); on a hot
// standby it is the replay position, which moves when a change is replayed, that is when it
// becomes visible there. The poll is measured like the repositories' statements, with a
// timeout of interval (a slower answer is out of date anyway).
func (db *DB) dataVersion(ctx context.Context, conn *pgx.Conn, timeout time.Duration) (string, error) {
	const q = `SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END::text`
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
