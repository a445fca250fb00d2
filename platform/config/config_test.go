package config_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/platform/config"
)

// setenv sets the variables for one test and clears every other setting, so that the test
// machine's environment cannot change the outcome.
func setenv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		for _, p := range []string{"APP__", "DATABASE__", "SECURITY__", "AUTHENTICATION__", "LOG__", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_PROMETHEUS_", "OTEL_TRACES_", "OTEL_SDK_DISABLED", "LIMITS__", "CACHE__", "DATABASE_URL"} {
			if strings.HasPrefix(k, p) {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
		}
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	t.Chdir(t.TempDir()) // no stray .env
}

func TestDefaults(t *testing.T) {
	setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k"})
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"APP__HOST", cfg.App.Host, "127.0.0.1"},
		{"APP__PORT", cfg.App.Port, config.Port(9090)},
		{"APP__ROOT_PATH", cfg.App.RootPath, config.RootPath("")},
		{"APP__HEALTH_CHECKS_ENABLED", cfg.App.HealthChecksEnabled, config.Switch(true)},
		{"APP__MAX_BODY_BYTES", cfg.App.MaxBodyBytes, config.Bytes(1 << 20)},
		{"APP__HEAP_FLOOR", cfg.App.HeapFloor, config.HeapFloor(16 << 20)},
		{"APP__READ_TIMEOUT", cfg.App.ReadTimeout.Duration(), 30 * time.Second},
		{"APP__IDLE_TIMEOUT", cfg.App.IdleTimeout.Duration(), 120 * time.Second},
		{"APP__MAX_CONNECTIONS", cfg.App.MaxConnections, config.Count(10000)},
		{"APP__MAX_CONNECTIONS_PER_CLIENT", cfg.App.MaxConnectionsPerClient, config.Count(256)},
		{"APP__WRITE_TIMEOUT", cfg.App.WriteTimeout.Duration(), 60 * time.Second},
		{"APP__SHUTDOWN_DELAY", cfg.App.ShutdownDelay.Duration(), time.Duration(0)},
		{"APP__TRUSTED_PROXIES", len(cfg.App.TrustedProxies), 0},
		{"AUTHENTICATION__FAILURES_PER_MINUTE", cfg.Authentication.FailuresPerMinute, config.Count(60)},
		{"LIMITS__MAX_CONCURRENT_EXPORTS", cfg.Limits.MaxConcurrentExports, config.Count(2)},
		{"LIMITS__MAX_STREAMED_ANSWERS", cfg.Limits.MaxStreamedAnswers, config.Count(5)},
		{"AUTHENTICATION__API_KEYS_FILE", cfg.Authentication.APIKeysFile, ""},
		{"AUTHENTICATION__API_KEYS_POLL_INTERVAL", cfg.Authentication.APIKeysPollInterval, config.Count(1)},
		{"OTEL_TRACES_EXPORTER", cfg.OTel.TracesExporters, "otlp"},
		{"traces enabled", cfg.OTel.TracesEnabled(), true},
		{"DATABASE__HOST", cfg.Database.Hosts, config.Hosts{"localhost"}},
		{"DATABASE__PORT", cfg.Database.Ports, config.Ports{5432}},
		{"DATABASE__TARGET_SESSION_ATTRS", cfg.Database.TargetSessionAttrs, config.TargetAny},
		{"DATABASE__LOAD_BALANCE_HOSTS", cfg.Database.LoadBalanceHosts, config.LoadBalanceDisable},
		{"DATABASE__TRANSACTION_POOLING", cfg.Database.TransactionPooling, config.Switch(false)},
		{"DATABASE__NAME", cfg.Database.Name, "postgres"},
		{"DATABASE__USERNAME", cfg.Database.Username, "postgres"},
		{"DATABASE__PASSWORD", cfg.Database.Password.Reveal(), ""},
		{"DATABASE__SCHEMA", cfg.Database.Schema, "public"},
		{"DATABASE__ENCRYPT", cfg.Database.Encrypt, config.Switch(true)},
		{"DATABASE__TRUST_SERVER_CERTIFICATE", cfg.Database.TrustServerCertificate, config.Switch(true)},
		{"DATABASE__SSL_ROOT_CERT", cfg.Database.SSLRootCert, ""},
		{"DATABASE__POOL_SIZE", cfg.Database.PoolSize, config.Count(10)},
		{"DATABASE__MAX_OVERFLOW", cfg.Database.MaxOverflow, config.Count(20)},
		{"DATABASE__POOL_TIMEOUT", cfg.Database.PoolTimeout.Duration(), 30 * time.Second},
		{"DATABASE__POOL_RECYCLE", cfg.Database.PoolRecycle.Duration(), 1800 * time.Second},
		{"SECURITY__CORS__ENABLED", cfg.Security.CORS.Enabled, config.Switch(true)},
		{"SECURITY__CORS__ALLOW_ORIGINS", cfg.Security.CORS.AllowOrigins, config.Origins{"http://localhost:3000"}},
		{"AUTHENTICATION__API_KEY_HEADER", cfg.Authentication.APIKeyHeader, config.HeaderName("x-api-key")},
		{"LOG__LEVEL", cfg.Log.Level.Level(), slog.LevelInfo},
		{"LOG__CONSOLE__ENABLED", cfg.Log.Console.Enabled, config.Switch(true)},
		{"LOG__CONSOLE__FORMAT", cfg.Log.Console.Format, config.FormatPlain},
		{"LOG__FILE__ENABLED", cfg.Log.File.Enabled, config.Switch(true)},
		{"LOG__PATH", cfg.Log.Path, "/app/logs"},
		{"LOG__FILE__FILENAME", cfg.Log.File.Filename, "service.log"},
		{"LOG__FILE__MAX_SIZE", cfg.Log.File.MaxSize, config.Bytes(10485760)},
		{"LOG__FILE__MAX_FILES", cfg.Log.File.MaxFiles, config.Count(15)},
		{"OTEL_METRICS_EXPORTER", cfg.OTel.MetricsExporters, "otlp"},
		{"OTEL_EXPORTER_PROMETHEUS_HOST", cfg.OTel.PrometheusHost, "localhost"},
		{"OTEL_EXPORTER_PROMETHEUS_PORT", cfg.OTel.PrometheusPort, config.Port(9464)},
		{"LIMITS__MAX_QUERY_DEPTH", cfg.Limits.QueryDepth, config.Count(15)},
		{"LIMITS__MAX_QUERY_COMPLEXITY", cfg.Limits.QueryComplexity, config.Count(1000)},
		{"LIMITS__MAX_COLUMNS", cfg.Limits.Columns, config.Count(20)},
		{"LIMITS__MAX_FILTERS", cfg.Limits.Filters, config.Count(50)},
		{"LIMITS__MAX_PAGE_SIZE", cfg.Limits.PageSize, config.Count(1000)},
		{"LIMITS__MAX_FILTER_VALUES", cfg.Limits.FilterValues, config.Count(1000)},
		{"LIMITS__MAX_SERIES_POINTS", cfg.Limits.SeriesPoints, config.Count(50000)},
		{"LIMITS__STATEMENT_TIMEOUT", cfg.Limits.StatementTimeout.Duration(), 30 * time.Second},
		{"LIMITS__EXPORT_TIMEOUT", cfg.Limits.ExportTimeout.Duration(), 600 * time.Second},
		{"LIMITS__REQUEST_TIMEOUT", cfg.Limits.RequestTimeout.Duration(), 60 * time.Second},
		{"LIMITS__MAX_ROOT_FIELDS", cfg.Limits.MaxRootFields, config.Count(20)},
		{"LIMITS__REQUEST_PARALLELISM", cfg.Limits.RequestParallelism, config.Count(4)},
		{"LIMITS__MAX_ROWS", cfg.Limits.MaxRows, config.Count(100000)},
		{"LIMITS__MAX_STREAMS", cfg.Limits.MaxStreams, config.Count(1000)},
		{"LIMITS__MAX_STREAMS_PER_KEY", cfg.Limits.MaxStreamsPerKey, config.Count(100)},
		{"PRIVACY__MIN_CELL", cfg.Privacy.MinCell, config.MinCell(0)},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s default = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if !cfg.Authentication.WeakKey() {
		t.Error("a 1-character key is not reported as weak")
	}
}

