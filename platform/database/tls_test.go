package database

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/emsanalytics/emsquery/internal/pgtest"
)

// pki writes a CA's certificate and a client certificate with its key to a temporary folder.
type pki struct{ root, cert, key string }

func newPKI(t *testing.T) pki {
	t.Helper()
	ca, err := pgtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := pki{root: filepath.Join(dir, "root.crt")}
	if err := os.WriteFile(p.root, ca.PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if p.cert, p.key, err = ca.WriteClientCert(dir, "reader"); err != nil {
		t.Fatal(err)
	}
	return p
}

// attempts lists a configuration's connection attempts in the order pgconn makes them: host:port
// and "plain", or "tls" with what it verifies ("none"; "chain"; "full" and the name checked)
// and "+cert" when a client certificate is sent.
func attempts(cc *pgconn.Config) []string {
	var out []string
	for _, g := range attemptGroups(cc) {
		for _, a := range g {
			s := a.Host + ":" + strconv.Itoa(int(a.Port)) + " "
			tc := a.TLSConfig
			switch {
			case tc == nil:
				s += "plain"
			case !tc.InsecureSkipVerify:
				s += "tls full " + tc.ServerName
			case tc.VerifyPeerCertificate != nil:
				s += "tls chain"
			default:
				s += "tls none"
			}
			if tc != nil && tc.RootCAs != nil {
				s += " +root"
			}
			if tc != nil && len(tc.Certificates) > 0 {
				s += " +cert"
			}
			out = append(out, s)
		}
	}
	return out
}

// Every TLS mode comes out as libpq's, for each host of a list: the attempts pgconn makes, their
// order and what each verifies, and the start-up log's summary of it.
func TestPoolConfigTLSModes(t *testing.T) {
	p := newPKI(t)
	limits := testConfig("", 0, "", "").Limits
	base := testConfig("db1", 5432, "analytics", "").Database
	base.Hosts, base.Ports = []string{"db1", "db2", "/run/postgresql"}, []int{5432, 5433, 5434}
	type pair struct{ encrypt, trust bool }
	for _, c := range []struct {
		name     string
		mode     SSLMode
		pair     pair
		root     bool // DATABASE__SSL_ROOT_CERT set
		cert     bool // DATABASE__SSL_CERT and DATABASE__SSL_KEY set
		db1, db2 []string
		tls      string
	}{
		{"ENCRYPT=no", "", pair{false, true}, true, true, []string{"plain"}, []string{"plain"}, "off"},
		// The specification's trust: nothing is checked, not even with a root certificate.
		{"ENCRYPT=yes TRUST=yes", "", pair{true, true}, true, false, []string{"tls none"}, []string{"tls none"}, "on, certificate not verified"},
		{"ENCRYPT=yes TRUST=no", "", pair{true, false}, true, true, []string{"tls full db1 +root +cert"}, []string{"tls full db2 +root +cert"}, "on, certificate verified, client certificate"},
		{"ENCRYPT=yes TRUST=no, system roots", "", pair{true, false}, false, false, []string{"tls full db1"}, []string{"tls full db2"}, "on, certificate verified"},
		// DATABASE__SSL_MODE wins over the pair.
		{"disable", SSLDisable, pair{true, false}, true, true, []string{"plain"}, []string{"plain"}, "off"},
		{"allow", SSLAllow, pair{false, false}, true, false, []string{"plain", "tls none"}, []string{"plain", "tls none"}, "only when the server requires it (plain first), certificate not verified"},
		{"prefer", SSLPrefer, pair{false, false}, false, true, []string{"tls none +cert", "plain"}, []string{"tls none +cert", "plain"}, "when the server offers it (else plain), certificate not verified, client certificate"},
		{"require", SSLRequire, pair{false, false}, false, false, []string{"tls none"}, []string{"tls none"}, "on, certificate not verified"},
		// libpq: require with a root certificate is verify-ca.
		{"require with a root certificate", SSLRequire, pair{false, false}, true, false, []string{"tls chain +root"}, []string{"tls chain +root"}, "on, certificate chain verified, host name not checked"},
		{"verify-ca", SSLVerifyCA, pair{true, true}, true, true, []string{"tls chain +root +cert"}, []string{"tls chain +root +cert"}, "on, certificate chain verified, host name not checked, client certificate"},
		{"verify-full", SSLVerifyFull, pair{true, true}, true, true, []string{"tls full db1 +root +cert"}, []string{"tls full db2 +root +cert"}, "on, certificate verified, client certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := base
			d.SSLMode, d.Encrypt, d.TrustServerCertificate = c.mode, bool(c.pair.encrypt), bool(c.pair.trust)
			if c.root {
				d.SSLRootCert = p.root
			}
			if c.cert {
				d.SSLCert, d.SSLKey = p.cert, p.key
			}
			pc, err := PoolConfig(d, limits)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, a := range c.db1 {
				want = append(want, "db1:5432 "+a)
			}
			for _, a := range c.db2 {
				want = append(want, "db2:5433 "+a)
			}
			// A Unix socket never has TLS, as in libpq.
			want = append(want, "/run/postgresql:5434 plain")
			if got := attempts(&pc.ConnConfig.Config); !reflect.DeepEqual(got, want) {
				t.Errorf("attempts\n got %q\nwant %q", got, want)
			}
			if got := tlsPlanOf(&pc.ConnConfig.Config).String(); got != c.tls {
				t.Errorf("tls %q, want %q", got, c.tls)
			}
			// The health check's connections of one host each make that host's attempts.
			if groups := attemptGroups(&pc.ConnConfig.Config); len(groups) != len(d.Endpoints()) {
				t.Errorf("%d attempt groups for %d hosts", len(groups), len(d.Endpoints()))
			}
		})
	}
}

