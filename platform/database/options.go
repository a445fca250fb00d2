package database

import (
	"net"
	"strconv"
	"time"
)

// Options are the DATABASE__* settings (with what DATABASE_URL gave), as the pool uses them.
type Options struct {
	// Hosts and Ports are libpq's multi-host form (see Endpoints).
	Hosts              []string
	Ports              []int
	TargetSessionAttrs TargetSessionAttrs
	LoadBalanceHosts   LoadBalanceHosts
	// TransactionPooling says that the hosts are a pooler in transaction mode (PgBouncer):
	// session settings then travel with every transaction instead of the connection's start.
	TransactionPooling bool
	Name               string
	Username           string
	Password           string
	Schema             string // the connection's search_path
	// SSLMode is libpq's sslmode; when empty Encrypt and TrustServerCertificate, the
	// specification's pair, decide (see TLSMode).
	SSLMode                SSLMode
	Encrypt                bool
	TrustServerCertificate bool
	SSLRootCert            string
	SSLCert                string
	SSLKey                 string
	PoolSize               int
	MaxOverflow            int
	PoolTimeout            time.Duration
	PoolRecycle            time.Duration
	// FromURL names the settings whose value came from DATABASE_URL, for messages; Params are
	// the URL's libpq parameters that no setting covers (connect_timeout, sslpassword, ...).
	FromURL map[string]bool
	Params  map[string]string
}

// Timeouts are the statements' time limits: LIMITS__STATEMENT_TIMEOUT for every statement,
// LIMITS__EXPORT_TIMEOUT for the CSV export's COPY, which streams for as long as the client
// reads.
type Timeouts struct {
	StatementTimeout time.Duration
	ExportTimeout    time.Duration
}

// SSLMode is libpq's sslmode.
type SSLMode string

// libpq's sslmode values.
const (
	SSLDisable    SSLMode = "disable"     // plain only
	SSLAllow      SSLMode = "allow"       // plain first; TLS, unverified, if the server insists
	SSLPrefer     SSLMode = "prefer"      // TLS, unverified, first; plain if the server has no TLS
	SSLRequire    SSLMode = "require"     // TLS, unverified; with a root certificate as verify-ca
	SSLVerifyCA   SSLMode = "verify-ca"   // TLS, the chain verified, not the host name
	SSLVerifyFull SSLMode = "verify-full" // TLS, the chain and the host name verified
)

// TargetSessionAttrs is libpq's target_session_attrs, as far as the service supports it.
type TargetSessionAttrs string

const (
	TargetAny           TargetSessionAttrs = "any"
	TargetReadOnly      TargetSessionAttrs = "read-only"
	TargetPrimary       TargetSessionAttrs = "primary"
	TargetStandby       TargetSessionAttrs = "standby"
	TargetPreferStandby TargetSessionAttrs = "prefer-standby"
)

// LoadBalanceHosts is libpq's load_balance_hosts.
type LoadBalanceHosts string

const (
	LoadBalanceDisable LoadBalanceHosts = "disable"
	LoadBalanceRandom  LoadBalanceHosts = "random"
)

// TLSMode is the libpq sslmode the connections use: SSLMode when set, else the specification's
// pair. Encrypt false is disable; TrustServerCertificate is require without any root
// certificate (the pair promises that nothing is checked, while libpq's require checks the
// chain when it has one); otherwise verify-full.
func (d Options) TLSMode() SSLMode {
	switch {
	case d.SSLMode != "":
		return d.SSLMode
	case !d.Encrypt:
		return SSLDisable
	case d.TrustServerCertificate:
		return SSLRequire
	default:
		return SSLVerifyFull
	}
}

// Origin names where setting name's value came from, for messages: name itself, or
// "DATABASE_URL" when it came from there.
func (d Options) Origin(name string) string {
	if d.FromURL[name] {
		return "DATABASE_URL"
	}
	return name
}

// Endpoint is one database host and its port.
type Endpoint struct {
	Host string
	Port int
}

// String is host:port (a Unix socket directory keeps its path).
func (e Endpoint) String() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Endpoints pairs every host with its port: the only port, or the one at the same place in
// its list.
func (d Options) Endpoints() []Endpoint {
	out := make([]Endpoint, len(d.Hosts))
	for i, h := range d.Hosts {
		out[i] = Endpoint{Host: h, Port: 5432}
		if len(d.Ports) == len(d.Hosts) {
			out[i].Port = d.Ports[i]
		} else if len(d.Ports) > 0 {
			out[i].Port = d.Ports[0]
		}
	}
	return out
}
