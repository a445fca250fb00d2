package systemtest

// libpq's TLS modes (DATABASE__SSL_MODE), client certificates and DATABASE_URL, against real
// clusters: one that admits the service's role by certificate only, and the plain shared one.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
	"github.com/emsanalytics/emsquery/schema"
)

// tlsWarnings are parts of every of every start-up warning about the database connection's TLS.
var tlsWarnings = []string{"the connection to the database is", "is set but ignored"}

// serves checks that svc reached db: healthz 200, a query answered with want, and the service's
// sessions on db all with TLS or all without (wantSSL).
func serves(t *testing.T, svc *servicetest.Service, db servicetest.DB, want int64, wantSSL bool) {
	t.Helper()
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
		t.Errorf("records_count = %d, want %d", got, want)
	}
	n, allSSL := sessions(t, db)
	if n == 0 {
		t.Fatal("no service session in pg_stat_activity")
	}
	if allSSL != wantSSL {
		t.Errorf("%d service sessions, all TLS = %v, want %v", n, allSSL, wantSSL)
	}
}

// refused checks that svc, running, could not reach db: healthz 503, a query
// SERVICE_UNAVAILABLE, no session, and the log's "database unreachable" warning with why
// (reason, from the server or the TLS handshake).
func refused(t *testing.T, svc *servicetest.Service, db servicetest.DB, reason string) {
	t.Helper()
	m := wantJSON(t, svc, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	if m["database"] == "ok" {
		t.Errorf("healthz: database = ok")
	}
	r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	if len(r.Errors) == 0 || r.Errors[0].Code() != "SERVICE_UNAVAILABLE" {
		t.Errorf("query: want SERVICE_UNAVAILABLE, got %s", r.Raw)
	}
	servicetest.WaitFor(t, 5*time.Second, "the database unreachable warning with "+reason, func() bool {
		out := svc.Output()
		i := strings.Index(out, "msg=\"database unreachable")
		return i >= 0 && strings.Contains(out[i:], reason)
	})
	if n, _ := sessions(t, db); n != 0 {
		t.Errorf("%d service sessions, want 0", n)
	}
}

// startupLog waits for the listening line and returns the output before it: the pool's line
// and the start-up warnings.
func startupLog(t *testing.T, svc *servicetest.Service) string {
	t.Helper()
	servicetest.WaitFor(t, 5*time.Second, "the listening line", func() bool { return strings.Contains(svc.Output(), "msg=listening") })
	out := svc.Output()
	return out[:strings.Index(out, "msg=listening")]
}

// wantLog checks the pool's start-up line for its ssl_mode and tls values and the start-up
// warnings about TLS for the given ones (each a part of a message), no more.
func wantLog(t *testing.T, out, sslMode, tls string, warnings ...string) {
	t.Helper()
	want := "ssl_mode=" + sslMode + " tls=" + tls
	if strings.Contains(tls, " ") {
		want = "ssl_mode=" + sslMode + " tls=" + strconv.Quote(tls)
	}
	if !strings.Contains(out, want) {
		t.Errorf("start-up log lacks %s:\n%s", want, out)
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "level=WARNING") {
			continue
		}
		for _, w := range tlsWarnings {
			if strings.Contains(line, w) {
				n++
				break
			}
		}
	}
	for _, w := range warnings {
		if !strings.Contains(out, w) {
			t.Errorf("start-up log lacks the warning %q:\n%s", w, out)
		}
	}
	if n != len(warnings) {
		t.Errorf("%d TLS warnings at start-up, want %d:\n%s", n, len(warnings), out)
	}
}