// load_balance_hosts=random shuffles hosts, never one host's attempts apart: under prefer each
// host is still tried with TLS first, then plain.
func TestShuffleKeepsEachHostsAttempts(t *testing.T) {
	d := testConfig("db1", 5432, "analytics", "").Database
	d.Hosts, d.Ports, d.SSLMode, d.LoadBalanceHosts = []string{"db1", "db2", "db3"}, []int{5432}, SSLPrefer, LoadBalanceRandom
	pc, err := PoolConfig(d, testConfig("", 0, "", "").Limits)
	if err != nil {
		t.Fatal(err)
	}
	firsts := map[string]bool{}
	for range 200 {
		cc := pc.ConnConfig.Copy()
		if err := pc.BeforeConnect(context.Background(), cc); err != nil {
			t.Fatal(err)
		}
		got := attempts(&cc.Config)
		if len(got) != 6 {
			t.Fatalf("attempts %q", got)
		}
		for i := 0; i < 6; i += 2 {
			host := strings.Fields(got[i])[0]
			if got[i] != host+" tls none" || got[i+1] != host+" plain" {
				t.Fatalf("shuffled attempts %q: a host's TLS and plain attempts apart or swapped", got)
			}
		}
		firsts[got[0]] = true
	}
	if len(firsts) != 3 {
		t.Errorf("first hosts over 200 connections: %v, want all three", firsts)
	}
}

