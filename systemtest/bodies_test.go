package systemtest

// Request bodies (contract 6.10): a body costs memory as its bytes arrive, not as its
// Content-Length announces; a request without a valid key is refused before its body is read,
// and what is left of a body nobody read is never taken for the next request; a body that
// arrives slowly is still answered, one that stops arriving gets a clear error within
// APP__READ_TIMEOUT.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/procstat"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// postHead is the request line and headers of a POST of JSON to path: framing is a
// Content-Length or Transfer-Encoding line, extra more header lines ("Name: value").
func postHead(path, framing string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: emsquery\r\nContent-Type: application/json\r\n%s\r\n", path, framing)
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

// paddedQuery is a GraphQL body of exactly size bytes asking records_count: the query, then a
// member of padding that gqlgen ignores.
func paddedQuery(size int) []byte {
	head, tail := `{"query":"`+recordsCountQuery+`","pad":"`, `"}`
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}

// dialService opens a connection to svc whose reads and writes give up after timeout.
func dialService(t *testing.T, svc *servicetest.Service, timeout time.Duration) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(svc.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(timeout))
	return c
}

// readReply reads one answer from r: status, headers and body.
func readReply(t *testing.T, r *bufio.Reader) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	return resp, body
}

// TestAnnouncedBodiesCostWhatArrives: 1,000 connections each announce a body of 1 MiB and send
// 64 KiB of it; the service's resident memory grows by less than 200 MiB, with a valid key on
// /graphql (the bodies are being read) and without (refused, not read). Before bodies were
// streamed, each allocated the whole announced MiB at once (up to 1,031 KiB of RSS per
// connection). The figures are in docs/operations.md, "RSS per announced body".
func TestAnnouncedBodiesCostWhatArrives(t *testing.T) {
	const (
		conns     = 1000
		announced = 1 << 20
		sent      = 64 << 10
		maxGrowth = 200 << 20
	)
	ensureFileLimit(t, 3*conns+1000)
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	body := paddedQuery(announced)
	for _, withKey := range []bool{true, false} {
		name := map[bool]string{true: "with a key", false: "without a key"}[withKey]
		t.Run(name, func(t *testing.T) {
			svc := servicetest.Start(t, db, map[string]string{
				"LOG__CONSOLE__ENABLED": "false",
				// All connections come from 127.0.0.1, and 1,000 refusals are not a guesser.
				"APP__MAX_CONNECTIONS_PER_CLIENT":     "0",
				"AUTHENTICATION__FAILURES_PER_MINUTE": "0",
			})
			var keyHeader []string
			if withKey {
				keyHeader = []string{svc.Header + ": " + svc.Key}
			}
			head := postHead("/graphql", fmt.Sprintf("Content-Length: %d", announced), keyHeader...)
			// What the service holds once it has answered a few requests is the base.
			for range 5 {
				if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
					t.Fatalf("records_count = %d, want %d", got, want)
				}
			}
			time.Sleep(500 * time.Millisecond)
			before, err := procstat.RSS(svc.PID())
			if err != nil {
				t.Fatal(err)
			}

			cs := make([]net.Conn, conns)
			for i := range cs {
				cs[i] = dialService(t, svc, 60*time.Second)
				if _, err := io.WriteString(cs[i], head); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				if _, err := cs[i].Write(body[:sent]); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
			}
			// The bodies' bytes are in the service once its memory stops growing.
			var now int64
			for deadline, last := time.Now().Add(10*time.Second), int64(-1); time.Now().Before(deadline); {
				time.Sleep(300 * time.Millisecond)
				if now, err = procstat.RSS(svc.PID()); err != nil {
					t.Fatal(err)
				}
				if last >= 0 && now-last < 1<<20 && now-last > -(1<<20) {
					break
				}
				last = now
			}
			peak, err := procstat.PeakRSS(svc.PID())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d connections announcing %d KiB, %d KiB sent on each, %s: RSS %d MiB before, %d MiB after (+%d KiB per connection), peak %d MiB (+%d KiB per connection)",
				conns, announced>>10, sent>>10, name, before>>20, now>>20, (now-before)/conns>>10, peak>>20, (peak-before)/conns>>10)
			if growth := peak - before; growth >= maxGrowth {
				t.Errorf("RSS grew by %d MiB (peak), want less than %d MiB", growth>>20, maxGrowth>>20)
			}

			if withKey {
				// The service is reading every body; it still answers others meanwhile, and a
				// body whose rest comes is answered.
				if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
					t.Errorf("records_count meanwhile = %d, want %d", got, want)
				}
				for _, c := range cs[:10] {
					if _, err := c.Write(body[sent:]); err != nil {
						t.Fatal(err)
					}
					resp, answer := readReply(t, bufio.NewReader(c))
					var d struct {
						Data struct {
							RecordsCount struct{ Count int64 } `json:"records_count"`
						}
					}
					if resp.StatusCode != http.StatusOK || json.Unmarshal(answer, &d) != nil || d.Data.RecordsCount.Count != want {
						t.Fatalf("the rest of a held body sent: HTTP %d: %.300s", resp.StatusCode, answer)
					}
				}
				return
			}
			// Each was refused, without its body, and not left open for more.
			for i, c := range cs {
				resp, answer := readReply(t, bufio.NewReader(c))
				if resp.StatusCode != http.StatusUnauthorized || errorCode(t, answer, true) != "UNAUTHENTICATED" {
					t.Fatalf("connection %d: HTTP %d: %.300s; want 401 UNAUTHENTICATED", i, resp.StatusCode, answer)
				}
			}
		})
	}
}

