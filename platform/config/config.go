// Package config reads the service's settings from the environment and an optional env file.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ilyakaznacheev/cleanenv"
	"github.com/joho/godotenv"
)

// Config holds every setting of the specification (sections 1 and 5) and the contract.
type Config struct {
	App            App
	Database       Database
	Security       Security
	Authentication Authentication
	Log            Log
	OTel           OTel
	Limits         Limits
	Cache          Cache
	Privacy        Privacy
}

// Privacy is the small-cell suppression of the EMS performance measures (contract 6.12.4).
type Privacy struct {
	// MinCell is the service-wide threshold k: a count from 1 to k-1 of interval_stats,
	// demand_grid or period_comparison is suppressed (0 or 1: nothing is). A key's min_cell in
	// the keys file and the fields' min_cell argument may raise it, never lower it.
	MinCell MinCell `env:"PRIVACY__MIN_CELL" env-default:"0"`
}

// Cache is the answers-from-memory cache of GraphQL answers (contract section 6.5).
type Cache struct {
	Enabled Switch `env:"CACHE__ENABLED" env-default:"true"`
	// MaxStaleness bounds how long after a committed change an answer from memory may still
	// be the one from before it.
	MaxStaleness Seconds `env:"CACHE__MAX_STALENESS" env-default:"2"`
	// MaxBytes bounds the answers kept, their keys and bookkeeping included.
	MaxBytes Bytes `env:"CACHE__MAX_BYTES" env-default:"67108864"`
	// NotifyChannel is the channel a NOTIFY on which makes answers fresh at once; empty: no
	// LISTEN connection (e.g. behind PgBouncer in transaction pooling, where LISTEN cannot work).
	NotifyChannel Channel `env:"CACHE__NOTIFY_CHANNEL" env-default:"emsquery_refresh"`
	// Changes is where the service learns that data changed (contract section 6.13).
	Changes ChangeSource `env:"CACHE__CHANGES" env-default:"auto"`
	// Publication is the publication whose changes CACHE__CHANGES=replication reads.
	Publication Identifier `env:"CACHE__PUBLICATION" env-default:"emsquery"`
}

// Limits protect the service and the database from requests that are too large or too slow.
// Every refusal names the limit's setting.
type Limits struct {
	// QueryDepth and QueryComplexity bound a GraphQL document (gqlgen's complexity limit). The
	// standard introspection query (graphql-js 16, GraphiQL's schema fetch) has depth 15.
	QueryDepth      Count `env:"LIMITS__MAX_QUERY_DEPTH" env-default:"15"`
	QueryComplexity Count `env:"LIMITS__MAX_QUERY_COMPLEXITY" env-default:"1000"`
	// Columns and Filters bound the lists of distinct_values, unique_counts and the reports.
	Columns Count `env:"LIMITS__MAX_COLUMNS" env-default:"20"`
	Filters Count `env:"LIMITS__MAX_FILTERS" env-default:"50"`
	// FilterValues bounds the values list of one IN or NOT_IN filter.
	FilterValues Count `env:"LIMITS__MAX_FILTER_VALUES" env-default:"1000"`
	// SeriesPoints bounds the points of one record_series answer.
	SeriesPoints Count `env:"LIMITS__MAX_SERIES_POINTS" env-default:"50000"`
	// PageSize is the largest main_report page.
	PageSize Count `env:"LIMITS__MAX_PAGE_SIZE" env-default:"1000"`
	// StatementTimeout is the database's statement_timeout for every query; the CSV export,
	// which streams for as long as the client reads, has ExportTimeout instead.
	StatementTimeout Seconds `env:"LIMITS__STATEMENT_TIMEOUT" env-default:"30"`
	ExportTimeout    Seconds `env:"LIMITS__EXPORT_TIMEOUT" env-default:"600"`
	// RequestTimeout bounds a whole API request (GraphQL), waiting for a connection included.
	RequestTimeout Seconds `env:"LIMITS__REQUEST_TIMEOUT" env-default:"60"`
	// MaxRootFields bounds the root fields of one GraphQL operation as executed (aliases and
	// fragments counted): each is a statement, so one document cannot queue hundreds of them.
	MaxRootFields Count `env:"LIMITS__MAX_ROOT_FIELDS" env-default:"20"`
	// RequestParallelism bounds the database connections one request holds at once; its other
	// root fields wait their turn, so one request cannot take the whole pool.
	RequestParallelism Count `env:"LIMITS__REQUEST_PARALLELISM" env-default:"4"`
	// MaxRows bounds the rows of one distinct_values, unique_counts or record_stats answer,
	// counted while they are read, so that one answer cannot take the process's memory.
	MaxRows Count `env:"LIMITS__MAX_ROWS" env-default:"100000"`
	// MaxConcurrentExports bounds the CSV exports running at once: each holds a database
	// connection for as long as its client reads, so without a bound a few slow downloads
	// would take the whole pool from GraphQL. Past it an export is refused with 503.
	MaxConcurrentExports Count `env:"LIMITS__MAX_CONCURRENT_EXPORTS" env-default:"2"`
	// MaxStreamedAnswers bounds the answers sent while their rows are read (whole-table lists
	// without limit, and the CSV export), all keys together; one key holds at most half of it,
	// rounded up. Each holds a connection for as long as its client reads, so the rest of the
	// pool always serves the other questions. 0 or unset: half of DATABASE__POOL_SIZE, rounded
	// up (at least 1).
	MaxStreamedAnswers Count `env:"LIMITS__MAX_STREAMED_ANSWERS"`
	// MaxStreams bounds the live answers (subscriptions over SSE) open at once, all keys
	// together; each holds a connection and a little memory for as long as its client stays.
	MaxStreams Count `env:"LIMITS__MAX_STREAMS" env-default:"1000"`
	// MaxStreamsPerKey bounds the live answers open at once of one key without max_streams of
	// its own (the single AUTHENTICATION__API_KEY too), so that one such key cannot hold all
	// of MaxStreams. 0: no bound but MaxStreams.
	MaxStreamsPerKey Count `env:"LIMITS__MAX_STREAMS_PER_KEY" env-default:"100"`
}

