package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
)

// SSLMode is libpq's sslmode. Empty means not set: DATABASE__ENCRYPT and
// DATABASE__TRUST_SERVER_CERTIFICATE decide then (see Database.TLSMode).
type SSLMode string

// The values of DATABASE__SSL_MODE and of DATABASE_URL's sslmode, with libpq's meaning.
const (
	SSLDisable    SSLMode = "disable"     // plain only
	SSLAllow      SSLMode = "allow"       // plain first; TLS, unverified, if the server insists
	SSLPrefer     SSLMode = "prefer"      // TLS, unverified, first; plain if the server has no TLS
	SSLRequire    SSLMode = "require"     // TLS, unverified; with a root certificate as verify-ca
	SSLVerifyCA   SSLMode = "verify-ca"   // TLS, the chain verified, not the host name
	SSLVerifyFull SSLMode = "verify-full" // TLS, the chain and the host name verified
)

func (m *SSLMode) SetValue(s string) error {
	switch v := SSLMode(strings.ToLower(strings.TrimSpace(s))); v {
	case "", SSLDisable, SSLAllow, SSLPrefer, SSLRequire, SSLVerifyCA, SSLVerifyFull:
		*m = v
	default:
		return fmt.Errorf("%q is not one of disable, allow, prefer, require, verify-ca, verify-full", s)
	}
	return nil
}

// TLSMode is the libpq sslmode the connections use: SSLMode when set, else the specification's
// pair. DATABASE__ENCRYPT=no is disable; DATABASE__TRUST_SERVER_CERTIFICATE=yes is require
// without any root certificate (the pair promises that nothing is checked, while libpq's require
// checks the chain when it has one); =no is verify-full.
func (d Database) TLSMode() SSLMode {
	switch {
	case d.SSLMode != "":
		return d.SSLMode
	case !bool(d.Encrypt):
		return SSLDisable
	case bool(d.TrustServerCertificate):
		return SSLRequire
	default:
		return SSLVerifyFull
	}
}

// Origin names where setting name's value came from, for messages: name itself, or
// "DATABASE_URL" when Load took the value from there.
func (d Database) Origin(name string) string {
	if d.FromURL[name] {
		return "DATABASE_URL"
	}
	return name
}

// setInEnvironment names the settings of t (env tags, nested structs included) that the
// environment sets, the env file's variables applied, to a value that is not empty. An empty
// value counts as not set, so that an env file copied from deploy/.env.example, with its empty
// DATABASE__PASSWORD= line, does not take the password out of DATABASE_URL.
func setInEnvironment(t reflect.Type) map[string]bool {
	set := map[string]bool{}
	for f := range t.Fields() {
		if name := f.Tag.Get("env"); name != "" && os.Getenv(name) != "" {
			set[name] = true
		}
		if f.Type.Kind() == reflect.Struct {
			for name := range setInEnvironment(f.Type) {
				set[name] = true
			}
		}
	}
	return set
}

// unsupportedURLParams are libpq connection parameters that the driver (pgx) does not implement.
// It would send them to the server as session settings, which the server refuses with a message
// that does not point at DATABASE_URL; refusing them at start says what is wrong.
var unsupportedURLParams = map[string]bool{
	"hostaddr": true, "keepalives": true, "keepalives_idle": true, "keepalives_interval": true,
	"keepalives_count": true, "tcp_user_timeout": true, "gssencmode": true, "gsslib": true,
	"gssdelegation": true, "requirepeer": true, "sslcompression": true, "sslcrl": true,
	"sslcrldir": true, "ssl_min_protocol_version": true, "ssl_max_protocol_version": true,
	"sslkeylogfile": true, "replication": true, "scram_client_key": true, "scram_server_key": true,
	"oauth_issuer": true, "oauth_client_id": true, "oauth_client_secret": true, "oauth_scope": true,
}