func TestValuesAreParsed(t *testing.T) {
	setenv(t, map[string]string{
		"AUTHENTICATION__API_KEY":            strings.Repeat("k", 40),
		"AUTHENTICATION__API_KEY_HEADER":     "SERVICE-X-API-KEY",
		"APP__ROOT_PATH":                     "/analytics/",
		"DATABASE__ENCRYPT":                  "no",
		"DATABASE__TRUST_SERVER_CERTIFICATE": "NO",
		"DATABASE__POOL_TIMEOUT":             "1.5",
		"DATABASE__PASSWORD":                 "p@ss:/#?%",
		"SECURITY__CORS__ALLOW_ORIGINS":      `["https://a.example.org", "http://b.example.org:8080"]`,
		"LOG__LEVEL":                         "warning",
		"LOG__CONSOLE__FORMAT":               "JSON",
		"OTEL_METRICS_EXPORTER":              "prometheus, otlp,prometheus",
	})
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.App.RootPath != "/analytics" || bool(cfg.Database.Encrypt) || bool(cfg.Database.TrustServerCertificate) ||
		cfg.Database.PoolTimeout.Duration() != 1500*time.Millisecond || cfg.Database.Password.Reveal() != "p@ss:/#?%" ||
		cfg.Log.Level.Level() != slog.LevelWarn || cfg.Log.Console.Format != config.FormatJSON ||
		cfg.Authentication.APIKeyHeader != "SERVICE-X-API-KEY" || cfg.Authentication.WeakKey() {
		t.Errorf("settings not parsed as given: %+v", cfg)
	}
	if !reflect.DeepEqual(cfg.Security.CORS.AllowOrigins, config.Origins{"https://a.example.org", "http://b.example.org:8080"}) {
		t.Errorf("origins = %v", cfg.Security.CORS.AllowOrigins)
	}
	if got, _ := cfg.OTel.MetricsExporterList(); !reflect.DeepEqual(got, []string{"prometheus", "otlp"}) {
		t.Errorf("exporters = %v", got)
	}
	for _, none := range []string{"none", "", " none "} {
		m := config.OTel{MetricsExporters: none}
		if got, err := m.MetricsExporterList(); err != nil || len(got) != 0 {
			t.Errorf("ExporterList(%q) = %v, %v; want none", none, got, err)
		}
	}
}