type App struct {
	Host                string   `env:"APP__HOST" env-default:"127.0.0.1"`
	Port                Port     `env:"APP__PORT" env-default:"9090"`
	RootPath            RootPath `env:"APP__ROOT_PATH" env-default:"/"`
	HealthChecksEnabled Switch   `env:"APP__HEALTH_CHECKS_ENABLED" env-default:"true"`
	MaxBodyBytes        Bytes    `env:"APP__MAX_BODY_BYTES" env-default:"1048576"`
	ShutdownTimeout     Seconds  `env:"APP__SHUTDOWN_TIMEOUT" env-default:"30"`
	// HeapFloor is the least the heap grows by between two garbage collections (platform/heapfloor).
	HeapFloor HeapFloor `env:"APP__HEAP_FLOOR" env-default:"16777216"`
	// TrustedProxies are the proxies (addresses or CIDR prefixes) whose X-Forwarded-For or
	// Forwarded names the client: per-address limits and the access log count that client.
	TrustedProxies Proxies `env:"APP__TRUSTED_PROXIES" env-default:"[]"`
	// ShutdownDelay is how long the service serves on after SIGTERM with /v1/healthz answering
	// 503, before the graceful shutdown: the time a load balancer takes to stop sending.
	ShutdownDelay Delay `env:"APP__SHUTDOWN_DELAY" env-default:"0"`
	// ReadTimeout bounds reading one request, headers and body; IdleTimeout closes a keep-alive
	// connection that sends no next request; MaxConnections bounds open connections (past it
	// new ones are closed at once). Together they keep slow or idle clients from holding the
	// service's connections and file descriptors.
	ReadTimeout    Seconds `env:"APP__READ_TIMEOUT" env-default:"30"`
	IdleTimeout    Seconds `env:"APP__IDLE_TIMEOUT" env-default:"120"`
	MaxConnections Count   `env:"APP__MAX_CONNECTIONS" env-default:"10000"`
	// MaxConnectionsPerClient bounds the connections one remote address keeps open (0: no
	// bound), so that one client cannot take all of MaxConnections from the others.
	MaxConnectionsPerClient Count `env:"APP__MAX_CONNECTIONS_PER_CLIENT" env-default:"256"`
	// WriteTimeout is how long a response may wait for its client to accept a byte: a client
	// that stops reading is cut off then (its connection and database work given back), while
	// one that reads slowly but steadily is never cut.
	WriteTimeout Seconds `env:"APP__WRITE_TIMEOUT" env-default:"60"`
	// StreamHeartbeat is how long a live answer's stream may stay quiet: a comment line goes
	// out then, so that proxies do not close it (at most 15 s, the contract's bound).
	StreamHeartbeat Seconds `env:"APP__STREAM_HEARTBEAT" env-default:"15"`
}

