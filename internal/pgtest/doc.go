// Package pgtest runs throwaway PostgreSQL clusters from the machine's own server binaries, so
// tests exercise a real database (contract section 1) instead of mocks.
//
// A cluster lives in a fresh temporary directory (on the /dev/shm RAM disk when it has room,
// which makes initdb three times faster), listens only on 127.0.0.1 on a free port and trades
// durability for speed (fsync off), so it starts in about a second and is only fit for tests. The superuser is "postgres" with a random password; TCP logins use scram-sha-256 so that
// the service's real authentication path is exercised.
//
// Typical use in a package's tests:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		c := pgtest.Shared(t)          // one cluster per test binary
//		db := pgtest.NewDatabase(t, c) // fresh database with schema.DDL, dropped afterwards
//		cfg, err := c.ConnConfig(db)
//		...
//	}
//
// Tests that stop or break the server use their own cluster from [New] so they cannot disturb
// tests sharing [Shared].
//
// [NewStandby] adds a streaming hot standby of a cluster (pg_basebackup -R) on a port of its
// own, and [NewPgBouncer] a PgBouncer in transaction pooling mode in front of one (run as the
// server's user; Debian's pgbouncer package), for the tests of several hosts and of pooling.
//
// When no cluster can be started (no binaries, no "postgres" user while running as root, ...),
// the helpers skip the test, unless the CI environment variable is non-empty: there a missing
// database is a broken pipeline and the test fails, with the server log's tail in the message.
//
// Clean-up does not rely on the test process ending well: every cluster has a small watchdog
// process (/bin/sh, in its own session) that holds one end of a pipe; when the test process
// dies for any reason (a panicking test, the -timeout alarm, SIGKILL) the pipe closes and the
// watchdog shuts the server down and removes its directory.
//
// Because initdb refuses to run as root and CI runs as root, a root process runs the server
// binaries as the "postgres" system user.
//
// Environment: PGTEST_BINDIR overrides where the server binaries are looked for, PGTEST_TMPDIR
// where cluster directories go; CI, see above.
package pgtest
