package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/launcher"
	"github.com/emsanalytics/emsquery/schema"
)

// Options selects what a cluster offers beyond plain TCP.
type Options struct {
	// SSL turns on TLS with a certificate for 127.0.0.1 and localhost signed by a throwaway CA
	// (see Cluster.CAFile), so clients can test sslmode=verify-full. Plain connections are still
	// accepted.
	SSL bool
	// ServerCertHost, with SSL, is the only name in the server's certificate instead of
	// 127.0.0.1 and localhost: "localhost" makes a cluster that verify-full accepts at
	// localhost and refuses at 127.0.0.1 (the same server, a name the certificate lacks).
	ServerCertHost string
	// ClientCerts, with SSL, admits every role but the superuser only over TLS and only with a
	// client certificate the cluster's CA signed for that role (pg_hba's cert method: no
	// password); without TLS such a role is refused. The superuser keeps its password, over
	// TLS and without. Issue certificates with Cluster.CA().WriteClientCert.
	ClientCerts bool
	// Conf is appended to the cluster's postgresql.conf before its first start: server
	// settings a test needs beyond the defaults, one "name = value" per line, e.g.
	// "wal_level = logical\n" for logical replication. A string, so Options stays comparable
	// (SharedWith keys its clusters by Options); a standby copies it with the data directory.
	Conf string
}

// Cluster is one running (or stopped) PostgreSQL server and its directory. Its methods are safe
// for concurrent use.
type Cluster struct {
	opts     Options
	bindir   string
	cred     *syscall.Credential // whom the server binaries run as; nil = this process's user
	dir      string
	password string
	ca       *CA

	mu        sync.Mutex
	port      int
	running   bool
	destroyed bool
	watchdog  *exec.Cmd
	lifeline  io.WriteCloser // closing it (or dying) tells the watchdog to clean up
}

const superuser = "postgres"

// live holds the clusters not yet destroyed, for Main's signal handler.
var live struct {
	mu       sync.Mutex
	clusters map[*Cluster]struct{}
}

func track(c *Cluster, alive bool) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.clusters == nil {
		live.clusters = map[*Cluster]struct{}{}
	}
	if alive {
		live.clusters[c] = struct{}{}
	} else {
		delete(live.clusters, c)
	}
}

func destroyAll() {
	live.mu.Lock()
	all := make([]*Cluster, 0, len(live.clusters))
	for c := range live.clusters {
		all = append(all, c)
	}
	live.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() { c.Destroy() })
	}
	wg.Wait()
}

// Start creates and starts a new cluster. On error nothing is left behind, and the error
// carries the tail of the server log so a CI failure explains itself.
func Start(opts Options) (*Cluster, error) {
	bindir, err := findBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverIdentity()
	if err != nil {
		return nil, err
	}
	dir, err := clusterDir(cred)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, bindir: bindir, cred: cred, dir: dir}
	track(c, true)
	if err := c.setup(); err != nil {
		return nil, errors.Join(err, c.Destroy())
	}
	return c, nil
}

// clusterDir makes a new cluster directory.
func clusterDir(cred *syscall.Credential) (string, error) {
	var dir string
	var err error
	for _, parent := range tempParents(cred) {
		if dir, err = os.MkdirTemp(parent, "pgtest-"); err == nil {
			break
		}
	}
	if err != nil {
		return "", err
	}
	// The watchdog compares the server's working directory with this path; use the real one.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return dir, nil
}

