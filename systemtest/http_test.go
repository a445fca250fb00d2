package systemtest

// HTTP: the root path and the body limit.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestRootPath(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"APP__ROOT_PATH": "/analytics/"})
	for _, p := range []string{"/analytics/v1/ping", "/v1/ping"} {
		wantJSON(t, svc, p, http.StatusOK, map[string]string{"status": "ok"})
	}
	for _, p := range []string{"/analytics/v1/healthz", "/v1/healthz"} {
		wantJSON(t, svc, p, http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	}
	for _, p := range []string{"/analytics/graphql", "/graphql"} {
		if got := countOf(t, svc.GraphQL(t, p, recordsCountQuery, nil)); got != want {
			t.Errorf("%s: records_count = %d, want %d", p, got, want)
		}
		r := svc.GraphQLWithHeaders(t, p, recordsCountQuery, nil, nil)
		wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
	}
	// Only a whole path segment is the prefix.
	resp, body := svc.Get(t, "/analyticsx/v1/ping", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/analyticsx/v1/ping: status %d, want 404: %s", resp.StatusCode, body)
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, servicetest.NewDB(t), nil)
	post := func(body []byte) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(svc.Header, svc.Key)
		return svc.Do(t, req)
	}
	// A valid query padded with JSON whitespace to exactly 1 MiB is accepted.
	head, tail := []byte(`{"query":"`+recordsCountQuery+`"`), []byte(`}`)
	exact := append(append(head, bytes.Repeat([]byte(" "), 1<<20-len(head)-len(tail))...), tail...)
	resp, body := post(exact)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("1 MiB body: status %d, want 200: %.300s", resp.StatusCode, body)
	}
	var missingRequestID bool
	// Over the limit. A client that keeps writing a body the server refuses may see its write
	// fail before it reads the answer (Go's client does), so the request is written by hand:
	// the headers announce the size, part of the body follows, then the answer is read.
	for name, framing := range map[string]string{
		"content-length": fmt.Sprintf("Content-Length: %d", 1<<20+1),
		"chunked":        "Transfer-Encoding: chunked",
	} {
		resp, body := rawPost(t, svc, "/graphql", framing, map[string]string{svc.Header: svc.Key})
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: status %d, want 413: %.300s", name, resp.StatusCode, body)
			continue
		}
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "PAYLOAD_TOO_LARGE" || e.Error.Message == "" {
			t.Errorf("%s: 413 body %s, want the REST error body with PAYLOAD_TOO_LARGE", name, body)
		}
		if resp.Header.Get("X-Request-ID") == "" {
			missingRequestID = true
		}
	}
	// Contract section 4: every response carries X-Request-ID, also the 413 that the server
	// produces before any middleware runs.
	if missingRequestID {
		t.Error("a 413 response has no X-Request-ID")
	}
	// The service is still fine.
	wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
}

// rawPost writes a POST whose body is larger than 1 MiB over a plain TCP connection: the
// headers (framing is Content-Length or Transfer-Encoding), then body bytes from another
// goroutine until the server stops reading; it returns the server's answer.
func rawPost(t *testing.T, svc *servicetest.Service, path, framing string, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(svc.Port)), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s\r\n", path, framing)
	for k, v := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	chunked := strings.HasPrefix(framing, "Transfer-Encoding")
	go func() {
		piece := bytes.Repeat([]byte(" "), 64<<10)
		for sent := 0; sent <= 1<<20; sent += len(piece) {
			var err error
			if chunked {
				_, err = fmt.Fprintf(conn, "%x\r\n%s\r\n", len(piece), piece)
			} else {
				_, err = conn.Write(piece)
			}
			if err != nil {
				return // the server closed the connection after answering
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body over the limit: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer to a body over the limit: %v", err)
	}
	return resp, body
}