func TestEnvFileAndEnvironment(t *testing.T) {
	setenv(t, map[string]string{"APP__PORT": "7000"})
	dir := t.TempDir()
	file := filepath.Join(dir, "service.env")
	content := "AUTHENTICATION__API_KEY=from-file\nAPP__PORT=8000\nDATABASE__NAME=filedb\n# a comment\nDATABASE__PASSWORD='quoted #not a comment'\n"
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.EnvFile(file))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.App.Port != 7000 {
		t.Errorf("APP__PORT = %d; the environment (7000) must win over the file (8000)", cfg.App.Port)
	}
	if cfg.Database.Name != "filedb" || cfg.Authentication.APIKey.Reveal() != "from-file" {
		t.Errorf("file values not read: name %q", cfg.Database.Name)
	}
	if cfg.Database.Password.Reveal() != "quoted #not a comment" {
		t.Errorf("password = %q", cfg.Database.Password.Reveal())
	}
}

func TestDotEnvInWorkingFolder(t *testing.T) {
	setenv(t, nil)
	if err := os.WriteFile(".env", []byte("AUTHENTICATION__API_KEY=dotenv\nDATABASE__NAME=dot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.Name != "dot" {
		t.Errorf(".env in the working folder not read: DATABASE__NAME = %q", cfg.Database.Name)
	}
}

func TestMissingEnvFile(t *testing.T) {
	setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k"})
	_, err := config.Load("/nonexistent/service.env")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/service.env") {
		t.Errorf("err = %v; want an error naming the file", err)
	}
}