// applyURL takes every part of DATABASE_URL whose DATABASE__* setting is not in set (the
// settings the environment or env file set), noting each in FromURL, and keeps the URL's other
// libpq parameters in Params. The TLS mode is one part for DATABASE__SSL_MODE,
// DATABASE__ENCRYPT and DATABASE__TRUST_SERVER_CERTIFICATE: the URL's sslmode counts only when
// none of the three is set.
func (d *Database) applyURL(set map[string]bool) error {
	if d.URL == "" {
		return nil
	}
	params, err := parseURL(d.URL.Reveal())
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	d.FromURL, d.Params = map[string]bool{}, map[string]string{}
	take := func(key, name string, apply func(string) error) error {
		v, ok := params[key]
		delete(params, key)
		if !ok || set[name] {
			return nil
		}
		if err := apply(v); err != nil {
			return fmt.Errorf("DATABASE_URL: %s: %w", key, err)
		}
		d.FromURL[name] = true
		return nil
	}
	str := func(dst *string) func(string) error {
		return func(v string) error { *dst = v; return nil }
	}
	tlsSet := set["DATABASE__SSL_MODE"] || set["DATABASE__ENCRYPT"] || set["DATABASE__TRUST_SERVER_CERTIFICATE"]
	steps := []struct {
		key, name string
		apply     func(string) error
	}{
		{"host", "DATABASE__HOST", d.Hosts.SetValue},
		{"port", "DATABASE__PORT", d.urlPorts},
		{"dbname", "DATABASE__NAME", str(&d.Name)},
		{"user", "DATABASE__USERNAME", str(&d.Username)},
		{"password", "DATABASE__PASSWORD", d.Password.SetValue},
		{"sslrootcert", "DATABASE__SSL_ROOT_CERT", str(&d.SSLRootCert)},
		{"sslcert", "DATABASE__SSL_CERT", str(&d.SSLCert)},
		{"sslkey", "DATABASE__SSL_KEY", str(&d.SSLKey)},
		{"target_session_attrs", "DATABASE__TARGET_SESSION_ATTRS", d.TargetSessionAttrs.SetValue},
		{"load_balance_hosts", "DATABASE__LOAD_BALANCE_HOSTS", d.LoadBalanceHosts.SetValue},
	}
	for _, s := range steps {
		if err := take(s.key, s.name, s.apply); err != nil {
			return err
		}
	}
	if mode, ok := params["sslmode"]; ok {
		delete(params, "sslmode")
		if !tlsSet {
			var m SSLMode
			if err := m.SetValue(mode); err != nil || m == "" {
				return fmt.Errorf("DATABASE_URL: sslmode: %q is not one of disable, allow, prefer, require, verify-ca, verify-full", mode)
			}
			d.SSLMode = m
			d.FromURL["DATABASE__SSL_MODE"] = true
		}
	}
	// The service always sets application_name, so libpq would never use a fallback name.
	delete(params, "fallback_application_name")
	for k, v := range params {
		if unsupportedURLParams[k] {
			return fmt.Errorf("DATABASE_URL: the parameter %s is libpq's but the service's driver (pgx) does not support it; remove it", k)
		}
		d.Params[k] = v
	}
	return nil
}

// urlPorts is the URL's port list: an empty element is the default port, as in libpq. The list
// is left out when it does not fit the hosts (DATABASE__HOST set to another number of hosts):
// its ports belong to the URL's hosts.
func (d *Database) urlPorts(v string) error {
	var ports Ports
	given := false
	for p := range strings.SplitSeq(v, ",") {
		port := Port(5432)
		if strings.TrimSpace(p) != "" {
			given = true
			if err := port.SetValue(p); err != nil {
				return err
			}
		}
		ports = append(ports, port)
	}
	if given && (len(ports) == 1 || len(ports) == len(d.Hosts)) {
		d.Ports = ports
	}
	return nil
}