func (c *Cluster) setup() error {
	if err := c.chown(c.dir); err != nil {
		return err
	}
	if err := c.startWatchdog(); err != nil {
		return err
	}
	pw := make([]byte, 18)
	if _, err := rand.Read(pw); err != nil {
		return err
	}
	c.password = hex.EncodeToString(pw)
	if err := c.initdb(); err != nil {
		return err
	}
	if c.opts.SSL {
		if err := c.writeCerts(); err != nil {
			return err
		}
	}
	if c.opts.ClientCerts {
		if err := c.requireClientCerts(); err != nil {
			return err
		}
	}
	if c.opts.Conf != "" {
		if err := c.appendConf(c.opts.Conf); err != nil {
			return err
		}
	}
	// Another process may grab the port between our probe and the server's bind; a new port
	// then is all it takes.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if c.port, err = FreePort(); err != nil {
			return err
		}
		if err = c.Start(); err == nil || !strings.Contains(c.logTail(30), "Address already in use") {
			return err
		}
	}
	return err
}

func (c *Cluster) initdb() error {
	pwfile := filepath.Join(c.dir, "pwfile")
	if err := c.writeFile(pwfile, []byte(c.password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	args := []string{
		"-D", c.dataDir(), "-U", superuser, "--pwfile=" + pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
		"--no-sync", // the cluster is thrown away; syncing 1,500 files is most of initdb's time
		"--no-instructions",
	}
	err := c.run("initdb", append(args, "--locale=C.UTF-8")...)
	if err != nil {
		// Systems without a C.UTF-8 locale still get byte-order collation, like C.UTF-8 gives.
		os.RemoveAll(c.dataDir())
		if err2 := c.run("initdb", append(args, "--no-locale")...); err2 != nil {
			return fmt.Errorf("initdb with --locale=C.UTF-8: %w\nand with --no-locale: %w", err, err2)
		}
	}
	return nil
}

// appendConf adds lines to postgresql.conf, where a later line overrides an earlier one.
func (c *Cluster) appendConf(conf string) error {
	f, err := os.OpenFile(filepath.Join(c.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("\n# pgtest Options.Conf\n" + conf + "\n")
	return errors.Join(err, f.Close())
}

func (c *Cluster) writeCerts() error {
	ca, err := NewCA()
	if err != nil {
		return err
	}
	hosts := []string{"localhost", "127.0.0.1"}
	if c.opts.ServerCertHost != "" {
		hosts = []string{c.opts.ServerCertHost}
	}
	certPEM, keyPEM, err := ca.ServerCert(hosts...)
	if err != nil {
		return err
	}
	c.ca = ca
	if err := c.writeFile(filepath.Join(c.dataDir(), "server.crt"), certPEM, 0o644); err != nil {
		return err
	}
	// The server refuses a key others can read.
	if err := c.writeFile(filepath.Join(c.dataDir(), "server.key"), keyPEM, 0o600); err != nil {
		return err
	}
	return c.writeCAFile()
}

// writeCAFile writes the CA's certificate to CAFile, for clients and for the server's
// ssl_ca_file (ClientCerts).
func (c *Cluster) writeCAFile() error {
	return c.writeFile(c.CAFile(), c.ca.PEM(), 0o644)
}

// clientCertRules come first in pg_hba.conf with Options.ClientCerts: the superuser by
// password over TCP (for the tests' own connections), every other role only with TLS and a
// certificate, and refused without TLS, so that no rule initdb wrote can admit it otherwise.
const clientCertRules = `# pgtest Options.ClientCerts
host    all postgres 127.0.0.1/32 scram-sha-256
hostssl all all      127.0.0.1/32 cert
host    all all      127.0.0.1/32 reject
`

func (c *Cluster) requireClientCerts() error {
	if !c.opts.SSL {
		return errors.New("pgtest: Options.ClientCerts needs Options.SSL")
	}
	hba := filepath.Join(c.dataDir(), "pg_hba.conf")
	rules, err := os.ReadFile(hba)
	if err != nil {
		return err
	}
	return c.writeFile(hba, append([]byte(clientCertRules), rules...), 0o600)
}

// Start starts a stopped cluster again on the same port, so clients configured before Stop find
// it again: this is what "the database comes back" tests need.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return errors.New("pgtest: cluster destroyed")
	}
	if c.running && c.PostmasterPID() > 0 {
		return nil
	}
	sockets := c.dir
	if len(sockets) > 90 { // sun_path is 108 bytes; TCP is all tests use anyway
		sockets = ""
	}
	opts := []string{
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + sockets,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
		"-c", "shared_buffers=128MB",
	}
	if c.opts.SSL {
		opts = append(opts, "-c", "ssl=on")
	}
	if c.opts.ClientCerts {
		opts = append(opts, "-c", "ssl_ca_file="+c.CAFile())
	}
	quoted := make([]string, len(opts))
	for i, o := range opts {
		quoted[i] = shellQuote(o) // pg_ctl hands -o to /bin/sh
	}
	err := c.run("pg_ctl", "start", "-w", "-t", "60", "-D", c.dataDir(), "-l", c.logFile(), "-o", strings.Join(quoted, " "))
	if err != nil {
		return fmt.Errorf("%w\n--- tail of %s ---\n%s", err, c.logFile(), c.logTail(30))
	}
	c.running = true
	return nil
}

// Stop shuts the server down (fast mode: clients are disconnected) and keeps its data, so fault
// tests can observe an unavailable database and then Start it again.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return errors.New("pgtest: cluster destroyed")
	}
	if !c.running {
		return nil
	}
	if err := c.run("pg_ctl", "stop", "-w", "-t", "60", "-m", "fast", "-D", c.dataDir()); err != nil {
		return err
	}
	c.running = false
	return nil
}

