package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The types below implement cleanenv.Setter so that every bad value is refused with a message
// that says what was expected; Load adds the variable's name.

// Port is a TCP port number.
type Port int

func (p *Port) SetValue(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q is not a port number (1-65535)", s)
	}
	*p = Port(n)
	return nil
}

// Hosts is DATABASE__HOST: a host name, IP address or Unix socket directory, or a comma list
// of them (libpq's multi-host form, "db1,db2,db3").
type Hosts []string

func (h *Hosts) SetValue(s string) error {
	var list []string
	for _, host := range strings.Split(s, ",") {
		host = strings.TrimSpace(host)
		if host == "" {
			return fmt.Errorf("%q has an empty host; write one host or a comma list like db1,db2", s)
		}
		list = append(list, host)
	}
	*h = list
	return nil
}

// Ports is DATABASE__PORT: one port for every host, or a comma list with one port per host.
type Ports []Port

func (p *Ports) SetValue(s string) error {
	var list []Port
	for _, v := range strings.Split(s, ",") {
		var port Port
		if err := port.SetValue(v); err != nil {
			return fmt.Errorf("%q: %w", s, err)
		}
		list = append(list, port)
	}
	*p = list
	return nil
}

// TargetSessionAttrs is libpq's target_session_attrs: which of the hosts a connection accepts.
type TargetSessionAttrs string

// The values of DATABASE__TARGET_SESSION_ATTRS. read-write is left out: the service's sessions
// are read-only, so no host would ever do.
const (
	TargetAny           TargetSessionAttrs = "any"
	TargetReadOnly      TargetSessionAttrs = "read-only"
	TargetPrimary       TargetSessionAttrs = "primary"
	TargetStandby       TargetSessionAttrs = "standby"
	TargetPreferStandby TargetSessionAttrs = "prefer-standby"
)

func (t *TargetSessionAttrs) SetValue(s string) error {
	switch v := TargetSessionAttrs(strings.ToLower(strings.TrimSpace(s))); v {
	case TargetAny, TargetReadOnly, TargetPrimary, TargetStandby, TargetPreferStandby:
		*t = v
	default:
		return fmt.Errorf("%q is not one of any, read-only, primary, standby, prefer-standby", s)
	}
	return nil
}

// LoadBalanceHosts is libpq's load_balance_hosts: disable tries the hosts in the order given,
// random in a new random order for every connection.
type LoadBalanceHosts string

const (
	LoadBalanceDisable LoadBalanceHosts = "disable"
	LoadBalanceRandom  LoadBalanceHosts = "random"
)

func (l *LoadBalanceHosts) SetValue(s string) error {
	switch v := LoadBalanceHosts(strings.ToLower(strings.TrimSpace(s))); v {
	case LoadBalanceDisable, LoadBalanceRandom:
		*l = v
	default:
		return fmt.Errorf("%q is not disable or random", s)
	}
	return nil
}

// MaxMinCell is the largest small-cell threshold (PRIVACY__MIN_CELL, a key's min_cell, the
// fields' min_cell argument): past CMS's 11 and the state rules' 20 or 30, a threshold of
// thousands would suppress whole answers.
const MaxMinCell = 1000

// MinCell is a small-cell threshold: a whole number from 0 to MaxMinCell.
type MinCell int

func (m *MinCell) SetValue(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > MaxMinCell {
		return fmt.Errorf("%q is not a whole number from 0 to %d", s, MaxMinCell)
	}
	*m = MinCell(n)
	return nil
}

// Count is a non-negative whole number (pool sizes, file counts).
type Count int

func (c *Count) SetValue(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a whole number >= 0", s)
	}
	*c = Count(n)
	return nil
}

// Bytes is a size in bytes; it must be positive.
type Bytes int64

func (b *Bytes) SetValue(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 1 {
		return fmt.Errorf("%q is not a positive number of bytes", s)
	}
	*b = Bytes(n)
	return nil
}

// HeapFloor is APP__HEAP_FLOOR: a number of bytes, 0 (off) or up to 64 GiB.
type HeapFloor int64

func (f *HeapFloor) SetValue(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > 64<<30 {
		return fmt.Errorf("%q is not a number of bytes from 0 (off) to 68719476736", s)
	}
	*f = HeapFloor(n)
	return nil
}

// Seconds is a duration given in (possibly fractional) seconds, as the specification's
// settings are.
type Seconds time.Duration

func (d *Seconds) SetValue(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f <= 0 || f > 1e6 {
		return fmt.Errorf("%q is not a positive number of seconds", s)
	}
	*d = Seconds(time.Duration(f * float64(time.Second)))
	return nil
}

// Duration returns d as a time.Duration.
func (d Seconds) Duration() time.Duration { return time.Duration(d) }

// Delay is a duration in (possibly fractional) seconds that may be 0: none.
type Delay time.Duration

func (d *Delay) SetValue(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || f > 1e6 {
		return fmt.Errorf("%q is not a number of seconds >= 0", s)
	}
	*d = Delay(time.Duration(f * float64(time.Second)))
	return nil
}

// Duration returns d as a time.Duration.
func (d Delay) Duration() time.Duration { return time.Duration(d) }

// Switch is a yes/no setting. The specification writes some as yes/no and others as
// true/false; both spellings are accepted everywhere.
type Switch bool

func (b *Switch) SetValue(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "true", "1", "on":
		*b = true
	case "no", "false", "0", "off":
		*b = false
	default:
		return fmt.Errorf("%q is not yes/no or true/false", s)
	}
	return nil
}

