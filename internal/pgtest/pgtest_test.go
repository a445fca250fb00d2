package pgtest_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/procstat"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, connString string) (*pgx.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	if err == nil {
		t.Cleanup(func() { conn.Close(context.Background()) })
	}
	return conn, err
}

func selectOne(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("SELECT 1 = %d, %v", n, err)
	}
}

func TestSharedConnects(t *testing.T) {
	c := pgtest.Shared(t)
	if c != pgtest.Shared(t) {
		t.Fatal("Shared returned a second cluster")
	}
	if c.Host() != "127.0.0.1" || c.Port() <= 0 || c.Password() == "" || c.CAFile() != "" {
		t.Fatalf("Host %q Port %d Password %q CAFile %q", c.Host(), c.Port(), c.Password(), c.CAFile())
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), "data", "PG_VERSION")); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ConnConfig("postgres")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	selectOne(t, conn)

	// The settings that make the cluster fast and roomy, and the authentication the service
	// will meet in production.
	for setting, want := range map[string]string{
		"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
		"max_connections": "200", "shared_buffers": "128MB", "listen_addresses": "127.0.0.1",
		"server_encoding": "UTF8", "password_encryption": "scram-sha-256", "ssl": "off",
	} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", setting, got, err, want)
		}
	}

	// A wrong password is refused: TCP logins really authenticate.
	u, _ := url.Parse(c.URL("postgres"))
	u.User = url.UserPassword("postgres", "wrong")
	if _, err := connect(t, u.String()); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("wrong password: err = %v", err)
	}
	if _, err := connect(t, c.URL("postgres")); err != nil {
		t.Errorf("URL: %v", err)
	}
}

func TestExec(t *testing.T) {
	c := pgtest.Shared(t)
	db := pgtest.NewDatabase(t, c)
	ctx := context.Background()
	role := "r_" + strings.TrimPrefix(db, "t_")
	if err := c.Exec(ctx, db, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD 'secret'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Exec(context.Background(), "postgres", "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	})
	if err := c.Exec(ctx, db, "GRANT SELECT ON fact_record TO "+pgx.Identifier{role}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, db, "INSERT INTO dim_station VALUES ($1, $2)", 1, `Nord "Ost" ✓`); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, db, "SELECT no_such_column FROM dim_station"); err == nil {
		t.Fatal("Exec hid an error")
	}
	u, _ := url.Parse(c.URL(db))
	u.User = url.UserPassword(role, "secret")
	conn, err := connect(t, u.String())
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM fact_record").Scan(&n); err != nil {
		t.Fatal(err)
	}
}

func TestNewDatabaseAppliesSchemaAndDrops(t *testing.T) {
	c := pgtest.Shared(t)
	var name string
	t.Run("inner", func(t *testing.T) {
		name = pgtest.NewDatabase(t, c)
		if other := pgtest.NewDatabase(t, c); other == name {
			t.Fatalf("two databases named %q", name)
		}
		conn, err := connect(t, c.URL(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"dim_station", "dim_resource", "dim_patient", "fact_record", "fact_oxygen"} {
			var exists bool
			if err := conn.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", "public."+table).Scan(&exists); err != nil || !exists {
				t.Errorf("table %s: exists=%v err=%v", table, exists, err)
			}
		}
		// Left open on purpose: the drop at clean-up must not be blocked by it.
		_ = conn
	})
	conn, err := connect(t, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %q still there after the test: count %d, %v", name, n, err)
	}

	if err := c.CreateDatabase(context.Background(), "Mixed Case \"db\"", false); err != nil {
		t.Fatal(err)
	}
	if err := c.DropDatabase(context.Background(), "Mixed Case \"db\""); err != nil {
		t.Fatal(err)
	}
	if err := c.DropDatabase(context.Background(), "never_existed"); err != nil {
		t.Fatal(err)
	}
}