// TestNoKeyNoBodyRead: a request without a valid key is refused (401) as soon as its headers
// have arrived, before its body is sent; and the body that was not read is never taken for
// the next request on the connection, whoever did not read it.
func TestNoKeyNoBodyRead(t *testing.T) {
	svc := servicetest.Start(t, servicetest.NewDB(t), map[string]string{"APP__READ_TIMEOUT": "30"})
	announce := fmt.Sprintf("Content-Length: %d", 1<<20)

	// Headers only: the answer comes at once, then the end of the connection.
	for name, extra := range map[string][]string{
		"no key":               nil,
		"a wrong key":          {svc.Header + ": not-the-key"},
		"no key, 100-continue": {"Expect: 100-continue"},
	} {
		c := dialService(t, svc, 5*time.Second)
		start := time.Now()
		if _, err := io.WriteString(c, postHead("/graphql", announce, extra...)); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		resp, body := readReply(t, r)
		took := time.Since(start)
		if resp.StatusCode != http.StatusUnauthorized || errorCode(t, body, true) != "UNAUTHENTICATED" || took > 2*time.Second {
			t.Errorf("%s, body not sent: HTTP %d after %s: %.300s; want 401 UNAUTHENTICATED at once", name, resp.StatusCode, took.Round(time.Millisecond), body)
		}
		if !resp.Close {
			t.Errorf("%s: the 401 does not say Connection: close, with the body still to come", name)
		}
		// The body may come now: it is read and dropped, and the connection ends.
		if _, err := c.Write(bytes.Repeat([]byte(" "), 64<<10)); err != nil {
			t.Errorf("%s: sending the body after the answer: %v", name, err)
		}
		if rest, closed := closedWithin(c, 3*time.Second); !closed || len(rest) > 0 {
			t.Errorf("%s: after the 401: closed %v, read %q; want the end of the connection", name, closed, rest)
		}
	}

	// A body that is itself a request: after the answer to the request that carried it, nothing
	// more (fasthttp, left to itself, would read it as the next request and answer it).
	inner := "GET /v1/ping HTTP/1.1\r\nHost: emsquery\r\n\r\n"
	for name, req := range map[string]string{
		"no key":                    postHead("/graphql", fmt.Sprintf("Content-Length: %d", len(inner))) + inner,
		"no key, chunked":           postHead("/graphql", "Transfer-Encoding: chunked") + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(inner), inner),
		"a key, a route of no body": strings.Replace(postHead("/v1/ping", fmt.Sprintf("Content-Length: %d", len(inner)), svc.Header+": "+svc.Key), "POST", "PUT", 1) + inner,
		"a key, the GraphiQL page":  strings.Replace(postHead("/graphql", fmt.Sprintf("Content-Length: %d", len(inner)), svc.Header+": "+svc.Key, "Accept: text/html"), "POST", "GET", 1) + inner,
		"no key, a method unknown":  strings.Replace(postHead("/graphql", fmt.Sprintf("Content-Length: %d", len(inner))), "POST", "FOO", 1) + inner,
		"a key, a method unknown":   strings.Replace(postHead("/graphql", fmt.Sprintf("Content-Length: %d", len(inner)), svc.Header+": "+svc.Key), "POST", "FOO", 1) + inner,
		"a key, method refused":     strings.Replace(postHead("/graphql", fmt.Sprintf("Content-Length: %d", len(inner)), svc.Header+": "+svc.Key), "POST", "PUT", 1) + inner,
	} {
		c := dialService(t, svc, 5*time.Second)
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		all, closed := closedWithin(c, 3*time.Second)
		if n := bytes.Count(all, []byte("HTTP/1.1 ")); !closed || n != 1 || bytes.Contains(all, []byte(`"status":"ok"`)) {
			t.Errorf("%s: closed %v, %d answers: %.400s; want one answer, then the end", name, closed, n, all)
		}
	}

	// A request with a key and a body on a keep-alive connection: the next request is served.
	c := dialService(t, svc, 5*time.Second)
	r := bufio.NewReader(c)
	q := paddedQuery(20 << 10)
	for i := range 2 {
		if _, err := io.WriteString(c, postHead("/graphql", fmt.Sprintf("Content-Length: %d", len(q)), svc.Header+": "+svc.Key)+string(q)); err != nil {
			t.Fatal(err)
		}
		if resp, body := readReply(t, r); resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("request %d on a keep-alive connection: HTTP %d (close %v): %.300s", i+1, resp.StatusCode, resp.Close, body)
		}
	}
}

