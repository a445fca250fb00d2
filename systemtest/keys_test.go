package systemtest

// Named API keys (contract 6.7): scopes per endpoint, rate limits, rotation without a restart,
// a malformed file, the key's name (never the key) in the access line and the request metrics,
// and `emsquery key new`.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// keyEntry is one entry of a keys file, written as the operator would.
type keyEntry struct {
	Name          string   `json:"name"`
	SHA256        string   `json:"sha256"`
	Scopes        []string `json:"scopes"`
	RatePerSecond float64  `json:"rate_per_second,omitempty"`
	Burst         int      `json:"burst,omitempty"`
	MaxInFlight   int      `json:"max_in_flight,omitempty"`
	MaxStreams    int      `json:"max_streams,omitempty"`
}

// testKey is a key and its entry.
type testKey struct {
	secret string
	entry  keyEntry
}

func newTestKey(name string, scopes ...string) testKey {
	secret := servicetest.RandomKey()
	return testKey{secret: secret, entry: keyEntry{Name: name, SHA256: sha256Hex(secret), Scopes: scopes}}
}

// writeKeysFile replaces path with the entries, as an operator should: a new file renamed over
// the old one, so that the service never reads half a file.
func writeKeysFile(t *testing.T, path string, keys ...testKey) {
	t.Helper()
	entries := make([]keyEntry, len(keys))
	for i, k := range keys {
		entries[i] = k.entry
	}
	b, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFileAtomic(t, path, b)
}

func writeFileAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const exportTestQuery = "/v1/reports/main-report/export?start_date=2000-01-01&end_date=2100-12-31"

// keyRequest sends one request to endpoint ("/graphql", "/serve/graphql", "/lookups/graphql" or
// "export") with key in the configured header (and in SERVICE-X-API-KEY for the export).
func keyRequest(t *testing.T, svc *servicetest.Service, endpoint, key string) (*http.Response, []byte) {
	t.Helper()
	if endpoint == "export" {
		return svc.Get(t, exportTestQuery, map[string]string{svc.Header: key, "SERVICE-X-API-KEY": key})
	}
	query := map[string]string{
		"/graphql":         recordsCountQuery,
		"/serve/graphql":   `{ main_report(start_date: "2000-01-01", end_date: "2100-12-31", limit: 0) { total } }`,
		"/lookups/graphql": `{ urgencies }`,
	}[endpoint]
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(svc.Header, key)
	return svc.Do(t, req)
}

// errorCode is the code of a refusal: errors[0].extensions.code of a GraphQL errors body, or
// error.code of the REST body; graphQL says which body the endpoint must use.
func errorCode(t *testing.T, body []byte, graphQL bool) string {
	t.Helper()
	if graphQL {
		var r servicetest.GraphQLResponse
		if err := json.Unmarshal(body, &r); err != nil || len(r.Errors) == 0 {
			t.Errorf("not a GraphQL errors body: %s", body)
			return ""
		}
		return r.Errors[0].Code()
	}
	var r struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Error.Code == "" {
		t.Errorf("not the REST error body: %s", body)
	}
	return r.Error.Code
}

// wantAllowed checks a 200 with an answer and no errors.
func wantAllowed(t *testing.T, what, endpoint string, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s on %s: status %d, want 200: %s", what, endpoint, resp.StatusCode, body)
		return
	}
	if endpoint == "export" {
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") || !bytes.HasPrefix(body, []byte("record_id,")) {
			t.Errorf("%s on the export: not a CSV: %s", what, body)
		}
		return
	}
	dataOf(t, body)
}

// wantRefused checks the status and the code, in the body the endpoint uses.
func wantRefused(t *testing.T, what, endpoint string, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s on %s: status %d, want %d: %s", what, endpoint, resp.StatusCode, status, body)
		return
	}
	if got := errorCode(t, body, endpoint != "export"); got != code {
		t.Errorf("%s on %s: code %q, want %s: %s", what, endpoint, got, code, body)
	}
}

var keyEndpoints = []string{"/graphql", "/serve/graphql", "/lookups/graphql", "export"}