func TestBadValuesNameTheirVariable(t *testing.T) {
	cases := []struct{ name, value string }{
		{"APP__PORT", "abc"},
		{"APP__PORT", "70000"},
		{"APP__ROOT_PATH", "no-slash"},
		{"APP__HEALTH_CHECKS_ENABLED", "maybe"},
		{"APP__MAX_BODY_BYTES", "0"},
		{"APP__HEAP_FLOOR", "-1"},
		{"APP__HEAP_FLOOR", "16MB"},
		{"DATABASE__PORT", "-5"},
		{"DATABASE__PORT", "5432,x"},
		{"DATABASE__HOST", "db1,,db2"},
		{"DATABASE__TARGET_SESSION_ATTRS", "read-write"},
		{"DATABASE__LOAD_BALANCE_HOSTS", "round-robin"},
		{"DATABASE__TRANSACTION_POOLING", "pgbouncer"},
		{"DATABASE__ENCRYPT", "perhaps"},
		{"DATABASE__TRUST_SERVER_CERTIFICATE", "2"},
		{"DATABASE__SSL_MODE", "sometimes"},
		{"DATABASE__SSL_MODE", "verify"},
		{"DATABASE__POOL_SIZE", "-1"},
		{"DATABASE__MAX_OVERFLOW", "many"},
		{"DATABASE__POOL_TIMEOUT", "soon"},
		{"DATABASE__POOL_RECYCLE", "0"},
		{"SECURITY__CORS__ENABLED", "sure"},
		{"SECURITY__CORS__ALLOW_ORIGINS", "http://localhost:3000"},
		{"SECURITY__CORS__ALLOW_ORIGINS", `["not an origin"]`},
		{"AUTHENTICATION__API_KEY_HEADER", "x api key"},
		{"LOG__LEVEL", "LOUD"},
		{"LOG__CONSOLE__ENABLED", "ja"},
		{"LOG__CONSOLE__FORMAT", "xml"},
		{"LOG__FILE__ENABLED", "nej"},
		{"LOG__FILE__MAX_SIZE", "10MB"},
		{"LOG__FILE__MAX_FILES", "1"},
		{"LOG__FILE__FILENAME", "../escape.log"},
		{"OTEL_METRICS_EXPORTER", "zipkin"},
		{"OTEL_TRACES_EXPORTER", "jaeger"},
		{"OTEL_TRACES_SAMPLER", "sometimes"},
		{"APP__READ_TIMEOUT", "0"},
		{"APP__IDLE_TIMEOUT", "forever"},
		{"APP__MAX_CONNECTIONS", "0"},
		{"APP__MAX_CONNECTIONS_PER_CLIENT", "-1"},
		{"APP__WRITE_TIMEOUT", "0"},
		{"APP__SHUTDOWN_DELAY", "-1"},
		{"APP__TRUSTED_PROXIES", "10.0.0.0/8"},
		{"APP__TRUSTED_PROXIES", `["10.0.0.0/33"]`},
		{"APP__TRUSTED_PROXIES", `["proxy.example.org"]`},
		{"AUTHENTICATION__FAILURES_PER_MINUTE", "many"},
		{"LIMITS__MAX_CONCURRENT_EXPORTS", "0"},
		{"AUTHENTICATION__API_KEYS_POLL_INTERVAL", "-1"},
		{"OTEL_EXPORTER_PROMETHEUS_PORT", "port"},
		{"LIMITS__MAX_QUERY_DEPTH", "0"},
		{"LIMITS__MAX_COLUMNS", "many"},
		{"LIMITS__MAX_PAGE_SIZE", "0"},
		{"LIMITS__MAX_FILTER_VALUES", "0"},
		{"LIMITS__MAX_SERIES_POINTS", "lots"},
		{"LIMITS__STATEMENT_TIMEOUT", "-1"},
		{"LIMITS__REQUEST_TIMEOUT", "1m"},
		{"LIMITS__MAX_ROOT_FIELDS", "0"},
		{"LIMITS__REQUEST_PARALLELISM", "0"},
		{"LIMITS__MAX_ROWS", "lots"},
		{"LIMITS__MAX_STREAMS_PER_KEY", "-1"},
		{"LIMITS__MAX_STREAMS_PER_KEY", "many"},
		{"PRIVACY__MIN_CELL", "-1"},
		{"PRIVACY__MIN_CELL", "1001"},
		{"PRIVACY__MIN_CELL", "eleven"},
		{"CACHE__ENABLED", "often"},
		{"CACHE__MAX_STALENESS", "0"},
		{"CACHE__MAX_BYTES", "64MiB"},
		{"CACHE__NOTIFY_CHANNEL", "ETL-done"},
	}
	for _, c := range cases {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k", c.name: c.value})
			_, err := config.Load("")
			if err == nil {
				t.Fatalf("%s=%q accepted", c.name, c.value)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.name) || !strings.Contains(msg, c.value) {
				t.Errorf("error %q does not name %s and %q", msg, c.name, c.value)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
		})
	}
}