// The settings say everything: libpq's PG* variables and ~/.postgresql files add nothing to the
// TLS, names and session; values of any character survive the connection string.
func TestPoolConfigIgnoresLibpqDefaults(t *testing.T) {
	p := newPKI(t)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".postgresql"), 0o700); err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{p.root: "root.crt", p.cert: "postgresql.crt", p.key: "postgresql.key"} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".postgresql", to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	for k, v := range map[string]string{"PGSSLMODE": "disable", "PGSSLROOTCERT": p.root, "PGSSLCERT": p.cert, "PGSSLKEY": p.key,
		"PGHOST": "elsewhere", "PGDATABASE": "other", "PGUSER": "other", "PGPASSWORD": "other", "PGAPPNAME": "other",
		"PGOPTIONS": "-c work_mem=1MB", "PGTARGETSESSIONATTRS": "primary", "PGCONNECT_TIMEOUT": "1"} {
		t.Setenv(k, v)
	}
	d := testConfig("db1", 5432, `ana 'ly\tics" db`, `pass 'word\`).Database
	d.Username = `re ader'`
	d.Encrypt, d.TrustServerCertificate = true, true
	pc, err := PoolConfig(d, testConfig("", 0, "", "").Limits)
	if err != nil {
		t.Fatal(err)
	}
	cc := pc.ConnConfig
	if got, want := attempts(&cc.Config), []string{"db1:5432 tls none"}; !reflect.DeepEqual(got, want) {
		t.Errorf("attempts %q, want %q (no root certificate, no client certificate, no plain fallback)", got, want)
	}
	if cc.Database != d.Name || cc.User != d.Username || cc.Password != d.Password {
		t.Errorf("database %q, user %q, password %q", cc.Database, cc.User, cc.Password)
	}
	if cc.ValidateConnect != nil || cc.ConnectTimeout != connectTimeout {
		t.Errorf("target_session_attrs or connect_timeout taken from PG* variables (timeout %s)", cc.ConnectTimeout)
	}
	if _, ok := cc.RuntimeParams["options"]; ok || cc.RuntimeParams["application_name"] != "emsquery" {
		t.Errorf("startup parameters %v", cc.RuntimeParams)
	}
}

// DATABASE_URL's other libpq parameters reach the driver; the service's own session settings win
// over any of the same name.
func TestPoolConfigURLParameters(t *testing.T) {
	d := testConfig("db1", 5432, "analytics", "").Database
	d.Params = map[string]string{"connect_timeout": "3", "options": "-c work_mem=64MB", "application_name": "dashboards",
		"search_path": "elsewhere", "statement_timeout": "0"}
	pc, err := PoolConfig(d, testConfig("", 0, "", "").Limits)
	if err != nil {
		t.Fatal(err)
	}
	cc := pc.ConnConfig
	if cc.ConnectTimeout != 3*time.Second {
		t.Errorf("connect timeout %s, want the URL's 3s", cc.ConnectTimeout)
	}
	want := map[string]string{"options": "-c work_mem=64MB", "application_name": "dashboards", "DateStyle": "ISO, YMD",
		"search_path": `"public"`, "default_transaction_read_only": "on", "statement_timeout": "30000"}
	if !reflect.DeepEqual(cc.RuntimeParams, want) {
		t.Errorf("startup parameters %v, want %v", cc.RuntimeParams, want)
	}
}

