package systemtest

// The connection to the database: password characters, TLS, the pool's timeout.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestPasswordWithSpecialCharacters(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	ctx := context.Background()
	role := "emsq_ro_" + strings.ToLower(servicetest.RandomKey()[:10])
	password := `p@ss:w/rd#?%41 it's "odd"` + servicetest.RandomKey()[:8]
	ident := pgx.Identifier{role}.Sanitize()
	if err := db.Cluster.Exec(ctx, "postgres", "CREATE ROLE "+ident+" LOGIN PASSWORD "+quoteLiteral(password)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = db.Cluster.Exec(ctx, db.Name, "DROP OWNED BY "+ident)
		if err := db.Cluster.Exec(ctx, "postgres", "DROP ROLE "+ident); err != nil {
			t.Logf("drop role: %v", err)
		}
	})
	grants := "GRANT CONNECT ON DATABASE " + pgx.Identifier{db.Name}.Sanitize() + " TO " + ident + ";" +
		"GRANT USAGE ON SCHEMA public TO " + ident + ";" +
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + ident
	if err := db.Cluster.Exec(ctx, db.Name, grants); err != nil {
		t.Fatal(err)
	}

	roleDB := db
	roleDB.User, roleDB.Password = role, password
	svc := servicetest.Start(t, roleDB, nil)
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
	if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
		t.Errorf("records_count = %d, want %d", got, want)
	}
	// The service's sessions really are the role's.
	var users []string
	rows, err := db.Pool(t).Query(ctx, `SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = $1 AND application_name = 'emsquery'`, db.Name)
	if err != nil {
		t.Fatal(err)
	}
	users, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 1 || users[0] != role {
		t.Errorf("service sessions belong to %v, want [%s]", users, role)
	}
	stop(t, svc)
	assertNoSecret(t, svc, password, svc.Key)
}

// quoteLiteral quotes s as an SQL string literal (standard_conforming_strings is on).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func TestDatabaseTLS(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{SSL: true})
	for _, tc := range []struct {
		name    string
		env     map[string]string
		healthy bool
		wantSSL bool
		// warned: the start-up warnings of an unverified server (trust) and of an ignored
		// DATABASE__SSL_ROOT_CERT (ignored).
		trustWarned, ignoredWarned bool
	}{
		{"no encryption", map[string]string{"DATABASE__ENCRYPT": "no"}, true, false, false, false},
		{"trusted without checks", map[string]string{"DATABASE__ENCRYPT": "yes", "DATABASE__TRUST_SERVER_CERTIFICATE": "yes"}, true, true, true, false},
		{"trusted, root cert ignored", map[string]string{"DATABASE__ENCRYPT": "yes", "DATABASE__TRUST_SERVER_CERTIFICATE": "yes", "DATABASE__SSL_ROOT_CERT": c.CAFile()}, true, true, true, true},
		{"verified against system roots", map[string]string{"DATABASE__ENCRYPT": "yes", "DATABASE__TRUST_SERVER_CERTIFICATE": "no"}, false, false, false, false},
		{"verified against the root cert", map[string]string{"DATABASE__ENCRYPT": "yes", "DATABASE__TRUST_SERVER_CERTIFICATE": "no", "DATABASE__SSL_ROOT_CERT": c.CAFile()}, true, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := servicetest.NewDBOn(t, c)
			svc := servicetest.Start(t, db, tc.env)
			// The log is written in the background; the start-up warnings come before this line.
			servicetest.WaitFor(t, 5*time.Second, "the listening line", func() bool { return strings.Contains(svc.Output(), "msg=listening") })
			out := svc.Output()
			for _, w := range []struct {
				text string
				want bool
			}{
				{"level=WARNING msg=\"DATABASE__TRUST_SERVER_CERTIFICATE=yes: the connection to the database is encrypted but the server is not verified", tc.trustWarned},
				{"level=WARNING msg=\"DATABASE__SSL_ROOT_CERT is set but ignored", tc.ignoredWarned},
			} {
				if strings.Contains(out, w.text) != w.want {
					t.Errorf("start-up log has %q: %v, want %v:\n%s", w.text, !w.want, w.want, out)
				}
			}
			start := time.Now()
			if !tc.healthy {
				m := wantJSON(t, svc, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("healthz took %s", d)
				}
				if m["database"] == "ok" {
					t.Errorf("database = ok with an untrusted certificate")
				}
				r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
				if len(r.Errors) == 0 || r.Errors[0].Code() != "SERVICE_UNAVAILABLE" {
					t.Errorf("query with an untrusted certificate: want SERVICE_UNAVAILABLE, got %s", r.Raw)
				}
				// Nothing fell back to a plain connection either.
				if n, _ := sessions(t, db); n != 0 {
					t.Errorf("%d service sessions with an untrusted certificate, want 0", n)
				}
				return
			}
			wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
			if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != 0 {
				t.Errorf("records_count = %d on an empty database", got)
			}
			n, allSSL := sessions(t, db)
			if n == 0 {
				t.Fatal("no service session in pg_stat_activity")
			}
			if allSSL != tc.wantSSL {
				t.Errorf("%d service sessions, all TLS = %v, want %v", n, allSSL, tc.wantSSL)
			}
		})
	}
}