func TestSeveralHosts(t *testing.T) {
	for _, c := range []struct {
		host, port string
		want       []config.Endpoint
	}{
		{"db", "5432", []config.Endpoint{{Host: "db", Port: 5432}}},
		{"db1, db2,db3", "6432", []config.Endpoint{{Host: "db1", Port: 6432}, {Host: "db2", Port: 6432}, {Host: "db3", Port: 6432}}},
		{"db1,db2", "5432, 5433", []config.Endpoint{{Host: "db1", Port: 5432}, {Host: "db2", Port: 5433}}},
	} {
		setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k", "DATABASE__HOST": c.host, "DATABASE__PORT": c.port,
			"DATABASE__TARGET_SESSION_ATTRS": "Prefer-Standby", "DATABASE__LOAD_BALANCE_HOSTS": "random"})
		cfg, err := config.Load("")
		if err != nil {
			t.Fatalf("%s / %s: %v", c.host, c.port, err)
		}
		if got := cfg.Database.Endpoints(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s / %s: endpoints %v, want %v", c.host, c.port, got, c.want)
		}
		if cfg.Database.TargetSessionAttrs != config.TargetPreferStandby || cfg.Database.LoadBalanceHosts != config.LoadBalanceRandom {
			t.Errorf("target %q, load balance %q", cfg.Database.TargetSessionAttrs, cfg.Database.LoadBalanceHosts)
		}
	}
	// A port list must match the host list.
	setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k", "DATABASE__HOST": "db1,db2,db3", "DATABASE__PORT": "5432,5433"})
	if _, err := config.Load(""); err == nil || !strings.Contains(err.Error(), "DATABASE__PORT") {
		t.Errorf("2 ports for 3 hosts: err = %v, want one naming DATABASE__PORT", err)
	}
}

func TestMissingKeyRefused(t *testing.T) {
	setenv(t, nil)
	_, err := config.Load("")
	if err == nil || !strings.Contains(err.Error(), "AUTHENTICATION__API_KEY") || !strings.Contains(err.Error(), "AUTHENTICATION__API_KEYS_FILE") {
		t.Fatalf("err = %v; want a refusal naming AUTHENTICATION__API_KEY and AUTHENTICATION__API_KEYS_FILE", err)
	}
	// A keys file alone is enough (platform/auth reads it).
	setenv(t, map[string]string{"AUTHENTICATION__API_KEYS_FILE": "/etc/emsquery/keys.json"})
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Authentication.WeakKey() {
		t.Error("no AUTHENTICATION__API_KEY reported as a weak key")
	}
}

