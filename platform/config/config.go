// Package config reads the service's settings from the environment and an optional env file.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"

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
	Metrics        Metrics
	Limits         Limits
	Cache          Cache
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
}

type App struct {
	Host                string   `env:"APP__HOST" env-default:"127.0.0.1"`
	Port                Port     `env:"APP__PORT" env-default:"9090"`
	RootPath            RootPath `env:"APP__ROOT_PATH" env-default:"/"`
	HealthChecksEnabled Switch   `env:"APP__HEALTH_CHECKS_ENABLED" env-default:"true"`
	MaxBodyBytes        Bytes    `env:"APP__MAX_BODY_BYTES" env-default:"1048576"`
	ShutdownTimeout     Seconds  `env:"APP__SHUTDOWN_TIMEOUT" env-default:"30"`
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
	APIKey       Secret     `env:"AUTHENTICATION__API_KEY"`
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

// Metrics holds the OpenTelemetry variables the service itself acts on. The SDK's exporters and
// resource read the rest of the standard OTEL_* variables (headers, certificates, timeouts,
// temporality, OTEL_RESOURCE_ATTRIBUTES) on their own; the ones here that they also read are
// kept only to decide what to build and what to log.
type Metrics struct {
	Exporters      string `env:"OTEL_METRICS_EXPORTER" env-default:"otlp"`
	PrometheusHost string `env:"OTEL_EXPORTER_PROMETHEUS_HOST" env-default:"localhost"`
	PrometheusPort Port   `env:"OTEL_EXPORTER_PROMETHEUS_PORT" env-default:"9464"`
	// SDKDisabled is OTEL_SDK_DISABLED: true turns every exporter off.
	SDKDisabled string `env:"OTEL_SDK_DISABLED"`
	// ResourceAttributes is quoted in the error when the SDK cannot parse it.
	ResourceAttributes string `env:"OTEL_RESOURCE_ATTRIBUTES"`
	OTLP               OTLP
}

// OTLP is what the start-up log says about the OTLP exporter: its protocol (which exporter to
// build), endpoint and interval. The signal-specific variable wins over the general one.
type OTLP struct {
	Protocol        string `env:"OTEL_EXPORTER_OTLP_PROTOCOL"`
	MetricsProtocol string `env:"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"`
	Endpoint        string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	MetricsEndpoint string `env:"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"`
	ExportInterval  string `env:"OTEL_METRIC_EXPORT_INTERVAL"`
}

// Disabled says whether OTEL_SDK_DISABLED is true.
func (m Metrics) Disabled() bool {
	v, _ := strconv.ParseBool(strings.TrimSpace(m.SDKDisabled))
	return v
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

// MinKeyLength is the key length below which the service warns at start-up.
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
	if strings.TrimSpace(c.Authentication.APIKey.Reveal()) == "" {
		errs = append(errs, "AUTHENTICATION__API_KEY: not set; the service refuses to start without an API key (choose a long random value)")
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
	} {
		if v < 1 {
			errs = append(errs, fmt.Sprintf("%s: %d; the limit must be at least 1", name, v))
		}
	}
	if _, err := c.Metrics.ExporterList(); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// ExporterList returns the metric exporters named by OTEL_METRICS_EXPORTER, deduplicated;
// an empty list means none.
func (m Metrics) ExporterList() ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, name := range strings.Split(m.Exporters, ",") {
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
			return nil, fmt.Errorf("OTEL_METRICS_EXPORTER: %q is not otlp, prometheus, none or a comma list of them", m.Exporters)
		}
	}
	return out, nil
}

// WeakKey says whether the API key is shorter than MinKeyLength.
func (a Authentication) WeakKey() bool { return len(a.APIKey) < MinKeyLength }