func TestAPIKeyScopes(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	keys := []testKey{
		newTestKey("everything", "graphql", "serve", "lookups", "export"),
		newTestKey("general", "graphql"),
		newTestKey("reporting", "serve", "lookups", "export"),
		newTestKey("lookups-only", "lookups"),
		newTestKey("export-only", "export"),
	}
	file := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, file, keys...)
	metricsPort := servicetest.FreePort(t)
	// AUTHENTICATION__API_KEY (servicetest's random key) stays valid for every scope.
	svc := servicetest.Start(t, db, map[string]string{
		"AUTHENTICATION__API_KEYS_FILE": file,
		"LOG__LEVEL":                    "DEBUG",
		"OTEL_METRICS_EXPORTER":         "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(metricsPort),
	})

	scopeOf := map[string]string{"/graphql": "graphql", "/serve/graphql": "serve", "/lookups/graphql": "lookups", "export": "export"}
	for _, k := range keys {
		for _, ep := range keyEndpoints {
			resp, body := keyRequest(t, svc, ep, k.secret)
			allowed := false
			for _, s := range k.entry.Scopes {
				allowed = allowed || s == scopeOf[ep]
			}
			if allowed {
				wantAllowed(t, k.entry.Name, ep, resp, body)
			} else {
				wantRefused(t, k.entry.Name, ep, resp, body, http.StatusForbidden, "FORBIDDEN")
			}
		}
	}
	for _, ep := range keyEndpoints {
		resp, body := keyRequest(t, svc, ep, svc.Key)
		wantAllowed(t, "AUTHENTICATION__API_KEY", ep, resp, body)
		resp, body = keyRequest(t, svc, ep, servicetest.RandomKey())
		wantRefused(t, "an unknown key", ep, resp, body, http.StatusUnauthorized, "UNAUTHENTICATED")
		// The digest is not a key.
		resp, body = keyRequest(t, svc, ep, keys[0].entry.SHA256)
		wantRefused(t, "a key's SHA-256", ep, resp, body, http.StatusUnauthorized, "UNAUTHENTICATED")
	}

	t.Run("export needs the same key in both headers", func(t *testing.T) {
		resp, body := svc.Get(t, exportTestQuery, map[string]string{svc.Header: keys[2].secret, "SERVICE-X-API-KEY": keys[4].secret})
		wantRefused(t, "two different valid keys", "export", resp, body, http.StatusUnauthorized, "UNAUTHENTICATED")
		resp, body = svc.Get(t, exportTestQuery, map[string]string{svc.Header: keys[2].secret})
		wantRefused(t, "no SERVICE-X-API-KEY", "export", resp, body, http.StatusUnauthorized, "UNAUTHENTICATED")
	})
	t.Run("403 message names the key and its scopes", func(t *testing.T) {
		resp, body := keyRequest(t, svc, "/graphql", keys[3].secret)
		var r servicetest.GraphQLResponse
		if err := json.Unmarshal(body, &r); err != nil || len(r.Errors) == 0 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if msg := r.Errors[0].Message; !strings.Contains(msg, "lookups-only") || !strings.Contains(msg, "graphql") {
			t.Errorf("403 message %q does not name the key and the scope it lacks", msg)
		}
	})
	t.Run("key name in the request metrics", func(t *testing.T) {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		text, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`api_key_name="reporting"`, `api_key_name="default"`, `api_key_name="lookups-only"`,
		} {
			if !bytes.Contains(text, []byte("http_server_request_duration_seconds_count{")) || !containsSeries(text, "http_server_request_duration_seconds_count", want) {
				t.Errorf("no http_server_request_duration_seconds series with %s", want)
			}
		}
		if !containsSeries(text, "http_server_request_duration_seconds_count", `api_key_name="lookups-only"`, `http_response_status_code="403"`) {
			t.Errorf("no series of the refused requests of lookups-only")
		}
	})
	t.Run("key name, never the key, in the access log", func(t *testing.T) {
		stop(t, svc)
		lines := accessLines(t, svc)
		for _, want := range []struct{ path, key, status string }{
			{"/graphql", "general", "200"},
			{"/graphql", "lookups-only", "403"},
			{"/v1/reports/main-report/export", "reporting", "200"},
			{"/serve/graphql", "default", "200"},
		} {
			found := false
			for _, l := range lines {
				found = found || l["path"] == want.path && l["key_name"] == want.key && l["status"] == want.status
			}
			if !found {
				t.Errorf("no access line for %s with key_name %s and status %s", want.path, want.key, want.status)
			}
		}
		for _, l := range lines {
			if l["status"] == "401" && l["key_name"] != nil {
				t.Errorf("a 401 names a key: %v", l)
			}
		}
		secrets := []string{svc.Key, db.Password}
		for _, k := range keys {
			secrets = append(secrets, k.secret, k.entry.SHA256)
		}
		assertNoSecret(t, svc, secrets...)
	})
}

