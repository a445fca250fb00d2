package systemtest

// Several database hosts (contract section 6.6): a primary and a streaming standby of it, both
// listed in DATABASE__HOST; which one serves follows DATABASE__TARGET_SESSION_ATTRS and
// DATABASE__LOAD_BALANCE_HOSTS, and a standby that stops costs no more than the requests that
// were running on it. The service logs in as a role whose password has the characters a
// connection string would trip on, over TLS verified against each host's own name (the primary
// is "localhost", the standby "127.0.0.1"; the test certificate names both).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/internal/pgtest"
	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// serviceSessions counts the service's sessions on cluster c in database name, as c itself
// sees them (on a standby: the standby's pg_stat_activity).
func serviceSessions(t *testing.T, c *pgtest.Cluster, name string) int {
	t.Helper()
	n, _ := serviceSessionsTLS(t, c, name)
	return n
}

// serviceSessionsTLS is serviceSessions, and how many of the sessions use TLS.
func serviceSessionsTLS(t *testing.T, c *pgtest.Cluster, name string) (n, tls int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := c.ConnConfig("postgres")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to %d: %v", c.Port(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE s.ssl)
		FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid
		WHERE a.datname = $1 AND a.application_name = 'emsquery'`, name).Scan(&n, &tls); err != nil {
		t.Fatal(err)
	}
	return n, tls
}

func TestSeveralHosts(t *testing.T) {
	t.Parallel()
	primary := pgtest.New(t, pgtest.Options{SSL: true})
	db := servicetest.FixtureDBOn(t, primary)
	want := expectedCount(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The role is made on the primary and reaches the standby by replication.
	db.User = "emsq_hosts"
	db.Password = `p@ss:w/rd#?%41, it's "odd" ` + servicetest.RandomKey()[:8]
	role := pgx.Identifier{db.User}.Sanitize()
	if err := primary.Exec(ctx, db.Name, "CREATE ROLE "+role+" LOGIN PASSWORD "+quoteLiteral(db.Password)+";"+
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO "+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = primary.Exec(context.Background(), db.Name, "DROP OWNED BY "+role)
		_ = primary.Exec(context.Background(), "postgres", "DROP ROLE IF EXISTS "+role)
	})
	standby := pgtest.NewStandby(t, primary)
	if err := standby.WaitForReplay(ctx, primary); err != nil {
		t.Fatal(err)
	}
	pAddr := fmt.Sprintf("localhost:%d", primary.Port())
	sAddr := fmt.Sprintf("%s:%d", standby.Host(), standby.Port())
	settings := func(target, balance string, more ...string) map[string]string {
		env := map[string]string{
			"DATABASE__HOST":                     "localhost," + standby.Host(),
			"DATABASE__PORT":                     fmt.Sprintf("%d, %d", primary.Port(), standby.Port()),
			"DATABASE__TARGET_SESSION_ATTRS":     target,
			"DATABASE__LOAD_BALANCE_HOSTS":       balance,
			"DATABASE__ENCRYPT":                  "yes",
			"DATABASE__TRUST_SERVER_CERTIFICATE": "no",
			"DATABASE__SSL_ROOT_CERT":            primary.CAFile(),
			// Every request reaches a database host: routing is what is tested.
			"CACHE__ENABLED": "false",
		}
		for i := 0; i+1 < len(more); i += 2 {
			env[more[i]] = more[i+1]
		}
		return env
	}
	// sessionsSettle waits until the service has size sessions in all (its pool's minimum) and
	// returns how many are on the primary and on the standby.
	sessionsSettle := func(t *testing.T, size int) (onPrimary, onStandby int) {
		t.Helper()
		servicetest.WaitFor(t, 15*time.Second, fmt.Sprintf("%d service sessions", size), func() bool {
			onPrimary, onStandby = serviceSessions(t, primary, db.Name), serviceSessions(t, standby, db.Name)
			return onPrimary+onStandby >= size
		})
		return onPrimary, onStandby
	}

	// healthz's hosts: "unsuitable" is a host that answers but that the target never uses.
	for _, tc := range []struct {
		target, balance          string
		wantPrimary, wantStandby bool
		healthPrimary            string
		healthStandby            string
	}{
		{"any", "disable", true, false, "ok", "ok"},
		{"primary", "disable", true, false, "ok", "unsuitable"},
		{"read-only", "disable", true, false, "ok", "ok"}, // the service's sessions are read-only on any host
		{"standby", "disable", false, true, "unsuitable", "ok"},
		{"prefer-standby", "disable", false, true, "ok", "ok"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			svc := servicetest.Start(t, db, settings(tc.target, tc.balance, "DATABASE__POOL_SIZE", "3"))
			if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
				t.Errorf("records_count = %d, want %d", got, want)
			}
			p, s := sessionsSettle(t, 3)
			if (p > 0) != tc.wantPrimary || (s > 0) != tc.wantStandby {
				t.Errorf("%d sessions on the primary, %d on the standby; want primary %v, standby %v", p, s, tc.wantPrimary, tc.wantStandby)
			}
			m := wantJSONWithKey(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
			if hosts, _ := m["hosts"].(map[string]any); hosts[pAddr] != tc.healthPrimary || hosts[sAddr] != tc.healthStandby {
				t.Errorf("healthz hosts = %v, want the primary %s and the standby %s", m["hosts"], tc.healthPrimary, tc.healthStandby)
			}
		})
	}

	t.Run("random spreads new connections", func(t *testing.T) {
		const size = 16 // all on one host by chance: 2 in 65536
		svc := servicetest.Start(t, db, settings("any", "random", "DATABASE__POOL_SIZE", fmt.Sprint(size)))
		if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
			t.Errorf("records_count = %d, want %d", got, want)
		}
		p, s := sessionsSettle(t, size)
		t.Logf("random: %d sessions on the primary, %d on the standby", p, s)
		if p == 0 || s == 0 {
			t.Errorf("random: %d sessions on the primary, %d on the standby; want both used", p, s)
		}
		// TLS, verified, on both hosts.
		for _, c := range []*pgtest.Cluster{primary, standby} {
			if n, tls := serviceSessionsTLS(t, c, db.Name); tls != n {
				t.Errorf("port %d: %d of %d sessions use TLS", c.Port(), tls, n)
			}
		}
	})

	t.Run("standby stops and comes back under load", func(t *testing.T) {
		svc := servicetest.Start(t, db, settings("prefer-standby", "disable", "DATABASE__POOL_SIZE", "4"))
		load := startLoad(svc, 4, 1_000_000, 60*time.Second, 20*time.Millisecond)
		defer load.stop()
		time.Sleep(time.Second)
		if p, s := serviceSessions(t, primary, db.Name), serviceSessions(t, standby, db.Name); p != 0 || s == 0 {
			t.Fatalf("before the stop: %d sessions on the primary, %d on the standby; want all on the standby", p, s)
		}
		stopping := time.Now()
		if err := standby.Stop(); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		// Within 5 s, without a restart, the primary serves.
		time.Sleep(5 * time.Second)
		if p := serviceSessions(t, primary, db.Name); p == 0 {
			t.Errorf("5 s after the standby stopped: no service session on the primary")
		}
		m := wantJSONWithKey(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
		if hosts, _ := m["hosts"].(map[string]any); hosts[pAddr] != "ok" || hosts[sAddr] != "unreachable" {
			t.Errorf("healthz hosts with the standby down = %v, want the primary ok and the standby unreachable", m["hosts"])
		}
		time.Sleep(time.Second)

		restarting := time.Now()
		if err := standby.Start(); err != nil {
			t.Fatal(err)
		}
		// The standby takes the reads back: connections made to the primary in its absence
		// are replaced after about 10 s (database.fallbackRetry).
		servicetest.WaitFor(t, 20*time.Second, "service sessions on the standby again", func() bool {
			return serviceSessions(t, standby, db.Name) > 0
		})
		back := time.Now()
		time.Sleep(time.Second)
		outcomes := load.stop()

		var okBefore, okDown, okBack, failed int
		for _, o := range outcomes {
			at := o.start.Sub(stopping).Round(time.Millisecond)
			switch {
			case o.err != nil || o.status != http.StatusOK || o.code != "":
				failed++
				// Only requests running when the standby stopped, or sent within 5 s of it, may fail.
				if o.start.After(stopped.Add(5*time.Second)) || o.end.Before(stopping) {
					t.Errorf("request at %+v failed: status %d, code %s, err %v", at, o.status, o.code, o.err)
				}
			case o.count != want:
				t.Errorf("request at %+v: records_count = %d, want %d", at, o.count, want)
			case o.end.Before(stopping):
				okBefore++
			case o.start.Before(restarting):
				okDown++
			case o.start.After(back):
				okBack++
			}
		}
		t.Logf("%d answers before the stop, %d failed around it, %d with the standby down, %d after it was used again (%s after its start)",
			okBefore, failed, okDown, okBack, back.Sub(restarting).Round(time.Millisecond))
		if okBefore == 0 || okDown == 0 || okBack == 0 {
			t.Errorf("the load missed a phase: %d before, %d while down, %d after", okBefore, okDown, okBack)
		}
	})
}