func TestTraceSettings(t *testing.T) {
	for _, c := range []struct {
		env     map[string]string
		enabled bool
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "OTLP", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, true},
	} {
		c.env["AUTHENTICATION__API_KEY"] = "k"
		setenv(t, c.env)
		cfg, err := config.Load("")
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if cfg.OTel.TracesEnabled() != c.enabled {
			t.Errorf("%v: enabled %v, want %v", c.env, cfg.OTel.TracesEnabled(), c.enabled)
		}
	}
	setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"})
	if _, err := config.Load(""); err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_SAMPLER_ARG") {
		t.Errorf("ratio 2 accepted: %v", err)
	}
}

func TestSecretsAreNotPrinted(t *testing.T) {
	s := config.Secret("hunter2")
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "password", s)
	if strings.Contains(b.String(), "hunter2") || strings.Contains(s.String(), "hunter2") {
		t.Errorf("secret printed: %s", b.String())
	}
}

func TestCacheSettings(t *testing.T) {
	setenv(t, map[string]string{
		"AUTHENTICATION__API_KEY": "k", "CACHE__ENABLED": "no", "CACHE__MAX_STALENESS": "0.5",
		"CACHE__MAX_BYTES": "1048576", "CACHE__NOTIFY_CHANNEL": "",
	})
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	want := config.Cache{Enabled: false, MaxStaleness: config.Seconds(500 * time.Millisecond), MaxBytes: 1 << 20, NotifyChannel: "",
		Changes: config.ChangesAuto, Publication: "emsquery"}
	if cfg.Cache != want {
		t.Errorf("cache settings %+v, want %+v (an empty channel means no LISTEN)", cfg.Cache, want)
	}
	for _, ok := range []string{"etl_done", "_x1", "load$2"} {
		var c config.Channel
		if err := c.SetValue(ok); err != nil || string(c) != ok {
			t.Errorf("channel %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"1etl", "ETL", "etl-done", "etl done", strings.Repeat("x", 64)} {
		var c config.Channel
		if err := c.SetValue(bad); err == nil {
			t.Errorf("channel %q accepted", bad)
		}
	}
}

// LIMITS__MAX_STREAMS_PER_KEY 0 is no bound per key (LIMITS__MAX_STREAMS alone), not a key that
// may hold no stream.
func TestStreamsPerKeyZero(t *testing.T) {
	setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k", "LIMITS__MAX_STREAMS_PER_KEY": "0"})
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits.MaxStreamsPerKey != 0 {
		t.Errorf("LIMITS__MAX_STREAMS_PER_KEY=0 read as %d", cfg.Limits.MaxStreamsPerKey)
	}
}

// CACHE__CHANGES takes one of its three sources and CACHE__PUBLICATION a name PostgreSQL keeps
// whole; anything else stops the start, naming the setting.
func TestChangeSourceSettings(t *testing.T) {
	for _, v := range []string{"replication", "Snapshot", " auto "} {
		setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k", "CACHE__CHANGES": v, "CACHE__PUBLICATION": "Loads 2"})
		cfg, err := config.Load("")
		if err != nil {
			t.Fatalf("CACHE__CHANGES=%q: %v", v, err)
		}
		if want := config.ChangeSource(strings.ToLower(strings.TrimSpace(v))); cfg.Cache.Changes != want || cfg.Cache.Publication != "Loads 2" {
			t.Errorf("CACHE__CHANGES=%q read as %q, publication %q", v, cfg.Cache.Changes, cfg.Cache.Publication)
		}
	}
	for name, v := range map[string]string{"CACHE__CHANGES": "wal", "CACHE__PUBLICATION": strings.Repeat("p", 64)} {
		setenv(t, map[string]string{"AUTHENTICATION__API_KEY": "k", name: v})
		if _, err := config.Load(""); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v, want a refusal naming it", name, v, err)
		}
	}
}