// containsSeries says whether the Prometheus text has a sample of metric whose labels include
// every one of labels.
func containsSeries(text []byte, metric string, labels ...string) bool {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(line, l)
		}
		if all {
			return true
		}
	}
	return false
}

// accessLines returns the access lines ("msg":"request") of the service's JSON log file.
func accessLines(t *testing.T, svc *servicetest.Service) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, b := range logFiles(t, svc.LogDir) {
		for _, line := range bytes.Split(b, []byte("\n")) {
			var m map[string]any
			if json.Unmarshal(line, &m) != nil || m["msg"] != "request" {
				continue
			}
			if s, ok := m["status"].(float64); ok {
				m["status"] = strconv.Itoa(int(s))
			}
			out = append(out, m)
		}
	}
	return out
}

func TestAPIKeyRateLimit(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	limited := newTestKey("limited", "graphql", "export")
	limited.entry.RatePerSecond, limited.entry.Burst = 1, 2
	slow := newTestKey("slow", "export")
	slow.entry.RatePerSecond = 0.5 // burst 1 by default
	free := newTestKey("unlimited", "graphql")
	file := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, file, limited, slow, free)
	svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEYS_FILE": file, "AUTHENTICATION__API_KEY": ""})

	// The burst passes, the next request is refused with Retry-After.
	var retry *http.Response
	var retryBody []byte
	for i := 0; i < 10; i++ {
		resp, body := keyRequest(t, svc, "/graphql", limited.secret)
		if resp.StatusCode == http.StatusTooManyRequests {
			if i < 2 {
				t.Fatalf("request %d refused within the burst of 2: %s", i+1, body)
			}
			retry, retryBody = resp, body
			break
		}
		wantAllowed(t, "limited", "/graphql", resp, body)
	}
	if retry == nil {
		t.Fatal("10 quick requests at 1 per second, burst 2: none refused")
	}
	wantRefused(t, "limited over its rate", "/graphql", retry, retryBody, http.StatusTooManyRequests, "RATE_LIMITED")
	after, err := strconv.Atoi(retry.Header.Get("Retry-After"))
	if err != nil || after < 1 || after > 2 {
		t.Fatalf("Retry-After %q, want 1 or 2 seconds", retry.Header.Get("Retry-After"))
	}
	// Other keys are not held back by it.
	for i := 0; i < 5; i++ {
		resp, body := keyRequest(t, svc, "/graphql", free.secret)
		wantAllowed(t, "unlimited", "/graphql", resp, body)
	}
	// After Retry-After the key is served again.
	time.Sleep(time.Duration(after) * time.Second)
	resp, body := keyRequest(t, svc, "/graphql", limited.secret)
	wantAllowed(t, "limited after Retry-After", "/graphql", resp, body)

	// The export: the REST body.
	resp, body = keyRequest(t, svc, "export", slow.secret)
	wantAllowed(t, "slow", "export", resp, body)
	resp, body = keyRequest(t, svc, "export", slow.secret)
	wantRefused(t, "slow over its rate", "export", resp, body, http.StatusTooManyRequests, "RATE_LIMITED")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 of the export without Retry-After")
	}
}

func TestAPIKeyRotation(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	old := newTestKey("reporting", "graphql")
	file := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, file, old)

	// Rotation by rewriting the file: the service notices by itself.
	t.Run("file rewritten", func(t *testing.T) {
		svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEYS_FILE": file, "AUTHENTICATION__API_KEY": ""})
		rotateAndCheck(t, svc, file, old, "the file changed")
	})
	// Rotation by SIGHUP, with polling off so that only the signal can reload.
	t.Run("SIGHUP", func(t *testing.T) {
		writeKeysFile(t, file, old)
		svc := servicetest.Start(t, db, map[string]string{
			"AUTHENTICATION__API_KEYS_FILE": file, "AUTHENTICATION__API_KEY": "", "AUTHENTICATION__API_KEYS_POLL_INTERVAL": "0",
		})
		next := newTestKey("reporting", "graphql")
		writeKeysFile(t, file, next)
		time.Sleep(1500 * time.Millisecond)
		resp, body := keyRequest(t, svc, "/graphql", next.secret)
		wantRefused(t, "the new key before SIGHUP (polling off)", "/graphql", resp, body, http.StatusUnauthorized, "UNAUTHENTICATED")
		writeKeysFile(t, file, old)
		rotateAndCheck(t, svc, file, old, "SIGHUP")
	})
}