// LogLevel is one of the specification's level names.
type LogLevel slog.Level

// LevelCritical sits above slog's Error level, as platform/logging's, which names it CRITICAL.
const LevelCritical = slog.LevelError + 4

func (l *LogLevel) SetValue(s string) error {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "DEBUG":
		*l = LogLevel(slog.LevelDebug)
	case "INFO":
		*l = LogLevel(slog.LevelInfo)
	case "WARNING", "WARN":
		*l = LogLevel(slog.LevelWarn)
	case "ERROR":
		*l = LogLevel(slog.LevelError)
	case "CRITICAL":
		*l = LogLevel(LevelCritical)
	default:
		return fmt.Errorf("%q is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL", s)
	}
	return nil
}

// Level returns l as a slog.Level.
func (l LogLevel) Level() slog.Level { return slog.Level(l) }

// LogFormat is the console line format.
type LogFormat string

const (
	FormatPlain LogFormat = "plain"
	FormatJSON  LogFormat = "json"
)

func (f *LogFormat) SetValue(s string) error {
	switch v := LogFormat(strings.ToLower(strings.TrimSpace(s))); v {
	case FormatPlain, FormatJSON:
		*f = v
	default:
		return fmt.Errorf("%q is not plain or json", s)
	}
	return nil
}

// Origins is the CORS allow-list, written as a JSON list of origins.
type Origins []string

func (o *Origins) SetValue(s string) error {
	var list []string
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		return fmt.Errorf("%q is not a JSON list of origins, e.g. [\"https://reports.example.org\"]", s)
	}
	for _, origin := range list {
		if origin == "*" {
			continue
		}
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("%q is not an origin like https://host[:port] in %s", origin, s)
		}
	}
	*o = list
	return nil
}

// Proxies is a JSON list of addresses or CIDR prefixes.
type Proxies []string

func (p *Proxies) SetValue(s string) error {
	var list []string
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		return fmt.Errorf("%q is not a JSON list of addresses or CIDR prefixes, e.g. [\"10.0.0.0/8\"]", s)
	}
	for _, v := range list {
		if _, err := netip.ParsePrefix(strings.TrimSpace(v)); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("%q is not an address or a CIDR prefix in %s", v, s)
		}
	}
	*p = list
	return nil
}

// RootPath is the path prefix a reverse proxy may serve the API under: "" or "/prefix".
type RootPath string

func (p *RootPath) SetValue(s string) error {
	s = strings.TrimSpace(s)
	if s == "" || s == "/" {
		*p = ""
		return nil
	}
	if !strings.HasPrefix(s, "/") || strings.ContainsAny(s, "?#* \t") || strings.Contains(s, "//") {
		return fmt.Errorf("%q is not a path prefix like /analytics", s)
	}
	*p = RootPath(strings.TrimRight(s, "/"))
	return nil
}

// HeaderName is an HTTP header name (RFC 9110 token).
type HeaderName string

func (h *HeaderName) SetValue(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return fmt.Errorf("the header name is empty")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return fmt.Errorf("%q is not a valid HTTP header name", s)
		}
	}
	*h = HeaderName(s)
	return nil
}

// Secret is a value that must never be printed: its String and LogValue hide it.
type Secret string

func (s *Secret) SetValue(v string) error { *s = Secret(v); return nil }

func (s Secret) String() string { return "[hidden]" }

func (s Secret) LogValue() slog.Value { return slog.StringValue("[hidden]") }

// Reveal returns the secret itself, for the few places that must use it.
func (s Secret) Reveal() string { return string(s) }

func (h HeaderName) String() string { return string(h) }

// Channel is a LISTEN/NOTIFY channel name: a lower-case SQL identifier, so that the ETL's
// unquoted NOTIFY name reaches the service's LISTEN (PostgreSQL folds unquoted names to lower
// case); empty means none.
type Channel string

func (c *Channel) SetValue(s string) error {
	s = strings.TrimSpace(s)
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && (r >= '0' && r <= '9' || r == '$')) {
			return fmt.Errorf("%q is not a lower-case channel name (letters a-z, digits and _, not starting with a digit)", s)
		}
	}
	if len(s) > 63 {
		return fmt.Errorf("%q is longer than PostgreSQL's 63-byte names", s)
	}
	*c = Channel(s)
	return nil
}

// ChangeSource is CACHE__CHANGES: where the service learns that data changed.
type ChangeSource string

// The change sources.
const (
	ChangesAuto        ChangeSource = "auto"
	ChangesReplication ChangeSource = "replication"
	ChangesSnapshot    ChangeSource = "snapshot"
)

func (c *ChangeSource) SetValue(s string) error {
	switch v := ChangeSource(strings.ToLower(strings.TrimSpace(s))); v {
	case ChangesAuto, ChangesReplication, ChangesSnapshot:
		*c = v
		return nil
	}
	return fmt.Errorf("%q is not one of auto, replication, snapshot", s)
}

// Identifier is a PostgreSQL object name (quoted where it is used, so any character but NUL),
// not empty and at most 63 bytes, which PostgreSQL would otherwise cut silently.
type Identifier string

func (i *Identifier) SetValue(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("an empty name")
	case len(s) > 63:
		return fmt.Errorf("%q is longer than PostgreSQL's 63-byte names", s)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("%q contains a NUL character", s)
	}
	*i = Identifier(s)
	return nil
}