// hostSwitch stands for a database host: it forwards TCP connections to target, or, while
// hanging, accepts them and never answers (a hung server, or an address whose packets are
// dropped after the handshake). Switching ends the connections open so far, as a hang does once
// their TCP peers give up.
type hostSwitch struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	hanging bool
	conns   []net.Conn
}

func newHostSwitch(t *testing.T, target string, hanging bool) *hostSwitch {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostSwitch{ln: ln, target: target, hanging: hanging}
	t.Cleanup(func() { ln.Close(); h.hang(true) })
	go h.serve()
	return h
}

func (h *hostSwitch) addr() string { return h.ln.Addr().String() }

func (h *hostSwitch) hang(hanging bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hanging = hanging
	for _, c := range h.conns {
		c.Close()
	}
	h.conns = nil
}

func (h *hostSwitch) serve() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		hanging := h.hanging
		h.conns = append(h.conns, c)
		h.mu.Unlock()
		if hanging {
			continue
		}
		up, err := net.Dial("tcp", h.target)
		if err != nil {
			c.Close()
			continue
		}
		h.mu.Lock()
		h.conns = append(h.conns, up)
		h.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

// A first host that hangs: healthz is 200 while the second answers, also when the pool is empty
// and its own check therefore waits on the hanging host past the check's 2 s; and when the
// first host starts hanging under load, only the requests running on it may fail, and requests
// sent 5 s later all succeed on the second host.
func TestHangingHost(t *testing.T) {
	t.Parallel()
	db := servicetest.FixtureDB(t)
	want := expectedCount(t, db)
	dbAddr := net.JoinHostPort(db.Host, fmt.Sprint(db.Port))
	settings := func(first *hostSwitch, poolSize string) map[string]string {
		host, port, _ := net.SplitHostPort(first.addr())
		return map[string]string{
			"DATABASE__HOST":         host + "," + db.Host,
			"DATABASE__PORT":         fmt.Sprintf("%s,%d", port, db.Port),
			"DATABASE__POOL_SIZE":    poolSize,
			"DATABASE__MAX_OVERFLOW": "4",
			"CACHE__ENABLED":         "false",
		}
	}

	t.Run("healthz with the pool empty", func(t *testing.T) {
		t.Parallel()
		hung := newHostSwitch(t, dbAddr, true)
		// POOL_SIZE 0: no connection is made before the check.
		svc := servicetest.Start(t, db, settings(hung, "0"))
		start := time.Now()
		m := wantJSONWithKey(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("healthz took %s, want <= 3s", d)
		}
		if hosts, _ := m["hosts"].(map[string]any); hosts[hung.addr()] != "no answer" || hosts[dbAddr] != "ok" {
			t.Errorf("healthz hosts = %v, want %s without answer and %s ok", m["hosts"], hung.addr(), dbAddr)
		}
		if got := countOf(t, svc.GraphQL(t, "/graphql", recordsCountQuery, nil)); got != want {
			t.Errorf("records_count = %d, want %d", got, want)
		}
	})

	t.Run("starts hanging under load", func(t *testing.T) {
		t.Parallel()
		first := newHostSwitch(t, dbAddr, false)
		svc := servicetest.Start(t, db, settings(first, "3"))
		load := startLoad(svc, 3, 1_000_000, 40*time.Second, 20*time.Millisecond)
		defer load.stop()
		time.Sleep(time.Second)
		hanging := time.Now()
		first.hang(true)
		time.Sleep(8 * time.Second)
		m := wantJSONWithKey(t, svc, "/v1/healthz", http.StatusOK, map[string]string{"status": "ok", "database": "ok"})
		if hosts, _ := m["hosts"].(map[string]any); hosts[first.addr()] != "no answer" || hosts[dbAddr] != "ok" {
			t.Errorf("healthz hosts = %v, want %s without answer and %s ok", m["hosts"], first.addr(), dbAddr)
		}
		outcomes := load.stop()
		var okBefore, failed, okAfter int
		for _, o := range outcomes {
			at := o.start.Sub(hanging).Round(time.Millisecond)
			switch {
			case o.err != nil || o.status != http.StatusOK || o.code != "":
				failed++
				if o.start.After(hanging.Add(5*time.Second)) || o.end.Before(hanging) {
					t.Errorf("request at %+v failed: status %d, code %s, err %v", at, o.status, o.code, o.err)
				}
			case o.count != want:
				t.Errorf("request at %+v: records_count = %d, want %d", at, o.count, want)
			case o.end.Before(hanging):
				okBefore++
			case o.start.After(hanging.Add(5 * time.Second)):
				okAfter++
			}
		}
		t.Logf("%d answers before the hang, %d failed around it, %d from 5 s after it", okBefore, failed, okAfter)
		if okBefore == 0 || okAfter == 0 {
			t.Errorf("the load missed a phase: %d before, %d from 5 s after", okBefore, okAfter)
		}
	})
}
