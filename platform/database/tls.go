package database

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// tlsFiles are the certificate files the connections use: the settings' files, or none where
// the TLS mode reads none. Under disable, and under allow and prefer (which never verify), no
// root certificate; under the specification's DATABASE__TRUST_SERVER_CERTIFICATE=yes none
// either, since libpq's require would verify the chain with one; under disable no client
// certificate. Unused files are warned about (warnTLS), not read.
func tlsFiles(d Options) (rootCert, cert, key string) {
	mode := d.TLSMode()
	if mode == SSLDisable {
		return "", "", ""
	}
	rootCert = d.SSLRootCert
	if mode == SSLAllow || mode == SSLPrefer || d.SSLMode == "" && mode == SSLRequire {
		rootCert = ""
	}
	return rootCert, d.SSLCert, d.SSLKey
}

// connString is the keyword/value connection string pgconn parses: the settings' hosts, ports,
// database, user and TLS parameters, and DATABASE_URL's other parameters.
// The TLS files are always given, empty when unused, so that pgconn's own defaults
// (~/.postgresql/root.crt and postgresql.crt, PGSSLROOTCERT and the other PGSSL* variables) add
// nothing that the settings did not say; passfile too, so that ~/.pgpass is read only when
// DATABASE_URL names one. The password is not in it (PoolConfig sets it as a field).
func connString(d Options) string {
	params := map[string]string{"passfile": ""}
	for k, v := range d.Params {
		params[k] = v
	}
	var hosts, ports []string
	for _, e := range d.Endpoints() {
		hosts, ports = append(hosts, e.Host), append(ports, strconv.Itoa(int(e.Port)))
	}
	// PoolConfig sets ValidateConnect itself; any keeps PGTARGETSESSIONATTRS out.
	rootCert, cert, key := tlsFiles(d)
	for k, v := range map[string]string{
		"host": strings.Join(hosts, ","), "port": strings.Join(ports, ","),
		"dbname": d.Name, "user": d.Username, "target_session_attrs": "any",
		"sslmode": string(d.TLSMode()), "sslrootcert": rootCert, "sslcert": cert, "sslkey": key,
	} {
		params[k] = v
	}
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range params {
			if !yield(k) {
				return
			}
		}
	}) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		// libpq's quoting: single quotes, with \ and ' escaped by a backslash.
		v := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(params[k])
		fmt.Fprintf(&b, "%s='%s'", k, v)
	}
	return b.String()
}

// checkFiles reads the certificate files the connections use, so that a missing, unreadable or
// mismatched one stops the start with its setting's name (pgconn's own errors name none).
func checkFiles(d Options) error {
	rootCert, cert, key := tlsFiles(d)
	if rootCert != "" && rootCert != "system" { // system: the system's roots, as in libpq
		pemBytes, err := os.ReadFile(rootCert)
		if err != nil {
			return fmt.Errorf("%s: %w", d.Origin("DATABASE__SSL_ROOT_CERT"), err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pemBytes) {
			return fmt.Errorf("%s: %q holds no PEM certificate", d.Origin("DATABASE__SSL_ROOT_CERT"), rootCert)
		}
	}
	if cert == "" || key == "" { // config.Load refuses one without the other
		return nil
	}
	certPEM, err := os.ReadFile(cert)
	if err != nil {
		return fmt.Errorf("%s: %w", d.Origin("DATABASE__SSL_CERT"), err)
	}
	keyPEM, err := os.ReadFile(key)
	if err != nil {
		return fmt.Errorf("%s: %w", d.Origin("DATABASE__SSL_KEY"), err)
	}
	// An encrypted key needs DATABASE_URL's sslpassword, which pgconn applies.
	//lint:ignore SA1019 libpq's encrypted PEM keys are what sslpassword decrypts; pgconn reads them so too
	if block, _ := pem.Decode(keyPEM); block != nil && x509.IsEncryptedPEMBlock(block) {
		return nil
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return fmt.Errorf("%s and %s: %w", d.Origin("DATABASE__SSL_CERT"), d.Origin("DATABASE__SSL_KEY"), err)
	}
	return nil
}

// parseConfigError is pgconn's error without the connection string it quotes.
func parseConfigError(err error) error {
	msg := err.Error()
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
			if i := strings.Index(rest, "`: "); i >= 0 {
				msg = rest[i+3:]
			}
		}
	}
	return errors.New(msg)
}

// attemptGroups splits a configuration's attempts (Host and Fallbacks, in the order pgconn tries
// them) by host: one attempt per host, or two under sslmode allow and prefer (without TLS and
// with, in that mode's order). A host listed twice in a row is two groups.
func attemptGroups(cc *pgconn.Config) [][]*pgconn.FallbackConfig {
	all := append([]*pgconn.FallbackConfig{{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig}}, cc.Fallbacks...)
	var groups [][]*pgconn.FallbackConfig
	for _, a := range all {
		if n := len(groups); n > 0 {
			g := groups[n-1]
			if len(g) == 1 && g[0].Host == a.Host && g[0].Port == a.Port && (g[0].TLSConfig == nil) != (a.TLSConfig == nil) {
				groups[n-1] = append(g, a)
				continue
			}
		}
		groups = append(groups, []*pgconn.FallbackConfig{a})
	}
	return groups
}

