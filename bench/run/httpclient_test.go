package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The lean client reads every kind of response the service sends whole: a body with a length,
// a chunked one (the export's stream), an error with its body, a connection the server closes.
func TestRawClient(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 20_000) // 320 KB: more than the reader's buffer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/length":
			w.Header().Set(headerCacheStatus, cacheHit)
			_, _ = w.Write(append([]byte("echo:"), body...))
		case "/chunked":
			for i := range 4 {
				_, _ = io.WriteString(w, big[i*1000:(i+1)*1000])
				w.(http.Flusher).Flush()
			}
			_, _ = io.WriteString(w, big)
		case "/error":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"errors":[{"message":"bad"}]}`+big)
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	c := &rawClient{addr: host}
	defer c.close()
	ctx := context.Background()

	for round := range 3 { // the same connection again, and after a close
		var got bytes.Buffer
		resp, n, err := c.do(ctx, 0, newRawRequest(host, http.MethodPost, "/length", []byte(`{"q":1}`), "Content-Type", "application/json"), &got)
		if err != nil || resp.status != 200 || got.String() != `echo:{"q":1}` || n != int64(got.Len()) ||
			!resp.hasCache || string(resp.cacheStatus) != cacheHit {
			t.Fatalf("round %d /length: %v %d %q %d %q", round, err, resp.status, got.String(), n, resp.cacheStatus)
		}
		got.Reset()
		resp, n, err = c.do(ctx, 0, newRawRequest(host, http.MethodGet, "/chunked", nil), &got)
		if err != nil || resp.status != 200 || got.String() != big[:4000]+big || n != int64(got.Len()) || resp.hasCache {
			t.Fatalf("round %d /chunked: %v %d %d bytes, %d", round, err, resp.status, got.Len(), n)
		}
		resp, _, err = c.do(ctx, 0, newRawRequest(host, http.MethodGet, "/error", nil), io.Discard)
		if err != nil || resp.status != 400 || !strings.HasPrefix(string(resp.errBody), `{"errors":[{"message":"bad"}]}`) || len(resp.errBody) != errBodyMax {
			t.Fatalf("round %d /error: %v %d %q", round, err, resp.status, resp.errBody)
		}
		got.Reset()
		resp, _, err = c.do(ctx, 0, newRawRequest(host, http.MethodGet, "/close", nil), &got)
		if err != nil || resp.status != 200 || got.String() != "bye" {
			t.Fatalf("round %d /close: %v %d %q", round, err, resp.status, got.String())
		}
	}
}