// A TLS file that cannot be used stops the start with the setting that names it.
func TestPoolConfigTLSFileErrors(t *testing.T) {
	p, other := newPKI(t), newPKI(t)
	limits := testConfig("", 0, "", "").Limits
	notPEM := filepath.Join(t.TempDir(), "root.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		set  func(d *Options)
		want string
	}{
		{"missing root certificate", func(d *Options) { d.SSLRootCert = "/nonexistent/root.crt" }, "DATABASE__SSL_ROOT_CERT: open /nonexistent/root.crt"},
		{"root certificate from the URL", func(d *Options) {
			d.SSLRootCert, d.FromURL = "/nonexistent/root.crt", map[string]bool{"DATABASE__SSL_ROOT_CERT": true}
		}, "DATABASE_URL: open /nonexistent/root.crt"},
		{"no PEM", func(d *Options) { d.SSLRootCert = notPEM }, "DATABASE__SSL_ROOT_CERT: \"" + notPEM + "\" holds no PEM certificate"},
		{"missing client certificate", func(d *Options) { d.SSLCert, d.SSLKey = "/nonexistent/c.crt", p.key }, "DATABASE__SSL_CERT: open /nonexistent/c.crt"},
		{"missing key", func(d *Options) { d.SSLCert, d.SSLKey = p.cert, "/nonexistent/c.key" }, "DATABASE__SSL_KEY: open /nonexistent/c.key"},
		{"key of another certificate", func(d *Options) { d.SSLCert, d.SSLKey = p.cert, other.key }, "DATABASE__SSL_CERT and DATABASE__SSL_KEY: tls: private key does not match public key"},
	} {
		d := testConfig("db1", 5432, "analytics", "").Database
		d.SSLMode = SSLVerifyFull
		c.set(&d)
		_, err := PoolConfig(d, limits)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
	// Under disable no file is read: they are warned about instead.
	d := testConfig("db1", 5432, "analytics", "").Database
	d.SSLMode, d.SSLRootCert, d.SSLCert, d.SSLKey = SSLDisable, "/nonexistent/root.crt", "/nonexistent/c.crt", "/nonexistent/c.key"
	if _, err := PoolConfig(d, limits); err != nil {
		t.Errorf("disable with unused files: %v", err)
	}
}

// The start-up warnings say what each mode gives up and which settings it ignores, naming what
// chose the mode.
func TestTLSWarnings(t *testing.T) {
	p := newPKI(t)
	const (
		trust      = `DATABASE__TRUST_SERVER_CERTIFICATE=yes: the connection to the database is encrypted but the server is not verified`
		rootIgnore = `DATABASE__SSL_ROOT_CERT is set but ignored: with DATABASE__TRUST_SERVER_CERTIFICATE=yes no certificate is checked`
	)
	for _, c := range []struct {
		name string
		set  func(d *Options)
		want []string // every WARNING message, in order
	}{
		{"the specification's default", func(d *Options) { d.Encrypt, d.TrustServerCertificate = true, true }, []string{trust}},
		{"trust with a root certificate", func(d *Options) {
			d.Encrypt, d.TrustServerCertificate, d.SSLRootCert = true, true, p.root
		}, []string{trust, rootIgnore}},
		{"verified", func(d *Options) { d.Encrypt, d.SSLRootCert = true, p.root }, nil},
		{"require", func(d *Options) { d.SSLMode = SSLRequire }, []string{
			"DATABASE__SSL_MODE=require: the connection to the database is encrypted but the server is not verified"}},
		{"require with a root certificate is verify-ca", func(d *Options) { d.SSLMode, d.SSLRootCert = SSLRequire, p.root }, nil},
		{"prefer from DATABASE_URL", func(d *Options) {
			d.SSLMode, d.SSLRootCert, d.FromURL = SSLPrefer, p.root, map[string]bool{"DATABASE__SSL_MODE": true}
		}, []string{
			"sslmode=prefer in DATABASE_URL: the connection to the database is plain text when the server offers no TLS, and the server is not verified",
			"DATABASE__SSL_ROOT_CERT is set but ignored: with sslmode=prefer in DATABASE_URL no certificate is checked"}},
		{"allow", func(d *Options) { d.SSLMode = SSLAllow }, []string{
			"DATABASE__SSL_MODE=allow: the connection to the database is plain text unless the server requires TLS"}},
		{"verify-full", func(d *Options) { d.SSLMode, d.SSLCert, d.SSLKey = SSLVerifyFull, p.cert, p.key }, nil},
		{"ENCRYPT=no with files", func(d *Options) { d.SSLRootCert, d.SSLCert, d.SSLKey = p.root, p.cert, p.key }, []string{
			"DATABASE__SSL_ROOT_CERT is set but ignored: with DATABASE__ENCRYPT=no the connection is not encrypted",
			"DATABASE__SSL_CERT is set but ignored: with DATABASE__ENCRYPT=no the connection is not encrypted"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := testConfig("db1", 5432, "analytics", "").Database
			c.set(&d)
			pc, err := PoolConfig(d, testConfig("", 0, "", "").Limits)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			warnTLS(d, tlsPlanOf(&pc.ConnConfig.Config), slog.New(slog.NewTextHandler(&b, nil)))
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
				if _, msg, ok := strings.Cut(line, `level=WARN msg="`); ok {
					got = append(got, msg)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("warnings:\n%s\nwant %d: %q", b.String(), len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(got[i], strings.ReplaceAll(w, `"`, `\"`)) {
					t.Errorf("warning %d: %q\nwant it to start with %q", i, got[i], w)
				}
			}
		})
	}
}
