package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/schema"
)

type sharedCluster struct {
	mu      sync.Mutex // held while starting, so concurrent first users wait for one start
	started bool
	c       *Cluster
	err     error
}

var shared struct {
	mu       sync.Mutex
	clusters map[Options]*sharedCluster
}

// Shared returns the test binary's plain cluster, started on first use, so a package's tests pay
// for one initdb however many there are. Isolate tests with NewDatabase, and never Stop it: use
// New for that. Main destroys it; without Main the watchdog removes it when the process exits.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	return SharedWith(t, Options{})
}

// SharedWith is Shared for a cluster with opts, e.g. one TLS cluster shared by a package's
// TLS tests.
func SharedWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	shared.mu.Lock()
	if shared.clusters == nil {
		shared.clusters = map[Options]*sharedCluster{}
	}
	s := shared.clusters[opts]
	if s == nil {
		s = &sharedCluster{}
		shared.clusters[opts] = s
	}
	shared.mu.Unlock()
	s.mu.Lock()
	// A start that failed is not retried: every later test gets the same verdict at once.
	if !s.started {
		s.started = true
		s.c, s.err = Start(opts)
	}
	c, err := s.c, s.err
	s.mu.Unlock()
	if err != nil {
		unavailable(t, err)
	}
	return c
}

// New starts a cluster for this test alone, destroyed at t.Cleanup: for tests that Stop, Start
// or otherwise disturb the server.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c, err := Start(opts)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := c.Destroy(); err != nil {
			t.Errorf("pgtest: destroy cluster: %v", err)
		}
	})
	return c
}

// unavailable applies the rule for a missing database: on CI (CI non-empty) the pipeline is
// broken and the test fails; on a developer machine without PostgreSQL the test is skipped.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("pgtest: cannot start PostgreSQL (CI is set, so this fails instead of skipping): %v", err)
	}
	t.Skipf("pgtest: cannot start PostgreSQL, skipping (with CI set this fails): %v", err)
}

// NewDatabase creates a database with schema.DDL applied, named after the test plus a random
// suffix so parallel tests and reruns never collide, and drops it at t.Cleanup (even if
// connections are still open). It returns the database's name.
func NewDatabase(t testing.TB, c *Cluster) string {
	t.Helper()
	return NewDatabaseWith(t, c, schema.DDL)
}

// NewDatabaseWith is NewDatabase with ddl instead of schema.DDL (e.g. schema.PartitionedDDL);
// an empty ddl leaves the database empty.
func NewDatabaseWith(t testing.TB, c *Cluster, ddl string) string {
	t.Helper()
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateDatabaseWith(ctx, name, ddl); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.DropDatabase(ctx, name); err != nil && c.isRunning() {
			t.Errorf("pgtest: %v", err)
		}
	})
	return name
}

func (c *Cluster) isRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// databaseName keeps the test's name recognisable in the server log while fitting PostgreSQL's
// 63-byte identifiers and needing no quoting.
func databaseName(testName string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	suffix := make([]byte, 5)
	if _, err := rand.Read(suffix); err != nil {
		panic(err)
	}
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(suffix))
	return b.String()
}

// Main runs the tests and then destroys the shared clusters; use it as
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// SIGINT and SIGTERM destroy every cluster of the process, shared or not, before it exits. A
// test that panics crashes the process from its own goroutine, past this function's defer; the
// watchdog cleans up then.
func Main(m *testing.M) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "pgtest: %v: destroying test clusters\n", sig)
		destroyAll()
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	defer func() {
		if err := destroyShared(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}()
	return m.Run()
}

func destroyShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	var errs []error
	for _, s := range shared.clusters {
		s.mu.Lock()
		if s.c != nil {
			errs = append(errs, s.c.Destroy())
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}
