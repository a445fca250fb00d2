package systemtest

// Start-up: the key, settings refused at start, env files.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestStartWithoutKey(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, wait func(time.Duration) (int, error), output func() string) {
		t.Helper()
		start := time.Now()
		code, err := wait(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 {
			t.Errorf("exit code 0 without a key")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %s to refuse", d)
		}
		if !strings.Contains(output(), "AUTHENTICATION__API_KEY") {
			t.Errorf("output does not name AUTHENTICATION__API_KEY:\n%s", output())
		}
	}
	t.Run("unset", func(t *testing.T) {
		t.Parallel()
		// servicetest unsets a variable given an empty value.
		svc := servicetest.Launch(t, servicetest.DB{}, map[string]string{"AUTHENTICATION__API_KEY": ""})
		check(t, svc.Wait, svc.Output)
	})
	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		svc := servicetest.Exec(t, t.TempDir(), nil, map[string]string{
			"AUTHENTICATION__API_KEY": "", "APP__PORT": strconv.Itoa(servicetest.FreePort(t)),
			"LOG__PATH": t.TempDir(), "OTEL_METRICS_EXPORTER": "none",
		})
		check(t, svc.Wait, svc.Output)
	})
}

func TestStartWithShortKey(t *testing.T) {
	t.Parallel()
	const key = "short-but-not-empty-key" // 23 characters
	svc := servicetest.Start(t, servicetest.NewDB(t), map[string]string{"AUTHENTICATION__API_KEY": key})
	servicetest.WaitFor(t, 5*time.Second, `"shorter than 32" in the output`, func() bool {
		return strings.Contains(svc.Output(), "shorter than 32")
	})
	out := svc.Output()
	if !strings.Contains(out, "WARNING") || !strings.Contains(out, "AUTHENTICATION__API_KEY") {
		t.Errorf("no WARNING naming AUTHENTICATION__API_KEY:\n%s", out)
	}
	if strings.Contains(out, key) {
		t.Errorf("the warning shows the key:\n%s", out)
	}
	// It serves with that key.
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != 0 {
		t.Errorf("records_count = %d on an empty database", got)
	}
}

func TestBadSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value string }{
		{"APP__PORT", "abc"},
		{"LOG__LEVEL", "LOUD"},
		{"SECURITY__CORS__ALLOW_ORIGINS", "notjson"},
		{"DATABASE__POOL_SIZE", "-1"},
		{"DATABASE__ENCRYPT", "maybe"},
		{"APP__ROOT_PATH", "no-slash"},
		{"AUTHENTICATION__API_KEY_HEADER", "x api key"},
		{"DATABASE__POOL_TIMEOUT", "soon"},
		{"LOG__CONSOLE__FORMAT", "xml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := servicetest.Launch(t, servicetest.DB{}, map[string]string{tc.name: tc.value})
			code, err := svc.Wait(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			out := strings.TrimRight(svc.Output(), "\n")
			if code != 2 {
				t.Errorf("exit code %d, want 2\n%s", code, out)
			}
			if strings.Contains(out, "\n") {
				t.Errorf("output has more than one line:\n%s", out)
			}
			if !strings.Contains(out, tc.name) || !strings.Contains(out, tc.value) {
				t.Errorf("output does not name %s and %q:\n%s", tc.name, tc.value, out)
			}
		})
	}
}

func writeEnvFile(t *testing.T, path string, vars map[string]string) {
	t.Helper()
	var b strings.Builder
	for k, v := range vars {
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEnvFile(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	base := func() map[string]string {
		s := db.Env()
		s["APP__HOST"] = "127.0.0.1"
		s["LOG__PATH"] = t.TempDir()
		s["OTEL_METRICS_EXPORTER"] = "none"
		return s
	}
	count := func(t *testing.T, port int, header, key string) (int, int64) {
		t.Helper()
		status, raw, err := postGraphQL(fmt.Sprintf("http://127.0.0.1:%d/graphql", port), map[string]string{header: key}, recordsCountQuery)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Data struct {
				RecordsCount struct{ Count int64 } `json:"records_count"`
			}
		}
		_ = json.Unmarshal(raw, &r)
		return status, r.Data.RecordsCount.Count
	}

	t.Run("dot env in the working folder; the environment wins", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		port, fileKey, envKey := servicetest.FreePort(t), servicetest.RandomKey(), servicetest.RandomKey()
		writeEnvFile(t, filepath.Join(dir, ".env"), map[string]string{
			"APP__PORT":                      strconv.Itoa(port),
			"AUTHENTICATION__API_KEY_HEADER": "X-File-Key",
			"AUTHENTICATION__API_KEY":        fileKey,
		})
		settings := base()
		settings["AUTHENTICATION__API_KEY"] = envKey
		p := servicetest.Exec(t, dir, nil, settings)
		p.WaitReady(t, port) // the port came from the file
		if status, n := count(t, port, "X-File-Key", envKey); status != http.StatusOK || n != want {
			t.Errorf("environment's key in the file's header: status %d count %d, want 200 and %d", status, n, want)
		}
		if status, _ := count(t, port, "X-File-Key", fileKey); status != http.StatusUnauthorized {
			t.Errorf("the file's key, overridden by the environment: status %d, want 401", status)
		}
		if status, _ := count(t, port, "x-api-key", envKey); status != http.StatusUnauthorized {
			t.Errorf("the default header, replaced by the file's: status %d, want 401", status)
		}
	})

	t.Run("--env-file", func(t *testing.T) {
		t.Parallel()
		dir, other := t.TempDir(), t.TempDir()
		// A .env beside is not read when --env-file names a file: its bad value would stop the start.
		writeEnvFile(t, filepath.Join(dir, ".env"), map[string]string{"LOG__LEVEL": "LOUD"})
		port, key := servicetest.FreePort(t), servicetest.RandomKey()
		file := filepath.Join(other, "emsquery.env")
		writeEnvFile(t, file, map[string]string{"APP__PORT": strconv.Itoa(port), "AUTHENTICATION__API_KEY": key})
		p := servicetest.Exec(t, dir, []string{"--env-file", file}, base())
		p.WaitReady(t, port)
		if status, n := count(t, port, "x-api-key", key); status != http.StatusOK || n != want {
			t.Errorf("the file's key: status %d count %d, want 200 and %d", status, n, want)
		}
	})

	t.Run("--env-file missing", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(t.TempDir(), "nope.env")
		settings := base()
		settings["AUTHENTICATION__API_KEY"] = servicetest.RandomKey()
		p := servicetest.Exec(t, t.TempDir(), []string{"--env-file", missing}, settings)
		code, err := p.Wait(10 * time.Second)
		if err != nil {
			t.Fatal("still running with a missing env file")
		}
		if code != 2 || !strings.Contains(p.Output(), missing) {
			t.Errorf("exit code %d, want 2, and output naming %s:\n%s", code, missing, p.Output())
		}
	})
}