type Database struct {
	// Hosts and Ports are libpq's multi-host form: the hosts are tried in order (or in random
	// order, see LoadBalanceHosts) until one accepts the connection and suits
	// TargetSessionAttrs. Use Endpoints to pair them.
	Hosts              Hosts              `env:"DATABASE__HOST" env-default:"localhost"`
	Ports              Ports              `env:"DATABASE__PORT" env-default:"5432"`
	TargetSessionAttrs TargetSessionAttrs `env:"DATABASE__TARGET_SESSION_ATTRS" env-default:"any"`
	LoadBalanceHosts   LoadBalanceHosts   `env:"DATABASE__LOAD_BALANCE_HOSTS" env-default:"disable"`
	// TransactionPooling says that the hosts are a pooler in transaction mode (PgBouncer):
	// session settings then travel with every transaction instead of the connection's start.
	TransactionPooling Switch `env:"DATABASE__TRANSACTION_POOLING" env-default:"no"`
	Name               string `env:"DATABASE__NAME" env-default:"postgres"`
	Username           string `env:"DATABASE__USERNAME" env-default:"postgres"`
	Password           Secret `env:"DATABASE__PASSWORD"`
	// Schema becomes the connection's search_path.
	Schema                 string  `env:"DATABASE__SCHEMA" env-default:"public"`
	Encrypt                Switch  `env:"DATABASE__ENCRYPT" env-default:"yes"`
	TrustServerCertificate Switch  `env:"DATABASE__TRUST_SERVER_CERTIFICATE" env-default:"yes"`
	SSLRootCert            string  `env:"DATABASE__SSL_ROOT_CERT"`
	PoolSize               Count   `env:"DATABASE__POOL_SIZE" env-default:"10"`
	MaxOverflow            Count   `env:"DATABASE__MAX_OVERFLOW" env-default:"20"`
	PoolTimeout            Seconds `env:"DATABASE__POOL_TIMEOUT" env-default:"30"`
	PoolRecycle            Seconds `env:"DATABASE__POOL_RECYCLE" env-default:"1800"`

	// SSLMode is libpq's sslmode; when set it replaces Encrypt and TrustServerCertificate
	// (see TLSMode).
	SSLMode SSLMode `env:"DATABASE__SSL_MODE"`
	// SSLCert and SSLKey are a client certificate and its key (PEM files), for roles that
	// pg_hba admits by certificate.
	SSLCert string `env:"DATABASE__SSL_CERT"`
	SSLKey  string `env:"DATABASE__SSL_KEY"`
	// URL is DATABASE_URL, a libpq connection URL. Load takes from it every part whose
	// DATABASE__* setting is not set, notes those in FromURL, and keeps the URL's libpq
	// parameters that no setting covers (connect_timeout, sslpassword, options, ...) in Params.
	URL     Secret `env:"DATABASE_URL"`
	FromURL map[string]bool
	Params  map[string]string
}

type Security struct {
	CORS CORS
}

type CORS struct {
	Enabled      Switch  `env:"SECURITY__CORS__ENABLED" env-default:"true"`
	AllowOrigins Origins `env:"SECURITY__CORS__ALLOW_ORIGINS" env-default:"[\"http://localhost:3000\"]"`
}

