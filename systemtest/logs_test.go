package systemtest

// Logs: rotated JSON files without secrets, request ids, the console in JSON.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestLogFilesAndRequestIDs(t *testing.T) {
	t.Parallel()
	db := servicetest.NewDB(t)
	svc := servicetest.Start(t, db, map[string]string{"LOG__FILE__MAX_SIZE": "2000", "LOG__FILE__MAX_FILES": "3"})

	// Enough access lines for several rotations; some carry the key, one a wrong key.
	for i := range 40 {
		svc.Get(t, "/v1/ping", nil)
		if i%10 == 0 {
			svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
			svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": "wrong-" + svc.Key[:8]})
		}
	}

	const saneID = "test-req_42.a:b"
	resp, _ := svc.Get(t, "/v1/ping", map[string]string{"X-Request-ID": saneID})
	if got := resp.Header.Get("X-Request-ID"); got != saneID {
		t.Errorf("X-Request-ID = %q, want the caller's %q", got, saneID)
	}
	r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{svc.Header: svc.Key, "X-Request-ID": saneID + "-gql"})
	if got := r.Header.Get("X-Request-ID"); got != saneID+"-gql" {
		t.Errorf("GraphQL X-Request-ID = %q, want %q", got, saneID+"-gql")
	}
	insane := map[string]string{"too long": strings.Repeat("a", 300), "odd characters": "evil id\" level=ERROR"}
	for name, id := range insane {
		resp, _ := svc.Get(t, "/v1/ping", map[string]string{"X-Request-ID": id})
		got := resp.Header.Get("X-Request-ID")
		if got == "" || got == id || len(got) > 128 {
			t.Errorf("%s: X-Request-ID = %q, want a new sane id", name, got)
		}
	}
	resp, _ = svc.Get(t, "/v1/ping", nil)
	if resp.Header.Get("X-Request-ID") == "" {
		t.Error("no X-Request-ID on a response to a request without one")
	}

	// Old files are removed in the background: wait until the count settles. Lines are written
	// a moment after they are logged: wait for the ping's line too.
	var files map[string][]byte
	deadline := time.Now().Add(5 * time.Second)
	for {
		files = logFiles(t, svc.LogDir)
		pinged := false
		for _, b := range files {
			pinged = pinged || bytes.Contains(b, []byte(`"request_id":"`+saneID+`"`))
		}
		if len(files) == 3 && pinged || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(files) != 3 {
		t.Errorf("%d log files, want 3 (LOG__FILE__MAX_FILES): %v", len(files), keys(files))
	}
	if _, ok := files["service.log"]; !ok {
		t.Errorf("no service.log among %v", keys(files))
	}
	var access []map[string]any
	for name, b := range files {
		if len(b) > 2000 {
			t.Errorf("%s has %d bytes, want <= 2000 (LOG__FILE__MAX_SIZE)", name, len(b))
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Bytes()
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Errorf("%s: line is not JSON: %s", name, line)
				continue
			}
			for _, secret := range []string{svc.Key, db.Password} {
				if bytes.Contains(line, []byte(secret)) {
					t.Errorf("%s: a line holds a secret: %s", name, line)
				}
			}
			for _, id := range insane {
				if bytes.Contains(line, []byte(id)) {
					t.Errorf("%s: an insane request id reached the log: %s", name, line)
				}
			}
			if m["msg"] == "request" {
				access = append(access, m)
			}
		}
	}
	var found bool
	for _, m := range access {
		for _, k := range []string{"method", "path", "status", "duration_ms", "request_id"} {
			if _, ok := m[k]; !ok {
				t.Errorf("access line without %s: %v", k, m)
			}
		}
		if m["request_id"] == saneID {
			found = true
			if m["method"] != "GET" || m["path"] != "/v1/ping" || m["status"] != float64(200) {
				t.Errorf("access line of the ping: %v", m)
			}
		}
	}
	if !found {
		t.Errorf("no access line with request_id %q among %d", saneID, len(access))
	}
	if out := svc.Output(); strings.Contains(out, svc.Key) || strings.Contains(out, db.Password) {
		t.Error("the console output holds a secret")
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestConsoleJSON(t *testing.T) {
	t.Parallel()
	// A short key adds the start-up warning to the lines checked.
	svc := servicetest.Start(t, servicetest.NewDB(t), map[string]string{
		"LOG__CONSOLE__FORMAT": "json", "AUTHENTICATION__API_KEY": "0123456789",
	})
	svc.Get(t, "/v1/ping", nil)
	svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	svc.GraphQLWithHeaders(t, "/graphql", "{ nope }", nil, map[string]string{svc.Header: svc.Key})
	stop(t, svc)
	out := svc.Output()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 5 {
		t.Errorf("only %d console lines:\n%s", len(lines), out)
	}
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("console line is not JSON: %q", line)
		}
	}
	if !strings.Contains(out, `"level":"WARNING"`) {
		t.Errorf("no JSON warning line for the short key:\n%s", out)
	}
}