func TestStopStart(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{})
	ctx := context.Background()
	if err := c.Exec(ctx, "postgres", "CREATE TABLE survives (x int); INSERT INTO survives VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	held, err := connect(t, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	port := c.Port()

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := connect(t, c.URL("postgres")); err == nil {
		t.Fatal("connected to a stopped cluster")
	} else {
		t.Logf("while stopped: %v", err)
	}
	if err := held.Ping(ctx); err == nil {
		t.Fatal("connection survived Stop")
	}

	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if c.Port() != port {
		t.Fatalf("port changed from %d to %d", port, c.Port())
	}
	conn, err := connect(t, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var x int
	if err := conn.QueryRow(ctx, "SELECT x FROM survives").Scan(&x); err != nil || x != 42 {
		t.Fatalf("data after restart: %d, %v", x, err)
	}
}

func TestSSL(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{SSL: true})
	ctx := context.Background()

	pemFile, err := os.ReadFile(c.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pemFile, c.CAPEM()) {
		t.Fatal("CAFile and CAPEM differ")
	}
	st, err := os.Stat(filepath.Join(c.Dir(), "data", "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("server.key mode %v", st.Mode().Perm())
	}

	withSSL := func(host, sslmode, rootcert string) string {
		u, _ := url.Parse(c.URL("postgres"))
		u.Host = fmt.Sprintf("%s:%d", host, c.Port())
		q := url.Values{"sslmode": {sslmode}}
		if rootcert != "" {
			q.Set("sslrootcert", rootcert)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}

	for _, host := range []string{"127.0.0.1", "localhost"} {
		conn, err := connect(t, withSSL(host, "verify-full", c.CAFile()))
		if err != nil {
			t.Fatalf("verify-full to %s with the CA: %v", host, err)
		}
		var ssl bool
		if err := conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
			t.Fatalf("pg_stat_ssl.ssl = %v, %v", ssl, err)
		}
	}

	_, err = connect(t, withSSL("127.0.0.1", "verify-full", ""))
	var unknown x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	if !errors.As(err, &unknown) && !errors.As(err, &verify) {
		t.Fatalf("verify-full without the CA: want a certificate error, got %v", err)
	}
	t.Logf("without the CA: %v", err)

	// The same CA through a tls.Config built from CAPEM, as code that does not take files would.
	cfg, err := c.ConnConfig("postgres")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAPEM())
	cfg.TLSConfig = &tls.Config{RootCAs: pool, ServerName: c.Host()}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("tls.Config from CAPEM: %v", err)
	}
	conn.Close(ctx)

	// Host lines accept plain connections too.
	conn2, err := connect(t, withSSL("127.0.0.1", "disable", ""))
	if err != nil {
		t.Fatalf("sslmode=disable: %v", err)
	}
	selectOne(t, conn2)
}

// gone reports whether pid no longer runs; a zombie counts as gone, since the container's init
// may be slow to reap the daemonized server.
func gone(pid int) bool {
	st, err := procstat.ReadStat(pid)
	return err != nil || st.State == 'Z'
}

func waitGone(t *testing.T, pid int, dir string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, statErr := os.Stat(dir)
		if gone(pid) && errors.Is(statErr, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15s: postmaster %d gone=%v, dir %s: %v", pid, gone(pid), dir, statErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDestroy(t *testing.T) {
	t.Parallel()
	pgtest.Shared(t) // skip or fail by the package's rule when PostgreSQL is unavailable
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PostmasterPID()
	if pid == 0 {
		t.Fatal("no running postmaster after Start")
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := c.Destroy(); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
	waitGone(t, pid, c.Dir())
	if err := c.Start(); err == nil {
		t.Fatal("Start after Destroy succeeded")
	}

	// Destroy after Stop.
	c, err = pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dir after Destroy: %v", err)
	}
}

// TestHelperProcess is the child of the crash tests below: it starts the shared cluster, says
// where it is, then dies the way it is told to.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("PGTEST_HELPER")
	if mode == "" {
		t.Skip("helper for the crash tests")
	}
	c := pgtest.Shared(t)
	fmt.Printf("CLUSTER %s %d\n", c.Dir(), c.PostmasterPID()) // 0 fails the parent
	os.Stdout.Sync()
	switch mode {
	case "panic":
		panic("test panics") // crashes the process from the test goroutine: no defers in Main run
	case "wait":
		time.Sleep(time.Minute) // until the parent signals
	}
}

// crashChild runs TestHelperProcess in a child test binary, kills it as told and checks that
// its cluster disappears. It returns how the child ended.
func crashChild(t *testing.T, mode string, kill func(*os.Process)) error {
	t.Helper()
	pgtest.Shared(t) // skip or fail by the package's rule when PostgreSQL is unavailable
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PGTEST_HELPER="+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var dir string
	var pid int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "CLUSTER %s %d", &dir, &pid); err == nil {
			break
		}
	}
	if pid == 0 {
		cmd.Wait()
		t.Fatalf("child did not report its cluster; stderr:\n%s", stderr.String())
	}
	kill(cmd.Process)
	go func() {
		for sc.Scan() {
		}
	}()
	err = cmd.Wait()
	t.Logf("child exited: %v", err)
	waitGone(t, pid, dir)
	return err
}