type Authentication struct {
	APIKeyHeader HeaderName `env:"AUTHENTICATION__API_KEY_HEADER" env-default:"x-api-key"`
	// APIKey is the specification's single key, valid for every scope.
	APIKey Secret `env:"AUTHENTICATION__API_KEY"`
	// APIKeysFile is a JSON file of named keys (stored as SHA-256) with scopes and rate limits;
	// platform/auth reads it, and again on SIGHUP and when it changes.
	APIKeysFile string `env:"AUTHENTICATION__API_KEYS_FILE"`
	// APIKeysPollInterval is how often (whole seconds) the file is read to see whether it
	// changed; 0 leaves reloading to SIGHUP alone.
	APIKeysPollInterval Count `env:"AUTHENTICATION__API_KEYS_POLL_INTERVAL" env-default:"1"`
	// FailuresPerMinute is how many requests with a missing or wrong key one remote address
	// may send in a minute; past it the address is refused (429) until the minute is over,
	// without its keys being checked, which makes guessing keys slow. 0: no bound.
	FailuresPerMinute Count `env:"AUTHENTICATION__FAILURES_PER_MINUTE" env-default:"60"`
}

type Log struct {
	Level   LogLevel `env:"LOG__LEVEL" env-default:"INFO"`
	Path    string   `env:"LOG__PATH" env-default:"/app/logs"`
	Console LogConsole
	File    LogFile
}

type LogConsole struct {
	Enabled Switch    `env:"LOG__CONSOLE__ENABLED" env-default:"true"`
	Format  LogFormat `env:"LOG__CONSOLE__FORMAT" env-default:"plain"`
}

type LogFile struct {
	Enabled  Switch `env:"LOG__FILE__ENABLED" env-default:"true"`
	Filename string `env:"LOG__FILE__FILENAME" env-default:"service.log"`
	MaxSize  Bytes  `env:"LOG__FILE__MAX_SIZE" env-default:"10485760"`
	MaxFiles Count  `env:"LOG__FILE__MAX_FILES" env-default:"15"`
}

// OTel holds the OpenTelemetry variables the service itself acts on, for metrics and traces
// alike, each declared once. The SDK's exporters, resource and batch processor read the rest of
// the standard OTEL_* variables (headers, certificates, timeouts, temporality, OTEL_BSP_*) on
// their own; the ones here that they also read (the sampler, the protocols and endpoints,
// OTEL_RESOURCE_ATTRIBUTES) are checked at start-up, so that a bad value stops the start instead
// of being ignored, and decide what to build and log.
type OTel struct {
	// SDKDisabled is OTEL_SDK_DISABLED: true turns every exporter off.
	SDKDisabled      string `env:"OTEL_SDK_DISABLED"`
	MetricsExporters string `env:"OTEL_METRICS_EXPORTER" env-default:"otlp"`
	TracesExporters  string `env:"OTEL_TRACES_EXPORTER" env-default:"otlp"`
	PrometheusHost   string `env:"OTEL_EXPORTER_PROMETHEUS_HOST" env-default:"localhost"`
	PrometheusPort   Port   `env:"OTEL_EXPORTER_PROMETHEUS_PORT" env-default:"9464"`
	Sampler          string `env:"OTEL_TRACES_SAMPLER"`
	SamplerArg       string `env:"OTEL_TRACES_SAMPLER_ARG"`
	// ResourceAttributes is quoted in the error when the SDK cannot parse it.
	ResourceAttributes string `env:"OTEL_RESOURCE_ATTRIBUTES"`
	// The signal-specific variable wins over the general one.
	Protocol        string `env:"OTEL_EXPORTER_OTLP_PROTOCOL"`
	MetricsProtocol string `env:"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"`
	TracesProtocol  string `env:"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"`
	Endpoint        string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	MetricsEndpoint string `env:"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"`
	TracesEndpoint  string `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"`
	ExportInterval  string `env:"OTEL_METRIC_EXPORT_INTERVAL"`
}

func sdkDisabled(v string) bool {
	b, _ := strconv.ParseBool(strings.TrimSpace(v))
	return b
}

// Disabled says whether OTEL_SDK_DISABLED is true.
func (o OTel) Disabled() bool { return sdkDisabled(o.SDKDisabled) }

// TracesEnabled says whether traces are exported: OTEL_TRACES_EXPORTER names otlp and the SDK
// is not disabled.
func (o OTel) TracesEnabled() bool {
	on, _ := o.TracesOTLP()
	return on && !o.Disabled()
}