// rotateAndCheck rotates old's key (same name, new key) and adds another, by trigger (SIGHUP:
// the test sends it), and checks that the new keys work, the old one gets 401, and the process
// is the one that served before.
func rotateAndCheck(t *testing.T, svc *servicetest.Service, file string, old testKey, trigger string) {
	t.Helper()
	resp, body := keyRequest(t, svc, "/graphql", old.secret)
	wantAllowed(t, "the old key", "/graphql", resp, body)
	rotated := newTestKey(old.entry.Name, "graphql")
	added := newTestKey("added", "serve")
	writeKeysFile(t, file, rotated, added)
	if trigger == "SIGHUP" {
		svc.Signal(syscall.SIGHUP)
	}
	servicetest.WaitFor(t, 5*time.Second, "the rotated key accepted", func() bool {
		resp, _ := keyRequest(t, svc, "/graphql", rotated.secret)
		return resp.StatusCode == http.StatusOK
	})
	resp, body = keyRequest(t, svc, "/graphql", old.secret)
	wantRefused(t, "the revoked key", "/graphql", resp, body, http.StatusUnauthorized, "UNAUTHENTICATED")
	resp, body = keyRequest(t, svc, "/serve/graphql", added.secret)
	wantAllowed(t, "the added key", "/serve/graphql", resp, body)
	if _, err := svc.Wait(0); err == nil {
		t.Fatal("the service exited")
	}
	// The new keys are put in force just before the reload is logged, so a request can pass
	// with the rotated key a moment before the line is written.
	servicetest.WaitFor(t, 5*time.Second, "the reload line", func() bool { return strings.Contains(svc.Output(), "API keys reloaded") })
	out := svc.Output()
	if !strings.Contains(out, "trigger="+strconv.Quote(trigger)) && !strings.Contains(out, "trigger="+trigger) {
		t.Errorf("no reload line with trigger %s:\n%s", trigger, out)
	}
	if !strings.Contains(out, "added=[added]") || !strings.Contains(out, "changed=[reporting]") {
		t.Errorf("the reload line does not name the added and the changed key:\n%s", out)
	}
	for _, s := range []string{old.secret, old.entry.SHA256, rotated.secret, rotated.entry.SHA256, added.secret, added.entry.SHA256} {
		if strings.Contains(out, s) {
			t.Errorf("the output shows a key or a hash (%.6s...)", s)
		}
	}
}

func TestAPIKeysFileMalformed(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	good := newTestKey("good", "graphql")
	leaked := newTestKey("leaked", "graphql")

	t.Run("at start-up", func(t *testing.T) {
		t.Parallel()
		for name, content := range map[string]string{
			"not JSON":      `[{"name": "good", "sha256": "` + good.entry.SHA256 + `", "scopes": ["graphql"]`,
			"unknown scope": `[{"name": "good", "sha256": "` + good.entry.SHA256 + `", "scopes": ["admin"]}]`,
			"key as hash":   `[{"name": "good", "sha256": "` + good.secret + `x", "scopes": ["graphql"]}]`,
			"missing file":  "",
		} {
			file := filepath.Join(t.TempDir(), "keys.json")
			if content != "" {
				if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			svc := servicetest.Launch(t, db, map[string]string{"AUTHENTICATION__API_KEYS_FILE": file, "AUTHENTICATION__API_KEY": ""})
			code, err := svc.Wait(10 * time.Second)
			if err != nil || code == 0 {
				t.Errorf("%s: exit %d, %v; want a refusal to start", name, code, err)
			}
			out := svc.Output()
			if !strings.Contains(out, "AUTHENTICATION__API_KEYS_FILE") {
				t.Errorf("%s: the refusal does not name AUTHENTICATION__API_KEYS_FILE:\n%s", name, out)
			}
			if strings.Contains(out, good.entry.SHA256) || strings.Contains(out, good.secret) {
				t.Errorf("%s: the refusal shows the hash or the key:\n%s", name, out)
			}
		}
	})

	t.Run("while running", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "keys.json")
		writeKeysFile(t, file, good)
		svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEYS_FILE": file, "AUTHENTICATION__API_KEY": ""})
		bad := []string{
			`[{"name": "good", "sha256": "` + good.entry.SHA256 + `", "scopes": ["graphql"]}, {"name": "leaked", "sha`,
			`[{"name": "leaked", "sha256": "` + leaked.entry.SHA256 + `", "scopes": ["graphql"], "rate": 5}]`,
			`[{"name": "leaked", "sha256": "` + leaked.entry.SHA256 + `", "scopes": ["graphql"]}, {"name": "leaked", "sha256": "` + good.entry.SHA256 + `", "scopes": ["graphql"]}]`,
		}
		for i, content := range bad {
			before := strings.Count(svc.Output(), "not reloaded")
			writeFileAtomic(t, file, []byte(content))
			servicetest.WaitFor(t, 5*time.Second, "the not-reloaded line", func() bool {
				return strings.Count(svc.Output(), "not reloaded") > before
			})
			resp, body := keyRequest(t, svc, "/graphql", good.secret)
			wantAllowed(t, "the key in force after bad file "+strconv.Itoa(i), "/graphql", resp, body)
			resp, body = keyRequest(t, svc, "/graphql", leaked.secret)
			wantRefused(t, "a key of the bad file "+strconv.Itoa(i), "/graphql", resp, body, http.StatusUnauthorized, "UNAUTHENTICATED")
		}
		out := svc.Output()
		for _, why := range []string{"it ends too early", "unknown field", "the name is used twice"} {
			if !strings.Contains(out, why) {
				t.Errorf("the log does not say %q:\n%s", why, out)
			}
		}
		// A good file again is taken.
		writeKeysFile(t, file, good, leaked)
		servicetest.WaitFor(t, 5*time.Second, "the fixed file taken", func() bool {
			resp, _ := keyRequest(t, svc, "/graphql", leaked.secret)
			return resp.StatusCode == http.StatusOK
		})
		stop(t, svc)
		assertNoSecret(t, svc, good.secret, good.entry.SHA256, leaked.secret, leaked.entry.SHA256)
	})
}