// setAttempts makes groups, flattened, the attempts of cc.
func setAttempts(cc *pgconn.Config, groups [][]*pgconn.FallbackConfig) {
	all := slices.Concat(groups...)
	cc.Host, cc.Port, cc.TLSConfig = all[0].Host, all[0].Port, all[0].TLSConfig
	cc.Fallbacks = all[1:]
}

// shuffleHosts puts the hosts in a random order, as libpq's load_balance_hosts=random does
// before each connection, each host's attempts kept together and in their order: pgconn then
// tries them in that order. cc is the pool's copy for one new connection.
func shuffleHosts(cc *pgconn.Config) {
	groups := attemptGroups(cc)
	rand.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	setAttempts(cc, groups)
}

// Certificate checks of a TLS attempt.
const (
	verifyNone  = "certificate not verified"
	verifyChain = "certificate chain verified, host name not checked"
	verifyFull  = "certificate verified"
)

// tlsPlan is what the connections' TLS comes to, read from the configuration pgconn built rather
// than from the settings, so that the start-up log says what is done: the attempts at the first
// host reached over TCP (every host gets the same sslmode; a Unix socket never has TLS).
type tlsPlan struct {
	encrypted  bool   // an attempt uses TLS
	plain      bool   // an attempt goes without TLS
	plainFirst bool   // the attempt without TLS comes first (allow)
	verify     string // verifyNone, verifyChain or verifyFull, of the TLS attempt
	clientCert bool
}

func tlsPlanOf(cc *pgconn.Config) tlsPlan {
	var p tlsPlan
	for _, g := range attemptGroups(cc) {
		if strings.HasPrefix(g[0].Host, "/") {
			continue
		}
		for i, a := range g {
			tc := a.TLSConfig
			if tc == nil {
				p.plain, p.plainFirst = true, i == 0 && len(g) > 1
				continue
			}
			p.encrypted, p.clientCert = true, len(tc.Certificates) > 0
			switch {
			case !tc.InsecureSkipVerify:
				p.verify = verifyFull
			case tc.VerifyPeerCertificate != nil:
				p.verify = verifyChain
			default:
				p.verify = verifyNone
			}
		}
		break
	}
	return p
}

// String is the start-up log's tls value: "off", or "on, " and what is verified, or for allow
// and prefer when TLS is used, and a client certificate when one is sent.
func (p tlsPlan) String() string {
	if !p.encrypted {
		return "off"
	}
	s := "on, " + p.verify
	switch {
	case p.plainFirst:
		s = "only when the server requires it (plain first), " + p.verify
	case p.plain:
		s = "when the server offers it (else plain), " + p.verify
	}
	if p.clientCert {
		s += ", client certificate"
	}
	return s
}

// warnTLS says at start-up what the TLS mode gives up, and which TLS settings it ignores: an
// operator who set them believes they act. An unverified server can be impersonated by whoever
// can intercept the traffic, who then reads every answer and the password; under allow and
// prefer the traffic may be plain text as well.
func warnTLS(d Options, p tlsPlan, log *slog.Logger) {
	mode := d.TLSMode()
	// What chose the mode, as the messages name it.
	because := "DATABASE__SSL_MODE=" + string(mode)
	switch {
	case d.FromURL["DATABASE__SSL_MODE"]:
		because = "sslmode=" + string(mode) + " in DATABASE_URL"
	case d.SSLMode == "" && !bool(d.Encrypt):
		because = "DATABASE__ENCRYPT=no"
	case d.SSLMode == "":
		because = "DATABASE__TRUST_SERVER_CERTIFICATE=yes"
	}
	const advice = "set DATABASE__SSL_MODE=verify-full (with DATABASE__SSL_ROOT_CERT naming the CA's certificate file when the server's certificate is not signed by a system root)"
	if p.encrypted && p.verify == verifyNone {
		switch {
		case d.SSLMode == "":
			log.Warn("DATABASE__TRUST_SERVER_CERTIFICATE=yes: the connection to the database is encrypted but the server is not verified, so anyone who can intercept it can pose as the database; set DATABASE__TRUST_SERVER_CERTIFICATE=no (with DATABASE__SSL_ROOT_CERT naming the CA's certificate file when the server's certificate is not signed by a system root), or " + advice)
		case p.plainFirst:
			log.Warn(because + ": the connection to the database is plain text unless the server requires TLS, and the server is not verified, so anyone who can intercept it can read it or pose as the database; " + advice)
		case p.plain:
			log.Warn(because + ": the connection to the database is plain text when the server offers no TLS, and the server is not verified, so anyone who can intercept it can read it or pose as the database; " + advice)
		default:
			log.Warn(because + ": the connection to the database is encrypted but the server is not verified, so anyone who can intercept it can pose as the database; " + advice)
		}
	}
	rootCert, cert, _ := tlsFiles(d)
	if strings.TrimSpace(d.SSLRootCert) != "" && rootCert == "" {
		why := "no certificate is checked"
		if mode == SSLDisable {
			why = "the connection is not encrypted"
		}
		log.Warn(d.Origin("DATABASE__SSL_ROOT_CERT")+" is set but ignored: with "+because+" "+why,
			"ssl_root_cert", d.SSLRootCert)
	}
	if strings.TrimSpace(d.SSLCert) != "" && cert == "" {
		log.Warn(d.Origin("DATABASE__SSL_CERT")+" is set but ignored: with "+because+" the connection is not encrypted",
			"ssl_cert", d.SSLCert)
	}
}