// TracesOTLP reads OTEL_TRACES_EXPORTER: otlp (the SDK's default) or none, or a comma list of
// them; true when otlp is among them.
func (o OTel) TracesOTLP() (bool, error) {
	otlp := false
	for _, name := range strings.Split(o.TracesExporters, ",") {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "", "none":
		case "otlp":
			otlp = true
		default:
			return false, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not otlp or none", o.TracesExporters)
		}
	}
	return otlp, nil
}

// samplers are the values of OTEL_TRACES_SAMPLER the SDK understands; true when it takes a
// ratio in OTEL_TRACES_SAMPLER_ARG.
var samplers = map[string]bool{
	"always_on": false, "always_off": false, "traceidratio": true,
	"parentbased_always_on": false, "parentbased_always_off": false, "parentbased_traceidratio": true,
}

// checkSampler refuses a sampler or ratio that the SDK would otherwise ignore with a log line
// nobody reads, falling back to sampling everything.
func (o OTel) checkSampler() []string {
	name := strings.ToLower(strings.TrimSpace(o.Sampler))
	if name == "" {
		return nil
	}
	ratio, ok := samplers[name]
	if !ok {
		return []string{fmt.Sprintf("OTEL_TRACES_SAMPLER: %q is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", o.Sampler)}
	}
	if arg := strings.TrimSpace(o.SamplerArg); ratio && arg != "" {
		if f, err := strconv.ParseFloat(arg, 64); err != nil || f < 0 || f > 1 {
			return []string{fmt.Sprintf("OTEL_TRACES_SAMPLER_ARG: %q is not a ratio between 0 and 1", o.SamplerArg)}
		}
	}
	return nil
}

// Endpoint is one database host and its port.
type Endpoint struct {
	Host string
	Port Port
}

// String is host:port (a Unix socket directory keeps its path).
func (e Endpoint) String() string { return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))) }