// parseURL reads a libpq connection URL by libpq's rules (conninfo_uri_parse_options and
// conninfo_uri_parse_params in libpq's fe-connect.c), into libpq's keywords:
//
//	postgres[ql]://[user[:password]@][host][:port][,host[:port]...][/dbname][?keyword=value&...]
//
// Every part is percent-decoded (a '+' stays a '+'). Host and port are comma lists kept aligned,
// an empty port meaning the default. The query's parameters come last and win over the parts
// before them (?host=/var/run/postgresql names a socket directory); ssl=true is sslmode=require,
// as libpq reads it. Errors never quote the password.
func parseURL(s string) (map[string]string, error) {
	rest, ok := strings.CutPrefix(s, "postgresql://")
	if !ok {
		rest, ok = strings.CutPrefix(s, "postgres://")
	}
	if !ok {
		return nil, errors.New("not a connection URL: it starts with postgres:// or postgresql://")
	}
	params := map[string]string{}
	// Like libpq, only a '/' ends the search for the user part, so a password may hold '?' or ','.
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		user, password, hasPassword := strings.Cut(rest[:i], ":")
		rest = rest[i+1:]
		if user != "" {
			v, err := uriDecode(user)
			if err != nil {
				return nil, fmt.Errorf("user: %w", err)
			}
			params["user"] = v
		}
		if hasPassword && password != "" {
			v, err := uriDecode(password)
			if err != nil {
				return nil, errors.New("password: not percent-encoded correctly (encode @ : / ? # % and spaces as %XX)")
			}
			params["password"] = v
		}
	}
	var hosts, ports []string
	anyHost, anyPort := false, false
	for {
		var host string
		if strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, errors.New(`no "]" after "[" in an IPv6 host address`)
			}
			if end == 1 {
				return nil, errors.New("an empty IPv6 host address []")
			}
			host, rest = rest[1:end], rest[end+1:]
			if rest != "" && !strings.ContainsRune(":/?,", rune(rest[0])) {
				return nil, fmt.Errorf("%q after the IPv6 host address [%s]", rest[:1], host)
			}
		} else {
			i := strings.IndexAny(rest, ":/?,")
			if i < 0 {
				i = len(rest)
			}
			host, rest = rest[:i], rest[i:]
		}
		port := ""
		if strings.HasPrefix(rest, ":") {
			i := strings.IndexAny(rest[1:], "/?,")
			if i < 0 {
				i = len(rest) - 1
			}
			port, rest = rest[1:i+1], rest[i+1:]
		}
		h, err := uriDecode(host)
		if err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		p, err := uriDecode(port)
		if err != nil {
			return nil, fmt.Errorf("port: %w", err)
		}
		anyHost, anyPort = anyHost || h != "", anyPort || p != ""
		hosts, ports = append(hosts, h), append(ports, p)
		if !strings.HasPrefix(rest, ",") {
			break
		}
		rest = rest[1:]
	}
	if anyHost || len(hosts) > 1 {
		params["host"] = strings.Join(hosts, ",")
	}
	if anyPort {
		params["port"] = strings.Join(ports, ",")
	}
	if strings.HasPrefix(rest, "/") {
		dbname, query, hasQuery := strings.Cut(rest[1:], "?")
		rest = ""
		if hasQuery {
			rest = "?" + query
		}
		if dbname != "" {
			v, err := uriDecode(dbname)
			if err != nil {
				return nil, fmt.Errorf("database name: %w", err)
			}
			params["dbname"] = v
		}
	}
	if query, ok := strings.CutPrefix(rest, "?"); ok {
		if err := parseURLQuery(query, params); err != nil {
			return nil, err
		}
	}
	return params, nil
}

// parseURLQuery reads keyword=value pairs joined by '&' into params, the last of a repeated
// keyword winning, as libpq does.
func parseURLQuery(query string, params map[string]string) error {
	if query == "" {
		return nil
	}
	for pair := range strings.SplitSeq(query, "&") {
		rawKey, rawValue, ok := strings.Cut(pair, "=")
		if !ok || strings.Contains(rawValue, "=") {
			return fmt.Errorf("the query parameter %q is not keyword=value", strings.SplitN(pair, "=", 2)[0])
		}
		key, err := uriDecode(rawKey)
		if err != nil {
			return fmt.Errorf("query parameter: %w", err)
		}
		value, err := uriDecode(rawValue)
		if err != nil {
			if key == "password" || key == "sslpassword" {
				return fmt.Errorf("%s: not percent-encoded correctly", key)
			}
			return fmt.Errorf("%s: %w", key, err)
		}
		if key == "ssl" && value == "true" { // libpq's JDBC compatibility
			key, value = "sslmode", "require"
		}
		params[key] = value
	}
	return nil
}

// uriDecode is libpq's conninfo_uri_decode: %XX escapes (%00 refused), spaces around the value
// dropped and spaces inside it refused.
func uriDecode(raw string) (string, error) {
	trimmed := strings.Trim(raw, " ")
	if strings.Contains(trimmed, " ") {
		return "", fmt.Errorf("%q holds a space; write it as %%20", raw)
	}
	var b strings.Builder
	for i := 0; i < len(trimmed); i++ {
		c := trimmed[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(trimmed) || !isHex(trimmed[i+1]) || !isHex(trimmed[i+2]) {
			return "", fmt.Errorf("%q has a %% that is not followed by two hex digits", raw)
		}
		v := unhex(trimmed[i+1])<<4 | unhex(trimmed[i+2])
		if v == 0 {
			return "", fmt.Errorf("%q holds %%00", raw)
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// checkClientCert refuses half a client certificate: the driver needs the certificate and its
// key together.
func (d Database) checkClientCert() []string {
	cert, key := strings.TrimSpace(d.SSLCert) != "", strings.TrimSpace(d.SSLKey) != ""
	switch {
	case cert && !key:
		return []string{fmt.Sprintf("DATABASE__SSL_KEY: not set, but %s names a client certificate (%q); a client certificate needs its key", d.Origin("DATABASE__SSL_CERT"), d.SSLCert)}
	case key && !cert:
		return []string{fmt.Sprintf("DATABASE__SSL_CERT: not set, but %s names a client key (%q); a client key needs its certificate", d.Origin("DATABASE__SSL_KEY"), d.SSLKey)}
	}
	return nil
}