// A cluster that admits the service's role (the schema's emsquery_reader) only over TLS with a
// client certificate its CA signed, and whose server certificate names localhost only: the
// service connects with verify-full and the certificate, without a password, and each part
// missing or wrong keeps it out with the reason in its log.
func TestDatabaseTLSClientCert(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{SSL: true, ClientCerts: true, ServerCertHost: "localhost"})
	certFile, keyFile, err := c.CA().WriteClientCert(t.TempDir(), "emsquery_reader")
	if err != nil {
		t.Fatal(err)
	}
	// As the reader with its certificate and no password: the settings a test leaves unset
	// (empty) are removed from servicetest's.
	reader := func(host, mode string, more map[string]string) map[string]string {
		env := map[string]string{
			"DATABASE__HOST": host, "DATABASE__USERNAME": "emsquery_reader", "DATABASE__PASSWORD": "", "DATABASE__ENCRYPT": "",
			"DATABASE__SSL_MODE": mode, "DATABASE__SSL_ROOT_CERT": c.CAFile(),
			"DATABASE__SSL_CERT": certFile, "DATABASE__SSL_KEY": keyFile,
		}
		for k, v := range more {
			env[k] = v
		}
		return env
	}

	t.Run("verify-full with a client certificate", func(t *testing.T) {
		t.Parallel()
		db := servicetest.FixtureDBOn(t, c)
		svc := servicetest.Start(t, db, reader("localhost", "verify-full", nil))
		wantLog(t, startupLog(t, svc), "verify-full", "on, certificate verified, client certificate")
		serves(t, svc, db, expectedCount(t, db), true)
		usersAre(t, db, "emsquery_reader")
	})
	t.Run("no client certificate", func(t *testing.T) {
		t.Parallel()
		db := servicetest.NewDBOn(t, c)
		svc := servicetest.Start(t, db, reader("localhost", "verify-full", map[string]string{"DATABASE__SSL_CERT": "", "DATABASE__SSL_KEY": ""}))
		wantLog(t, startupLog(t, svc), "verify-full", "on, certificate verified")
		refused(t, svc, db, "connection requires a valid client certificate")
	})
	t.Run("verify-full at a name the certificate lacks", func(t *testing.T) {
		t.Parallel()
		db := servicetest.NewDBOn(t, c)
		svc := servicetest.Start(t, db, reader("127.0.0.1", "verify-full", nil))
		refused(t, svc, db, "127.0.0.1")
	})
	t.Run("verify-ca at that name", func(t *testing.T) {
		t.Parallel()
		db := servicetest.NewDBOn(t, c)
		svc := servicetest.Start(t, db, reader("127.0.0.1", "verify-ca", nil))
		wantLog(t, startupLog(t, svc), "verify-ca", "on, certificate chain verified, host name not checked, client certificate")
		serves(t, svc, db, 0, true)
	})
	t.Run("require with another CA's root certificate", func(t *testing.T) {
		t.Parallel()
		other, err := pgtest.NewCA()
		if err != nil {
			t.Fatal(err)
		}
		otherRoot := writeFile(t, "other-ca.crt", other.PEM())
		db := servicetest.NewDBOn(t, c)
		// libpq's require with a root certificate is verify-ca: the chain is checked too.
		svc := servicetest.Start(t, db, reader("127.0.0.1", "require", map[string]string{"DATABASE__SSL_ROOT_CERT": otherRoot}))
		wantLog(t, startupLog(t, svc), "require", "on, certificate chain verified, host name not checked, client certificate")
		refused(t, svc, db, "certificate signed by unknown authority")
	})
	t.Run("allow: plain refused, then TLS", func(t *testing.T) {
		t.Parallel()
		db := servicetest.NewDBOn(t, c)
		svc := servicetest.Start(t, db, reader("127.0.0.1", "allow", nil))
		wantLog(t, startupLog(t, svc), "allow", "only when the server requires it (plain first), certificate not verified, client certificate",
			"DATABASE__SSL_MODE=allow: the connection to the database is plain text unless the server requires TLS",
			"DATABASE__SSL_ROOT_CERT is set but ignored: with DATABASE__SSL_MODE=allow no certificate is checked")
		serves(t, svc, db, 0, true)
	})
	t.Run("a key without its certificate", func(t *testing.T) {
		t.Parallel()
		svc := servicetest.Launch(t, servicetest.DB{}, map[string]string{"DATABASE__SSL_MODE": "verify-full", "DATABASE__SSL_KEY": keyFile})
		code, err := svc.Wait(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if out := svc.Output(); code != 2 || !strings.Contains(out, "DATABASE__SSL_CERT: not set") {
			t.Errorf("exit code %d, want 2 with DATABASE__SSL_CERT named:\n%s", code, out)
		}
	})
	t.Run("a certificate file that is not there", func(t *testing.T) {
		t.Parallel()
		db := servicetest.NewDBOn(t, c)
		svc := servicetest.Launch(t, db, reader("localhost", "verify-full", map[string]string{"DATABASE__SSL_CERT": certFile + ".missing"}))
		code, err := svc.Wait(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if out := svc.Output(); code != 1 || !strings.Contains(out, "cannot start: DATABASE__SSL_CERT: open "+certFile+".missing") {
			t.Errorf("exit code %d, want 1 with DATABASE__SSL_CERT and the file named:\n%s", code, out)
		}
	})
}

// The modes against a server without TLS: prefer falls back to a plain connection, require
// does not, disable never tries TLS. Another value stops the start.
func TestDatabaseTLSModesWithoutServerTLS(t *testing.T) {
	t.Parallel()
	t.Run("prefer", func(t *testing.T) {
		t.Parallel()
		db := servicetest.NewDB(t)
		svc := servicetest.Start(t, db, map[string]string{"DATABASE__ENCRYPT": "", "DATABASE__SSL_MODE": "prefer"})
		wantLog(t, startupLog(t, svc), "prefer", "when the server offers it (else plain), certificate not verified",
			"DATABASE__SSL_MODE=prefer: the connection to the database is plain text when the server offers no TLS")
		serves(t, svc, db, 0, false)
	})
	t.Run("require", func(t *testing.T) {
		t.Parallel()
		db := servicetest.NewDB(t)
		svc := servicetest.Start(t, db, map[string]string{"DATABASE__ENCRYPT": "no", "DATABASE__SSL_MODE": "require"})
		wantLog(t, startupLog(t, svc), "require", "on, certificate not verified",
			"DATABASE__SSL_MODE=require: the connection to the database is encrypted but the server is not verified")
		refused(t, svc, db, "server refused TLS connection")
	})
	t.Run("disable", func(t *testing.T) {
		t.Parallel()
		db := servicetest.NewDB(t)
		// DATABASE__ENCRYPT=yes (and the trust default) lose to DATABASE__SSL_MODE.
		svc := servicetest.Start(t, db, map[string]string{"DATABASE__ENCRYPT": "yes", "DATABASE__SSL_MODE": "disable"})
		wantLog(t, startupLog(t, svc), "disable", "off")
		serves(t, svc, db, 0, false)
	})
	t.Run("another value", func(t *testing.T) {
		t.Parallel()
		svc := servicetest.Launch(t, servicetest.DB{}, map[string]string{"DATABASE__SSL_MODE": "verify"})
		code, err := svc.Wait(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if out := strings.TrimSpace(svc.Output()); code != 2 || !strings.Contains(out, `DATABASE__SSL_MODE: "verify" is not one of`) || strings.Contains(out, "\n") {
			t.Errorf("exit code %d, want 2 and one line naming DATABASE__SSL_MODE:\n%s", code, out)
		}
	})
}

// DATABASE_URL with percent-encoded user, password and database and its sslmode is the base;
// DATABASE__NAME set overrides its database, while the defaults (DATABASE__NAME=postgres,
// DATABASE__ENCRYPT=yes, ...) override nothing.
func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	fixture := servicetest.FixtureDB(t)
	c := fixture.Cluster
	ctx := context.Background()
	suffix := strings.ToLower(servicetest.RandomKey()[:8])
	odd := "ems db/" + suffix + "?#%"
	if err := c.CreateDatabaseWith(ctx, odd, schema.Plain.DDL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DropDatabase(context.Background(), odd) })
	role := "ems url@" + suffix
	password := `p@ss:w/rd#?%41 & it's` + servicetest.RandomKey()[:8]
	ident := pgx.Identifier{role}.Sanitize()
	if err := c.Exec(ctx, "postgres", "CREATE ROLE "+ident+" LOGIN PASSWORD "+quoteLiteral(password)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, db := range []string{fixture.Name, odd} {
			_ = c.Exec(context.Background(), db, "DROP OWNED BY "+ident)
		}
		_ = c.Exec(context.Background(), "postgres", "DROP ROLE "+ident)
	})
	for _, db := range []string{fixture.Name, odd} {
		if err := c.Exec(ctx, db, "GRANT USAGE ON SCHEMA public TO "+ident+"; GRANT SELECT ON ALL TABLES IN SCHEMA public TO "+ident); err != nil {
			t.Fatal(err)
		}
	}
	u := "postgresql://" + escape(role) + ":" + escape(password) + "@" + c.Host() + ":" + strconv.Itoa(c.Port()) + "/" + escape(odd) + "?sslmode=disable"
	// Nothing of servicetest's DATABASE__* settings but the URL.
	env := map[string]string{"DATABASE__HOST": "", "DATABASE__PORT": "", "DATABASE__NAME": "", "DATABASE__USERNAME": "",
		"DATABASE__PASSWORD": "", "DATABASE__ENCRYPT": "", "DATABASE_URL": u}
	oddDB := fixture
	oddDB.Name = odd

	// One after the other: each checks that the other database has no session of the service.
	t.Run("the URL alone", func(t *testing.T) {
		svc := servicetest.Start(t, servicetest.DB{}, env)
		wantLog(t, startupLog(t, svc), "disable", "off")
		serves(t, svc, oddDB, 0, false)
		if n, _ := sessions(t, fixture); n != 0 {
			t.Errorf("%d sessions on the other database", n)
		}
		usersAre(t, oddDB, role)
		stop(t, svc)
		assertNoSecret(t, svc, password, escape(password))
	})
	t.Run("DATABASE__NAME set", func(t *testing.T) {
		named := map[string]string{"DATABASE__NAME": fixture.Name}
		for k, v := range env {
			if k != "DATABASE__NAME" {
				named[k] = v
			}
		}
		svc := servicetest.Start(t, servicetest.DB{}, named)
		serves(t, svc, fixture, expectedCount(t, fixture), false)
		usersAre(t, fixture, role)
		if n, _ := sessions(t, oddDB); n != 0 {
			t.Errorf("%d sessions on the URL's database", n)
		}
	})
}

// escape percent-encodes s as a part of a connection URL: everything but letters and digits.
func escape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c)|0x100, 16)[1:]))
		}
	}
	return b.String()
}

// usersAre checks that the service's sessions on db are all the role's.
func usersAre(t *testing.T, db servicetest.DB, role string) {
	t.Helper()
	rows, err := db.Pool(t).Query(context.Background(), `SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = $1 AND application_name = 'emsquery'`, db.Name)
	if err != nil {
		t.Fatal(err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(users) != 1 || users[0] != role {
		t.Errorf("service sessions on %q belong to %v (%v), want [%s]", db.Name, users, err, role)
	}
}

// writeFile writes data to a file named name in a temporary folder and returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
