package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartStandby makes a streaming hot standby of c: a base backup taken with pg_basebackup -R
// (which writes primary_conninfo and standby.signal), started on a port of its own. It shares
// c's superuser password and, with Options.SSL, c's certificate (the backup copies it).
// Databases created on c later reach the standby by replication; see WaitForReplay.
func (c *Cluster) StartStandby() (*Cluster, error) {
	bindir, err := findBinDir()
	if err != nil {
		return nil, err
	}
	var dir string
	for _, parent := range tempParents(c.cred) {
		if dir, err = os.MkdirTemp(parent, "pgtest-standby-"); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	s := &Cluster{opts: c.opts, bindir: bindir, cred: c.cred, dir: dir, password: c.password, ca: c.ca}
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
	// The password goes by environment, never on the command line; -R writes it into the
	// standby's primary_conninfo, in the throwaway data directory.
	err := s.runWith([]string{"PGPASSWORD=" + primary.password}, "pg_basebackup",
		"-D", s.dataDir(), "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-h", primary.Host(), "-p", strconv.Itoa(primary.Port()), "-U", superuser)
	if err != nil {
		return err
	}
	// The data directory came with the server's certificate; the CA's file lives beside it.
	if s.ca != nil {
		if err := s.writeCAFile(); err != nil {
			return err
		}
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

// InRecovery says whether the server is a standby (pg_is_in_recovery()).
func (c *Cluster) InRecovery(ctx context.Context) (bool, error) {
	cfg, err := c.ConnConfig("postgres")
	if err != nil {
		return false, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var r bool
	err = conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&r)
	return r, err
}

// WaitForReplay waits until standby s has replayed everything primary had written when the
// call began: then what a test wrote on the primary is there to read.
func (s *Cluster) WaitForReplay(ctx context.Context, primary *Cluster) error {
	pcfg, err := primary.ConnConfig("postgres")
	if err != nil {
		return err
	}
	pconn, err := pgx.ConnectConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	var lsn string
	// The insert position, not the write position: with synchronous_commit=off (the test
	// clusters) a commit returns before its WAL is written, and the write position may not
	// have reached it yet.
	err = pconn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn)
	pconn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	scfg, err := s.ConnConfig("postgres")
	if err != nil {
		return err
	}
	sconn, err := pgx.ConnectConfig(ctx, scfg)
	if err != nil {
		return err
	}
	defer sconn.Close(context.WithoutCancel(ctx))
	for {
		var done bool
		if err := sconn.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby has not replayed %s: %w", lsn, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// NewStandby is StartStandby for one test: the standby is destroyed at t.Cleanup, and a
// standby that cannot start follows the rule for a missing database (see New).
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