// sessions counts the service's sessions on db and says whether all of them use TLS.
func sessions(t *testing.T, db servicetest.DB) (n int, allSSL bool) {
	t.Helper()
	err := db.Pool(t).QueryRow(context.Background(), `
		SELECT count(*), coalesce(bool_and(s.ssl), false)
		  FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid
		 WHERE a.datname = $1 AND a.application_name = 'emsquery' AND a.pid <> pg_backend_pid()`, db.Name).Scan(&n, &allSSL)
	if err != nil {
		t.Fatal(err)
	}
	return n, allSSL
}

func TestPoolTimeout(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	// Two identical requests: without answers from memory, each needs a connection.
	svc := servicetest.Start(t, db, map[string]string{
		"DATABASE__POOL_SIZE": "1", "DATABASE__MAX_OVERFLOW": "0", "DATABASE__POOL_TIMEOUT": "1", "CACHE__ENABLED": "false",
	})
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})

	release := lockFactRecord(t, db)
	first := make(chan result, 1)
	go func() {
		status, body, err := postGraphQL(svc.URL+"/graphql", map[string]string{svc.Header: svc.Key}, recordsCountQuery)
		first <- result{status, body, err}
	}()
	waitForLockWaiters(t, db, 1) // the first request holds the only connection

	start := time.Now()
	r := svc.GraphQL(t, "/graphql", recordsCountQuery, nil)
	d := time.Since(start)
	if len(r.Errors) == 0 || r.Errors[0].Code() != "SERVICE_UNAVAILABLE" {
		t.Errorf("second request: want SERVICE_UNAVAILABLE, got %d %s", r.Status, r.Raw)
	}
	if d < 800*time.Millisecond || d > 3*time.Second {
		t.Errorf("second request failed after %s, want about DATABASE__POOL_TIMEOUT (1s)", d)
	}

	// The health check is bounded too: no free connection is a 503 within 3 s. (After the last
	// check's second: healthz checks at most once a second.)
	time.Sleep(1100 * time.Millisecond)
	start = time.Now()
	wantJSON(t, svc, "/v1/healthz", http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("healthz took %s with the pool exhausted, want <= 3s", d)
	}

	release()
	res := <-first
	if res.err != nil {
		t.Fatal(res.err)
	}
	got := countOf(t, &servicetest.GraphQLResponse{Status: res.status, Raw: res.body, Data: dataOf(t, res.body)})
	if got != want {
		t.Errorf("first request: records_count = %d, want %d", got, want)
	}
	time.Sleep(1100 * time.Millisecond) // past the last check, with the pool exhausted
	wantJSON(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
}
