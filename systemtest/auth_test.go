package systemtest

// Authentication (the API key, its header, Authorization: Bearer) and CORS.

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	// DEBUG: the most verbose logging must not leak the key either.
	svc := servicetest.Start(t, db, map[string]string{"LOG__LEVEL": "DEBUG"})

	t.Run("no key", func(t *testing.T) {
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, nil)
		wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		if len(r.Data) > 0 && string(r.Data) != "null" {
			t.Errorf("401 carries data: %s", r.Raw)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		wrong := servicetest.RandomKey()
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": wrong})
		wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		// The key with one more character, and a prefix of it, are wrong too.
		for _, k := range []string{svc.Key + "x", svc.Key[:len(svc.Key)-1]} {
			r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": k})
			wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		}
	})
	t.Run("right key", func(t *testing.T) {
		if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
			t.Errorf("records_count = %d, want %d", got, want)
		}
		// Header names are case-insensitive.
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"X-API-KEY": svc.Key})
		if got := countOf(t, r); got != want {
			t.Errorf("records_count = %d, want %d", got, want)
		}
	})
	t.Run("preflight without key", func(t *testing.T) {
		resp, _ := preflight(t, svc, "/graphql", "http://localhost:3000", "x-api-key,content-type,if-none-match,traceparent")
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			t.Errorf("preflight status %d, want 2xx", resp.StatusCode)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://localhost:3000" {
			t.Errorf("Access-Control-Allow-Origin = %q, want http://localhost:3000", got)
		}
		if got := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")); !strings.Contains(got, "x-api-key") || !strings.Contains(got, "content-type") {
			t.Errorf("Access-Control-Allow-Headers = %q, want x-api-key and content-type", got)
		}
		if got := resp.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(got, "POST") {
			t.Errorf("Access-Control-Allow-Methods = %q, want POST", got)
		}
		for _, h := range []string{"if-none-match", "traceparent"} {
			if got := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")); !strings.Contains(got, h) {
				t.Errorf("Access-Control-Allow-Headers = %q, want %s", got, h)
			}
		}
	})
	t.Run("exposed headers", func(t *testing.T) {
		// What a browser's script may read of an answer: the revalidation, back-off, cache and
		// request id headers.
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": svc.Key, "Origin": "http://localhost:3000"})
		got := strings.ToLower(r.Header.Get("Access-Control-Expose-Headers"))
		for _, h := range []string{"etag", "retry-after", "cache-status", "x-request-id"} {
			if !strings.Contains(got, h) {
				t.Errorf("Access-Control-Expose-Headers = %q, want %s", got, h)
			}
		}
	})
	t.Run("OPTIONS never runs a query", func(t *testing.T) {
		// Preflights pass the key check; an OPTIONS request that carries a query must still not
		// reach execution.
		req, err := http.NewRequest(http.MethodOptions, "/graphql", strings.NewReader(`{"query":"`+recordsCountQuery+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, body := svc.Do(t, req)
		if bytes.Contains(body, []byte("records_count")) || resp.StatusCode == http.StatusOK && len(body) > 0 {
			t.Errorf("OPTIONS without a key answered %d %s", resp.StatusCode, body)
		}
	})
	t.Run("disallowed origin", func(t *testing.T) {
		resp, _ := preflight(t, svc, "/graphql", "http://evil.example", "x-api-key,content-type")
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("Access-Control-Allow-Origin = %q for a disallowed origin, want none", got)
		}
		// A real request from that origin gets no allow-origin either.
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": svc.Key, "Origin": "http://evil.example"})
		if got := r.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("Access-Control-Allow-Origin = %q on a request from a disallowed origin", got)
		}
	})
	t.Run("exempt routes", func(t *testing.T) {
		wantJSON(t, svc, "/v1/ping", http.StatusOK, map[string]string{"status": "ok"})
		wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	})
	t.Run("key never logged", func(t *testing.T) {
		stop(t, svc)
		assertNoSecret(t, svc, svc.Key, db.Password)
	})
}

// preflight sends a CORS preflight for a POST from origin, without a key.
func preflight(t *testing.T, svc *servicetest.Service, path, origin, headers string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", headers)
	return svc.Do(t, req)
}

func TestAuthenticationCustomHeader(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEY_HEADER": "X-Reporting-Key"})

	if got := countOf(t, svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"X-Reporting-Key": svc.Key})); got != want {
		t.Errorf("records_count = %d, want %d", got, want)
	}
	r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"x-api-key": svc.Key})
	wantGraphQLError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
	if !strings.Contains(r.Errors[0].Message, "X-Reporting-Key") {
		t.Errorf("401 message %q does not name the configured header", r.Errors[0].Message)
	}
	// Browsers may send the configured header.
	resp, _ := preflight(t, svc, "/graphql", "http://localhost:3000", "x-reporting-key,content-type")
	if got := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")); !strings.Contains(got, "x-reporting-key") {
		t.Errorf("Access-Control-Allow-Headers = %q, want the configured header", got)
	}
}

func TestAuthenticationAuthorizationHeader(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	svc := servicetest.Start(t, db, map[string]string{"AUTHENTICATION__API_KEY_HEADER": "Authorization"})

	for _, v := range []string{svc.Key, "Bearer " + svc.Key, "bearer " + svc.Key} {
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, map[string]string{"Authorization": v})
		if got := countOf(t, r); got != want {
			t.Errorf("Authorization %.7s...: records_count = %d, want %d", v, got, want)
		}
	}
	for name, h := range map[string]map[string]string{
		"bearer wrong key":  {"Authorization": "Bearer " + servicetest.RandomKey()},
		"other scheme":      {"Authorization": "Basic " + svc.Key},
		"bearer only":       {"Authorization": "Bearer"},
		"default header":    {"x-api-key": svc.Key},
		"no header at all":  {},
		"key after garbage": {"Authorization": "Bearer x " + svc.Key},
	} {
		r := svc.GraphQLWithHeaders(t, "/graphql", recordsCountQuery, nil, h)
		if r.Status != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401: %s", name, r.Status, r.Raw)
		}
	}
}