// Endpoints pairs every host with its port: DATABASE__PORT's only port, or the one at the same
// place in its list (Load refuses lists of other lengths).
func (d Database) Endpoints() []Endpoint {
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

// MinKeyLength is the key length below which the service warns at start-up
// (platform/auth's MinKeyLength).
const MinKeyLength = 32

// EnvFile is the path of an env file to read; empty means ".env" in the working folder when
// present.
type EnvFile string

// Load reads the settings. Variables already in the environment win over the env file.
// Every error names the variable and its bad value in one line.
func Load(file EnvFile) (*Config, error) {
	if err := applyEnvFile(string(file)); err != nil {
		return nil, err
	}
	var cfg Config
	if err := cleanenv.ReadEnv(&cfg); err != nil {
		return nil, explain(err)
	}
	if err := cfg.Database.applyURL(setInEnvironment(reflect.TypeFor[Database]())); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func applyEnvFile(path string) error {
	if path == "" {
		if _, err := os.Stat(".env"); err != nil {
			return nil
		}
		path = ".env"
	}
	vars, err := godotenv.Read(path)
	if err != nil {
		return fmt.Errorf("env file %s: %w", path, err)
	}
	for k, v := range vars {
		if _, set := os.LookupEnv(k); !set {
			if err := os.Setenv(k, v); err != nil {
				return fmt.Errorf("env file %s: %w", path, err)
			}
		}
	}
	return nil
}

var cleanenvError = regexp.MustCompile(`^parsing field \S+ env (\S+): (.*)$`)

// explain turns cleanenv's "parsing field X env Y: msg" into "Y: msg".
func explain(err error) error {
	if m := cleanenvError.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s: %s", m[1], m[2])
	}
	return err
}

func (c *Config) validate() error {
	var errs []string
	if strings.TrimSpace(c.Authentication.APIKey.Reveal()) == "" && strings.TrimSpace(c.Authentication.APIKeysFile) == "" {
		errs = append(errs, "AUTHENTICATION__API_KEY: not set, and no AUTHENTICATION__API_KEYS_FILE either; the service refuses to start without an API key (choose a long random value, or list named keys in a keys file)")
	}
	if n, m := len(c.Database.Hosts), len(c.Database.Ports); m != 1 && m != n {
		errs = append(errs, fmt.Sprintf("DATABASE__PORT: %d ports for %d hosts in DATABASE__HOST; give one port for all hosts or one per host", m, n))
	}
	if strings.TrimSpace(c.Database.Name) == "" {
		errs = append(errs, "DATABASE__NAME: empty")
	}
	if strings.TrimSpace(c.Database.Username) == "" {
		errs = append(errs, "DATABASE__USERNAME: empty")
	}
	errs = append(errs, c.Database.checkClientCert()...)
	if c.Database.PoolSize+c.Database.MaxOverflow < 1 {
		errs = append(errs, fmt.Sprintf("DATABASE__POOL_SIZE: %d with DATABASE__MAX_OVERFLOW %d allows no connection", c.Database.PoolSize, c.Database.MaxOverflow))
	}
	if c.Log.File.Enabled {
		if c.Log.File.Filename == "" || strings.ContainsAny(c.Log.File.Filename, `/\`) {
			errs = append(errs, fmt.Sprintf("LOG__FILE__FILENAME: %q is not a plain file name", c.Log.File.Filename))
		}
		if c.Log.File.MaxFiles < 2 {
			errs = append(errs, fmt.Sprintf("LOG__FILE__MAX_FILES: %d; the current file and at least one older file are kept, so the value is at least 2", c.Log.File.MaxFiles))
		}
	}
	for name, v := range map[string]Count{
		"LIMITS__MAX_QUERY_DEPTH": c.Limits.QueryDepth, "LIMITS__MAX_QUERY_COMPLEXITY": c.Limits.QueryComplexity,
		"LIMITS__MAX_COLUMNS": c.Limits.Columns, "LIMITS__MAX_FILTERS": c.Limits.Filters, "LIMITS__MAX_PAGE_SIZE": c.Limits.PageSize,
		"LIMITS__MAX_FILTER_VALUES": c.Limits.FilterValues, "LIMITS__MAX_SERIES_POINTS": c.Limits.SeriesPoints,
		"LIMITS__MAX_ROOT_FIELDS": c.Limits.MaxRootFields, "LIMITS__REQUEST_PARALLELISM": c.Limits.RequestParallelism,
		"LIMITS__MAX_ROWS":               c.Limits.MaxRows,
		"LIMITS__MAX_CONCURRENT_EXPORTS": c.Limits.MaxConcurrentExports,
		"LIMITS__MAX_STREAMS":            c.Limits.MaxStreams,
	} {
		if v < 1 {
			errs = append(errs, fmt.Sprintf("%s: %d; the limit must be at least 1", name, v))
		}
	}
	if c.Limits.MaxStreamedAnswers == 0 {
		c.Limits.MaxStreamedAnswers = max((c.Database.PoolSize+1)/2, 1)
	}
	if c.App.StreamHeartbeat.Duration() > 15*time.Second {
		errs = append(errs, fmt.Sprintf("APP__STREAM_HEARTBEAT: %s; proxies close streams quiet for longer, so it is at most 15 s", c.App.StreamHeartbeat.Duration()))
	}
	if c.App.MaxConnections < 1 {
		errs = append(errs, fmt.Sprintf("APP__MAX_CONNECTIONS: %d; the service needs at least 1 connection", c.App.MaxConnections))
	}
	if _, err := c.OTel.MetricsExporterList(); err != nil {
		errs = append(errs, err.Error())
	}
	if _, err := c.OTel.TracesOTLP(); err != nil {
		errs = append(errs, err.Error())
	}
	errs = append(errs, c.OTel.checkSampler()...)
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// MetricsExporterList returns the metric exporters named by OTEL_METRICS_EXPORTER,
// deduplicated; an empty list means none.
func (o OTel) MetricsExporterList() ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, name := range strings.Split(o.MetricsExporters, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch name {
		case "", "none":
			continue
		case "otlp", "prometheus":
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		default:
			return nil, fmt.Errorf("OTEL_METRICS_EXPORTER: %q is not otlp, prometheus, none or a comma list of them", o.MetricsExporters)
		}
	}
	return out, nil
}

// WeakKey says whether the API key is set and shorter than MinKeyLength.
func (a Authentication) WeakKey() bool { return a.APIKey != "" && len(a.APIKey) < MinKeyLength }