func TestKeyNewCommand(t *testing.T) {
	t.Parallel()
	bin := servicetest.Binary(t)
	cmd := exec.Command(bin, "key", "new", "--name", "reporting-client", "--scopes", "serve,export", "--rate", "5", "--max-in-flight", "3", "--max-streams", "4")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("key new: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout has %d lines, want the key and the entry:\n%s", len(lines), stdout.String())
	}
	secret := lines[0]
	if len(secret) < 32 {
		t.Fatalf("key %q is short", secret)
	}
	var e keyEntry
	dec := json.NewDecoder(strings.NewReader(lines[1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("entry %q: %v", lines[1], err)
	}
	if e.Name != "reporting-client" || e.SHA256 != sha256Hex(secret) || strings.Join(e.Scopes, ",") != "serve,export" || e.RatePerSecond != 5 || e.MaxInFlight != 3 || e.MaxStreams != 4 {
		t.Errorf("entry %+v does not describe the key", e)
	}
	if strings.Contains(lines[1], secret) || strings.Contains(stderr.String(), secret) {
		t.Error("the key appears outside its own line")
	}
	// Another run makes another key.
	again, err := exec.Command(bin, "key", "new", "--name", "x", "--scopes", "graphql").Output()
	if err != nil || strings.HasPrefix(string(again), secret) {
		t.Errorf("second key: %v, same key %v", err, strings.HasPrefix(string(again), secret))
	}
	for _, args := range [][]string{
		{"key", "new", "--scopes", "graphql"},                      // no name
		{"key", "new", "--name", "x"},                              // no scope
		{"key", "new", "--name", "x", "--scopes", "admin"},         // unknown scope
		{"key", "new", "--name", "has space", "--scopes", "serve"}, // bad name
		{"key", "new", "--name", "default", "--scopes", "serve"},   // reserved
		{"key", "new", "--name", "x", "--scopes", "serve", "--max-in-flight", "-1"},
		{"key", "new", "--name", "x", "--scopes", "serve", "--max-streams", "-1"},
		{"key"},
	} {
		c := exec.Command(bin, args...)
		out, err := c.CombinedOutput()
		if err == nil || c.ProcessState.ExitCode() != 2 {
			t.Errorf("%v: exit %d, want 2:\n%s", args, c.ProcessState.ExitCode(), out)
		}
	}

	// The entry works as printed.
	db := servicetest.FixtureDB(t)
	file := filepath.Join(t.TempDir(), "keys.json")
	writeFileAtomic(t, file, []byte("["+lines[1]+"]"))
	svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEYS_FILE": file, "AUTHENTICATION__API_KEY": ""})
	resp, body := keyRequest(t, svc, "/serve/graphql", secret)
	wantAllowed(t, "the new key", "/serve/graphql", resp, body)
	resp, body = keyRequest(t, svc, "/graphql", secret)
	wantRefused(t, "the new key", "/graphql", resp, body, http.StatusForbidden, "FORBIDDEN")
}