// Destroy stops the server, without waiting for clients, and removes its directory. It may be
// called any number of times, also after Stop or a failed start.
func (c *Cluster) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	c.destroyed = true
	c.running = false
	defer track(c, false)
	var errs []error
	if _, err := os.Stat(filepath.Join(c.dataDir(), "postmaster.pid")); err == nil {
		if err := c.run("pg_ctl", "stop", "-w", "-t", "30", "-m", "immediate", "-D", c.dataDir()); err != nil {
			// Last resort, so no server outlives the test.
			if pid := c.PostmasterPID(); pid > 0 {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					errs = append(errs, fmt.Errorf("kill postmaster %d: %w", pid, err))
				}
			}
		}
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, err)
	}
	if c.lifeline != nil {
		c.lifeline.Close()
		c.watchdog.Wait() // its clean-up finds nothing left to do
	}
	return errors.Join(errs...)
}

// PostmasterPID is the running server's pid (data/postmaster.pid's first line), or 0. It checks
// the process really is this cluster's server, as a pid file outlives a crashed server and its
// pid may be reused. Tests use it to stop the server's process (SIGSTOP) or to watch it.
func (c *Cluster) PostmasterPID() int {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return 0
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || cwd != c.dataDir() {
		return 0
	}
	return pid
}

// Host is where the server listens; only loopback, so a test cluster is never reachable from
// the network.
func (c *Cluster) Host() string { return "127.0.0.1" }

// Port stays the same for the cluster's whole life, across Stop and Start.
func (c *Cluster) Port() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.port
}

// Password is the superuser's ("postgres") password for TCP logins, random per cluster.
func (c *Cluster) Password() string { return c.password }

// CAFile is the path of the PEM certificate that signed the server's certificate, for
// sslrootcert; empty without Options.SSL.
func (c *Cluster) CAFile() string {
	if !c.opts.SSL {
		return ""
	}
	return filepath.Join(c.dir, "ca.crt")
}

// CAPEM is CAFile's content, for building a tls.Config without touching the file.
func (c *Cluster) CAPEM() []byte {
	if c.ca == nil {
		return nil
	}
	return c.ca.PEM()
}

// CA signs the server's certificate and, with Options.ClientCerts, the client certificates
// it admits; nil without Options.SSL.
func (c *Cluster) CA() *CA { return c.ca }

// Dir is the cluster's directory: data/ holds the data directory, postgres.log the server log.
func (c *Cluster) Dir() string { return c.dir }