// TestBodiesThatArriveSlowly: a valid body that arrives in pieces, with pauses, is answered as
// a whole one is; a body over APP__MAX_BODY_BYTES is refused as before; one that stops arriving
// gets 408 TIMEOUT within APP__READ_TIMEOUT and never a parse of what came; one cut short gets
// 400, not a parse either.
func TestBodiesThatArriveSlowly(t *testing.T) {
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"APP__READ_TIMEOUT": "2", "APP__MAX_BODY_BYTES": "65536"})
	key := svc.Header + ": " + svc.Key

	// In pieces: 40 KiB in ten (past what fasthttp reads before the handler), 300 bytes in
	// three, and chunked.
	for name, size := range map[string]int{"40 KiB in ten pieces": 40 << 10, "300 bytes in three pieces": 300} {
		q := paddedQuery(size)
		pieces := 10
		if size < 1000 {
			pieces = 3
		}
		c := dialService(t, svc, 10*time.Second)
		if _, err := io.WriteString(c, postHead("/graphql", fmt.Sprintf("Content-Length: %d", len(q)), key)); err != nil {
			t.Fatal(err)
		}
		for i := range pieces {
			time.Sleep(120 * time.Millisecond)
			if _, err := c.Write(q[i*len(q)/pieces : (i+1)*len(q)/pieces]); err != nil {
				t.Fatal(err)
			}
		}
		resp, body := readReply(t, bufio.NewReader(c))
		var d struct {
			Data struct {
				RecordsCount struct{ Count int64 } `json:"records_count"`
			}
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &d) != nil || d.Data.RecordsCount.Count != want {
			t.Errorf("%s: HTTP %d: %.300s; want 200 with count %d", name, resp.StatusCode, body, want)
		}
	}
	q := paddedQuery(30 << 10)
	c := dialService(t, svc, 10*time.Second)
	if _, err := io.WriteString(c, postHead("/graphql", "Transfer-Encoding: chunked", key)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		time.Sleep(120 * time.Millisecond)
		piece := q[i*len(q)/5 : (i+1)*len(q)/5]
		if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(piece), piece); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(c, "0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, body := readReply(t, bufio.NewReader(c)); resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(fmt.Sprintf(`"count":%d`, want))) {
		t.Errorf("chunked in five pieces: HTTP %d: %.300s", resp.StatusCode, body)
	}

	// Over the limit: 413 PAYLOAD_TOO_LARGE, the REST body, announced or chunked.
	for name, framing := range map[string]string{"announced": "Content-Length: 65537", "chunked": "Transfer-Encoding: chunked"} {
		c := dialService(t, svc, 10*time.Second)
		if _, err := io.WriteString(c, postHead("/graphql", framing, key)); err != nil {
			t.Fatal(err)
		}
		go func() {
			piece := bytes.Repeat([]byte(" "), 16<<10)
			for range 5 {
				var err error
				if strings.HasPrefix(framing, "Transfer") {
					_, err = fmt.Fprintf(c, "%x\r\n%s\r\n", len(piece), piece)
				} else {
					_, err = c.Write(piece)
				}
				if err != nil {
					return
				}
			}
		}()
		resp, body := readReply(t, bufio.NewReader(c))
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"error":{"code":"PAYLOAD_TOO_LARGE"`) {
			t.Errorf("%s over APP__MAX_BODY_BYTES: HTTP %d: %.300s", name, resp.StatusCode, body)
		}
	}

	// Stops arriving: half of a valid body, then nothing. Chunked: one chunk, then nothing.
	half := paddedQuery(20 << 10)
	for name, req := range map[string]string{
		"announced": postHead("/graphql", fmt.Sprintf("Content-Length: %d", len(half)), key) + string(half[:len(half)/2]),
		"chunked":   postHead("/graphql", "Transfer-Encoding: chunked", key) + fmt.Sprintf("%x\r\n%s\r\n", len(half)/2, half[:len(half)/2]),
	} {
		c := dialService(t, svc, 10*time.Second)
		start := time.Now()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, body := readReply(t, bufio.NewReader(c))
		took := time.Since(start)
		if resp.StatusCode != http.StatusRequestTimeout || errorCode(t, body, false) != "TIMEOUT" || !strings.Contains(string(body), "APP__READ_TIMEOUT") {
			t.Errorf("%s, stopped: HTTP %d: %.300s; want 408 TIMEOUT naming APP__READ_TIMEOUT", name, resp.StatusCode, body)
		}
		if took < 1500*time.Millisecond || took > 4*time.Second {
			t.Errorf("%s, stopped: answered after %s; want at APP__READ_TIMEOUT (2 s)", name, took.Round(time.Millisecond))
		}
		if rest, closed := closedWithin(c, 2*time.Second); !closed || len(rest) > 0 {
			t.Errorf("%s, stopped: after the 408: closed %v, read %q", name, closed, rest)
		}
	}

	// Cut short: the client ends its sending side mid-body. What came is not parsed.
	c = dialService(t, svc, 10*time.Second)
	if _, err := io.WriteString(c, postHead("/graphql", fmt.Sprintf("Content-Length: %d", len(half)), key)+string(half[:len(half)/2])); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	resp, body := readReply(t, bufio.NewReader(c))
	if resp.StatusCode != http.StatusBadRequest || errorCode(t, body, false) != "BAD_USER_INPUT" || bytes.Contains(body, []byte("JSON")) {
		t.Errorf("cut short: HTTP %d: %.300s; want 400 BAD_USER_INPUT about the request, not its JSON", resp.StatusCode, body)
	}

	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
		t.Errorf("records_count after all = %d, want %d", got, want)
	}
}