func TestCleanupAfterPanickingTest(t *testing.T) {
	t.Parallel()
	crashChild(t, "panic", func(*os.Process) {})
}

func TestCleanupAfterSIGKILL(t *testing.T) {
	t.Parallel()
	crashChild(t, "wait", func(p *os.Process) { p.Kill() })
}

func TestCleanupAfterSIGTERM(t *testing.T) {
	t.Parallel()
	err := crashChild(t, "wait", func(p *os.Process) { p.Signal(syscall.SIGTERM) })
	// 128+15 comes from Main's handler, not from the signal's default action.
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 143 {
		t.Fatalf("child ended with %v, want exit status 143 from pgtest.Main", err)
	}
}

// A ClientCerts cluster admits a role by its certificate alone, only over TLS; its server
// certificate names only ServerCertHost.
func TestClientCerts(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{SSL: true, ClientCerts: true, ServerCertHost: "localhost"})
	ctx := context.Background()
	if err := c.Exec(ctx, "postgres", "CREATE ROLE certuser LOGIN PASSWORD 'pw'"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile, err := c.CA().WriteClientCert(dir, "certuser")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("client key: %v, %v", st, err)
	}
	otherCert, otherKey, err := c.CA().WriteClientCert(dir, "someoneelse")
	if err != nil {
		t.Fatal(err)
	}
	conninfo := func(host, sslmode, user, cert, key string) string {
		u := url.URL{Scheme: "postgres", User: url.User(user), Host: fmt.Sprintf("%s:%d", host, c.Port()), Path: "/postgres"}
		q := url.Values{"sslmode": {sslmode}, "sslrootcert": {c.CAFile()}, "connect_timeout": {"10"}}
		if cert != "" {
			q.Set("sslcert", cert)
			q.Set("sslkey", key)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}

	conn, err := connect(t, conninfo("localhost", "verify-full", "certuser", certFile, keyFile))
	if err != nil {
		t.Fatalf("verify-full with the client certificate: %v", err)
	}
	var user string
	var ssl bool
	if err := conn.QueryRow(ctx, "SELECT current_user, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&user, &ssl); err != nil || user != "certuser" || !ssl {
		t.Fatalf("current_user %q, ssl %v, %v", user, ssl, err)
	}

	for _, tc := range []struct {
		name, connString, want string
	}{
		{"no client certificate", conninfo("localhost", "verify-full", "certuser", "", ""), "certificate"},
		{"another role's certificate", conninfo("localhost", "verify-full", "certuser", otherCert, otherKey), "certificate authentication failed"},
		{"no TLS, with the password", strings.Replace(conninfo("localhost", "disable", "certuser", "", ""), "certuser@", "certuser:pw@", 1), "rejects connection"},
		{"a name the server certificate lacks", conninfo("127.0.0.1", "verify-full", "certuser", certFile, keyFile), "127.0.0.1"},
	} {
		if _, err := connect(t, tc.connString); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one with %q", tc.name, err, tc.want)
		}
	}
	// verify-ca checks the chain only: the same server at 127.0.0.1 is accepted.
	if _, err := connect(t, conninfo("127.0.0.1", "verify-ca", "certuser", certFile, keyFile)); err != nil {
		t.Errorf("verify-ca at 127.0.0.1: %v", err)
	}
	// The superuser keeps its password over plain TCP (the tests' own connections).
	conn, err = connect(t, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	selectOne(t, conn)
}

func TestConf(t *testing.T) {
	c := pgtest.SharedWith(t, pgtest.Options{Conf: "wal_level = logical\nmax_replication_slots = 12"})
	cfg, err := c.ConnConfig("postgres")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var level, slots string
	if err := conn.QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('max_replication_slots')").Scan(&level, &slots); err != nil {
		t.Fatal(err)
	}
	if level != "logical" || slots != "12" {
		t.Errorf("wal_level %q, max_replication_slots %q; want logical, 12", level, slots)
	}
}
