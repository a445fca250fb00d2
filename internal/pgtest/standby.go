package pgtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartStandby creates and starts a streaming hot standby of c: a base backup of c taken with
// pg_basebackup -R (which makes it a standby that streams from c), in a directory of its own, on
// a port of its own, with c's superuser and password. It answers reads; everything it holds
// comes from c, replayed as c commits (see WaitReplayed).
func (c *Cluster) StartStandby() (*Cluster, error) {
	dir, err := clusterDir(c.cred)
	if err != nil {
		return nil, err
	}
	s := &Cluster{opts: c.opts, bindir: c.bindir, cred: c.cred, dir: dir, password: c.password, caPEM: c.caPEM}
	track(s, true)
	if err := s.setupStandby(c); err != nil {
		return nil, errors.Join(err, s.Destroy())
	}
	return s, nil
}

func (s *Cluster) setupStandby(primary *Cluster) error {
	if err := s.chown(s.dir); err != nil {
		return err
	}
	if err := s.startWatchdog(); err != nil {
		return err
	}
	err := s.runEnv([]string{"PGPASSWORD=" + primary.password}, "pg_basebackup",
		"-D", s.dataDir(), "-h", primary.Host(), "-p", strconv.Itoa(primary.Port()), "-U", superuser,
		"-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
	if err != nil {
		return err
	}
	for attempt := 0; attempt < 3; attempt++ {
		if s.port, err = FreePort(); err != nil {
			return err
		}
		if err = s.Start(); err == nil || !strings.Contains(s.logTail(30), "Address already in use") {
			return err
		}
	}
	return err
}

// NewStandby starts a streaming hot standby of primary for this test alone, destroyed at
// t.Cleanup.
func NewStandby(t testing.TB, primary *Cluster) *Cluster {
	t.Helper()
	s, err := primary.StartStandby()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := s.Destroy(); err != nil {
			t.Errorf("pgtest: destroy standby: %v", err)
		}
	})
	return s
}

// WaitReplayed waits until standby has replayed everything primary has written so far, so that
// what committed on primary is visible on standby.
func WaitReplayed(ctx context.Context, primary, standby *Cluster) error {
	var lsn string
	if err := query(ctx, primary, `SELECT pg_current_wal_insert_lsn()::text`, &lsn); err != nil {
		return fmt.Errorf("primary's WAL position: %w", err)
	}
	for {
		var done bool
		if err := query(ctx, standby, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, &done, lsn); err != nil {
			return fmt.Errorf("standby's replay position: %w", err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby has not replayed %s: %w", lsn, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// query reads one value from the postgres database of c.
func query(ctx context.Context, c *Cluster, sql string, dest any, args ...any) error {
	cfg, err := c.ConnConfig("postgres")
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql, args...).Scan(dest)
}
