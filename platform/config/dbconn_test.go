package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/emsanalytics/emsquery/platform/config"
)

// load is config.Load with vars as the whole environment (and the key it requires).
func load(t *testing.T, vars map[string]string) (*config.Config, error) {
	t.Helper()
	env := map[string]string{"AUTHENTICATION__API_KEY": "k"}
	for k, v := range vars {
		env[k] = v
	}
	setenv(t, env)
	return config.Load("")
}

// DATABASE_URL is read as libpq reads it: every part percent-decoded, host and port lists
// aligned, libpq's parameters taken into their settings and the others kept for the driver.
func TestDatabaseURLParts(t *testing.T) {
	url := "postgresql://r%40p%3Aor%2Fter:p%40ss%3A%2F%23%3F%25%26=w@db1:5433,db2/ana%20lytics%2Fdb" +
		"?sslmode=verify-full&sslrootcert=/etc/ca.pem&sslcert=/etc/c.crt&sslkey=/etc/c.key" +
		"&target_session_attrs=prefer-standby&load_balance_hosts=random" +
		"&connect_timeout=5&application_name=dash&options=-c%20work_mem%3D64MB&fallback_application_name=x"
	cfg, err := load(t, map[string]string{"DATABASE_URL": url})
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Database
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"endpoints", d.Endpoints(), []config.Endpoint{{Host: "db1", Port: 5433}, {Host: "db2", Port: 5432}}},
		{"dbname", d.Name, "ana lytics/db"},
		{"user", d.Username, "r@p:or/ter"},
		{"password", d.Password.Reveal(), "p@ss:/#?%&=w"},
		{"sslmode", d.SSLMode, config.SSLVerifyFull},
		{"TLS mode", d.TLSMode(), config.SSLVerifyFull},
		{"sslrootcert", d.SSLRootCert, "/etc/ca.pem"},
		{"sslcert", d.SSLCert, "/etc/c.crt"},
		{"sslkey", d.SSLKey, "/etc/c.key"},
		{"target_session_attrs", d.TargetSessionAttrs, config.TargetPreferStandby},
		{"load_balance_hosts", d.LoadBalanceHosts, config.LoadBalanceRandom},
		// Parameters no setting covers go to the driver as given; the fallback name is dropped,
		// as the service always names itself.
		{"other parameters", d.Params, map[string]string{"connect_timeout": "5", "application_name": "dash", "options": "-c work_mem=64MB"}},
		// Settings that are not in the URL keep their defaults.
		{"schema", d.Schema, "public"},
		{"pool size", d.PoolSize, config.Count(10)},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	for _, name := range []string{"DATABASE__HOST", "DATABASE__PORT", "DATABASE__NAME", "DATABASE__USERNAME", "DATABASE__PASSWORD", "DATABASE__SSL_MODE", "DATABASE__SSL_ROOT_CERT"} {
		if d.Origin(name) != "DATABASE_URL" {
			t.Errorf("Origin(%s) = %q, want DATABASE_URL", name, d.Origin(name))
		}
	}
	if d.Origin("DATABASE__SCHEMA") != "DATABASE__SCHEMA" {
		t.Errorf("Origin(DATABASE__SCHEMA) = %q", d.Origin("DATABASE__SCHEMA"))
	}

	for _, c := range []struct {
		url  string
		want config.Database
	}{
		// Query parameters win over the parts before them; a socket directory as host.
		{"postgres://u@ignored:1/db?host=/var/run/postgresql&port=6432&dbname=other",
			config.Database{Hosts: config.Hosts{"/var/run/postgresql"}, Ports: config.Ports{6432}, Name: "other", Username: "u"}},
		// IPv6 literals in brackets; a '+' is a '+'; ssl=true is libpq's sslmode=require.
		{"postgres://a+b@[::1]:5433,[fe80::1]/d?ssl=true",
			config.Database{Hosts: config.Hosts{"::1", "fe80::1"}, Ports: config.Ports{5433, 5432}, Name: "d", Username: "a+b", SSLMode: config.SSLRequire}},
		// No host: DATABASE__HOST's default; a password without a user.
		{"postgres://:secret@/d", config.Database{Hosts: config.Hosts{"localhost"}, Ports: config.Ports{5432}, Name: "d", Username: "postgres", Password: "secret"}},
		// A password with '?' and ',': only '/' ends libpq's search for '@'.
		{"postgres://u:p?x,y@h/d", config.Database{Hosts: config.Hosts{"h"}, Ports: config.Ports{5432}, Name: "d", Username: "u", Password: "p?x,y"}},
	} {
		cfg, err := load(t, map[string]string{"DATABASE_URL": c.url})
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		d := cfg.Database
		got := config.Database{Hosts: d.Hosts, Ports: d.Ports, Name: d.Name, Username: d.Username, Password: d.Password, SSLMode: d.SSLMode}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.url, got, c.want)
		}
	}
}