// URL is a connection URL for the superuser over TCP without TLS, the form the service's own
// configuration takes. Change sslmode and add sslrootcert=CAFile() to test TLS.
func (c *Cluster) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, c.password),
		Host:     net.JoinHostPort(c.Host(), strconv.Itoa(c.Port())),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// ConnConfig connects as the superuser over TCP without TLS. PG* environment variables of the
// developer's shell cannot redirect it: where, who and how are all set here.
func (c *Cluster) ConnConfig(database string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(c.URL(database))
	if err != nil {
		return nil, err
	}
	cfg.TLSConfig = nil
	cfg.Fallbacks = nil
	cfg.ValidateConnect = nil // PGTARGETSESSIONATTRS
	cfg.ConnectTimeout = 10 * time.Second
	return cfg, nil
}

// Connect opens a superuser connection to database (ConnConfig); the caller closes it.
func (c *Cluster) Connect(ctx context.Context, database string) (*pgx.Conn, error) {
	cfg, err := c.ConnConfig(database)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// Exec runs one statement (several when args is empty) on a new superuser connection, for
// setup such as CREATE ROLE that has no place in the schema.
func (c *Cluster) Exec(ctx context.Context, database, sql string, args ...any) error {
	conn, err := c.Connect(ctx, database)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// CreateDatabase creates a database and, when withSchema is set, the analytics tables in it
// (schema.DDL, in the public schema).
func (c *Cluster) CreateDatabase(ctx context.Context, name string, withSchema bool) error {
	ddl := ""
	if withSchema {
		ddl = schema.DDL
	}
	return c.CreateDatabaseWith(ctx, name, ddl)
}

// CreateDatabaseWith creates a database and runs ddl in it (nothing when ddl is empty).
func (c *Cluster) CreateDatabaseWith(ctx context.Context, name, ddl string) error {
	if err := c.Exec(ctx, "postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	if ddl != "" {
		if err := c.Exec(ctx, name, ddl); err != nil {
			return fmt.Errorf("apply schema in %q: %w", name, err)
		}
	}
	return nil
}

// DropDatabase drops a database even while clients are connected (WITH (FORCE)), as a test's
// connection pool may still be open when its clean-up runs. A missing database is no error.
func (c *Cluster) DropDatabase(ctx context.Context, name string) error {
	if err := c.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %q: %w", name, err)
	}
	return nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }
func (c *Cluster) logFile() string { return filepath.Join(c.dir, "postgres.log") }

// LogFile is the path of the server's log, for tests that read what the server logged.
func (c *Cluster) LogFile() string { return c.logFile() }

func (c *Cluster) logTail(n int) string {
	b, err := os.ReadFile(c.logFile())
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	return tail(string(b), n)
}

// run runs a server binary as the server's user and returns its output in the error.
func (c *Cluster) run(name string, args ...string) error {
	return c.runWith(nil, name, args...)
}

// runWith is run with env added to the (PG*-free) environment.
func (c *Cluster) runWith(env []string, name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bindir, name), args...)
	cmd.Dir = c.dir // the postgres user may not be allowed into our working directory
	cmd.Env = append(serverEnv(), env...)
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// pg_ctl's server redirects its output to the log; should anything keep our pipe open
	// anyway, do not hang on it.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgtest: %s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out.String(), 20))
	}
	return nil
}

// writeFile writes a file the server's user owns.
func (c *Cluster) writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, data, mode); err != nil {
		return err
	}
	return c.chown(path)
}

func (c *Cluster) chown(path string) error {
	if c.cred == nil {
		return nil
	}
	return os.Chown(path, int(c.cred.Uid), int(c.cred.Gid))
}

// FreePort returns a TCP port on the loopback interface that was free a moment ago: for a
// cluster, the service under test, or anything else a test starts on loopback. It is
// launcher.FreePort, which the tools that are not tests use too.
func FreePort() (int, error) { return launcher.FreePort() }

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