// Each DATABASE__* setting that is set overrides its part of DATABASE_URL, from the environment or
// the env file; a default does not, and neither does a variable set to an empty value.
func TestDatabaseURLPrecedence(t *testing.T) {
	const url = "postgres://urluser:urlpw@db1:5433,db2:5434/urldb?sslmode=verify-full&connect_timeout=3"
	cfg, err := load(t, map[string]string{
		"DATABASE_URL": url, "DATABASE__NAME": "setdb", "DATABASE__HOST": "dbx", "DATABASE__PASSWORD": "",
	})
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Database
	// The URL's ports belong to its two hosts; with one host set, the port's default.
	if want := []config.Endpoint{{Host: "dbx", Port: 5432}}; !reflect.DeepEqual(d.Endpoints(), want) {
		t.Errorf("endpoints %v, want %v", d.Endpoints(), want)
	}
	if d.Name != "setdb" || d.Username != "urluser" || d.Password.Reveal() != "urlpw" || d.TLSMode() != config.SSLVerifyFull {
		t.Errorf("name %q, user %q, password from the URL %v, TLS mode %q", d.Name, d.Username, d.Password.Reveal() == "urlpw", d.TLSMode())
	}
	if d.Origin("DATABASE__NAME") != "DATABASE__NAME" || d.Origin("DATABASE__USERNAME") != "DATABASE_URL" {
		t.Errorf("origins: name %q, user %q", d.Origin("DATABASE__NAME"), d.Origin("DATABASE__USERNAME"))
	}

	// The env file's settings count as set, like the environment's.
	setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k", "DATABASE_URL": url})
	file := filepath.Join(t.TempDir(), "service.env")
	if err := os.WriteFile(file, []byte("DATABASE__USERNAME=fileuser\nDATABASE__PORT=6000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = config.Load(config.EnvFile(file))
	if err != nil {
		t.Fatal(err)
	}
	d = cfg.Database
	if want := []config.Endpoint{{Host: "db1", Port: 6000}, {Host: "db2", Port: 6000}}; d.Username != "fileuser" || !reflect.DeepEqual(d.Endpoints(), want) {
		t.Errorf("user %q, endpoints %v; want fileuser and %v", d.Username, d.Endpoints(), want)
	}

	// The TLS mode is one part: DATABASE__SSL_MODE, DATABASE__ENCRYPT or
	// DATABASE__TRUST_SERVER_CERTIFICATE set replaces the URL's sslmode. A URL without sslmode
	// leaves the specification's pair and its defaults (encrypted, not verified).
	for _, c := range []struct {
		env  map[string]string
		want config.SSLMode
	}{
		{map[string]string{"DATABASE_URL": "postgres://h/d?sslmode=disable"}, config.SSLDisable},
		{map[string]string{"DATABASE_URL": "postgres://h/d"}, config.SSLRequire},
		{map[string]string{"DATABASE_URL": "postgres://h/d?sslmode=disable", "DATABASE__SSL_MODE": "require"}, config.SSLRequire},
		{map[string]string{"DATABASE_URL": "postgres://h/d?sslmode=verify-full", "DATABASE__ENCRYPT": "no"}, config.SSLDisable},
		{map[string]string{"DATABASE_URL": "postgres://h/d?sslmode=disable", "DATABASE__TRUST_SERVER_CERTIFICATE": "no"}, config.SSLVerifyFull},
	} {
		cfg, err := load(t, c.env)
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if got := cfg.Database.TLSMode(); got != c.want {
			t.Errorf("%v: TLS mode %q, want %q", c.env, got, c.want)
		}
	}
}

// A bad DATABASE_URL stops the start with one line naming it, and never with its password.
func TestDatabaseURLRefused(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"mysql://u:secret@h/d", "postgres://"},
		{"postgres://u:se%ZZcret@h/d", "password"},
		{"postgres://u:secret@h:port/d", "port"},
		{"postgres://u:secret@h/d?sslmode=sometimes", "sslmode"},
		{"postgres://u:secret@h/d?hostaddr=10.0.0.1", "hostaddr"},
		{"postgres://u:secret@h/d?target_session_attrs=read-write", "target_session_attrs"},
		{"postgres://u:secret@h/d?connect_timeout=1=2", "connect_timeout"},
		{"postgres://u:secret@h1,,h2/d", "host"},
		{"postgres://u:secret@h/d%00", "%00"},
		{"postgres://u:secret@h/my db", "space"},
		{"postgres://u:secret@[::1/d", "IPv6"},
		{"postgres://u:secret@h/d?sslcert=/c.crt", "DATABASE__SSL_KEY"},
	} {
		_, err := load(t, map[string]string{"DATABASE_URL": c.url})
		if err == nil {
			t.Errorf("%s accepted", c.url)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "DATABASE_URL") || !strings.Contains(msg, c.want) || strings.Contains(msg, "secret") || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q; want one line naming DATABASE_URL and %q, without the password", c.url, msg, c.want)
		}
	}
}

func TestSSLModeAndClientCertificate(t *testing.T) {
	cfg, err := load(t, map[string]string{"DATABASE__SSL_MODE": " Verify-CA ", "DATABASE__ENCRYPT": "no"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.SSLMode != config.SSLVerifyCA || cfg.Database.TLSMode() != config.SSLVerifyCA {
		t.Errorf("DATABASE__SSL_MODE=verify-ca with DATABASE__ENCRYPT=no: mode %q, want verify-ca", cfg.Database.TLSMode())
	}
	// The specification's pair, when DATABASE__SSL_MODE is not set.
	for _, c := range []struct {
		encrypt, trust string
		want           config.SSLMode
	}{{"yes", "yes", config.SSLRequire}, {"yes", "no", config.SSLVerifyFull}, {"no", "no", config.SSLDisable}, {"no", "yes", config.SSLDisable}} {
		cfg, err := load(t, map[string]string{"DATABASE__ENCRYPT": c.encrypt, "DATABASE__TRUST_SERVER_CERTIFICATE": c.trust})
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Database.TLSMode(); got != c.want {
			t.Errorf("ENCRYPT=%s TRUST_SERVER_CERTIFICATE=%s: mode %q, want %q", c.encrypt, c.trust, got, c.want)
		}
	}

	// A client certificate needs its key, and the other way round.
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"DATABASE__SSL_CERT": "/etc/c.crt"}, "DATABASE__SSL_KEY: not set"},
		{map[string]string{"DATABASE__SSL_KEY": "/etc/c.key"}, "DATABASE__SSL_CERT: not set"},
	} {
		_, err := load(t, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.env, err, c.want)
		}
	}
	cfg, err = load(t, map[string]string{"DATABASE__SSL_CERT": "/etc/c.crt", "DATABASE__SSL_KEY": "/etc/c.key"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.SSLCert != "/etc/c.crt" || cfg.Database.SSLKey != "/etc/c.key" {
		t.Errorf("client certificate %q, key %q", cfg.Database.SSLCert, cfg.Database.SSLKey)
	}
}
