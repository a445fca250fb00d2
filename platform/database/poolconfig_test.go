package database

import (
	"context"
	"reflect"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// hostsOf lists a configuration's host:port in the order pgconn tries them, with the TLS
// server name each is verified against ("-" without TLS).
func hostsOf(cc *pgconn.Config) []string {
	var out []string
	add := func(host string, port uint16, sn string) {
		out = append(out, host+":"+strconv.Itoa(int(port))+" "+sn)
	}
	sn := func(c *pgconn.Config, i int) string {
		tc := c.TLSConfig
		if i > 0 {
			tc = c.Fallbacks[i-1].TLSConfig
		}
		switch {
		case tc == nil:
			return "-"
		case tc.InsecureSkipVerify:
			return "unverified"
		}
		return tc.ServerName
	}
	add(cc.Host, cc.Port, sn(cc, 0))
	for i, f := range cc.Fallbacks {
		add(f.Host, f.Port, sn(cc, i+1))
	}
	return out
}

func TestPoolConfigHosts(t *testing.T) {
	d := testConfig("db1", 5432, "analytics", "pw").Database
	d.Hosts, d.Ports = []string{"db1", "db2", "/run/postgresql"}, []int{5432, 5433, 5434}
	d.Encrypt, d.TrustServerCertificate = true, false
	pc, err := PoolConfig(d, testConfig("", 0, "", "").Limits)
	if err != nil {
		t.Fatal(err)
	}
	// Each host is verified against its own name; a Unix socket has no TLS.
	want := []string{"db1:5432 db1", "db2:5433 db2", "/run/postgresql:5434 -"}
	if got := hostsOf(&pc.ConnConfig.Config); !reflect.DeepEqual(got, want) {
		t.Errorf("hosts %q, want %q", got, want)
	}
	if pc.ConnConfig.ConnectTimeout != connectTimeoutPerHost {
		t.Errorf("connect timeout %s with three hosts, want %s", pc.ConnConfig.ConnectTimeout, connectTimeoutPerHost)
	}
	if pc.BeforeConnect != nil || pc.ConnConfig.ValidateConnect != nil {
		t.Error("disable and any: no shuffle and no check expected")
	}

	// random shuffles each new connection's copy, never the pool's own configuration.
	d.LoadBalanceHosts, d.TargetSessionAttrs = LoadBalanceRandom, TargetStandby
	pc, err = PoolConfig(d, testConfig("", 0, "", "").Limits)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(pc.ConnConfig.ValidateConnect).Pointer() != reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsStandby).Pointer() {
		t.Error("standby: pgconn's standby check expected")
	}
	firsts := map[string]bool{}
	for range 200 {
		cc := pc.ConnConfig.Copy()
		if err := pc.BeforeConnect(context.Background(), cc); err != nil {
			t.Fatal(err)
		}
		got := hostsOf(&cc.Config)
		firsts[got[0]] = true
		// The pairs stay together: host, port and the TLS name for that host.
		for _, h := range want {
			found := false
			for _, g := range got {
				found = found || g == h
			}
			if !found {
				t.Fatalf("shuffled %q lost %q", got, h)
			}
		}
	}
	if len(firsts) != 3 {
		t.Errorf("first hosts over 200 connections: %v, want all three", firsts)
	}
	if got := hostsOf(&pc.ConnConfig.Config); !reflect.DeepEqual(got, want) {
		t.Errorf("the pool's configuration changed to %q", got)
	}
}

func TestPoolConfigSessionSettings(t *testing.T) {
	cfg := testConfig("db", 5432, "analytics", "pw")
	cfg.Database.Schema = `Ana "lytics"`
	pc, err := PoolConfig(cfg.Database, cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"application_name": "emsquery", "DateStyle": "ISO, YMD", "search_path": `"Ana ""lytics"""`,
		"default_transaction_read_only": "on", "statement_timeout": "30000",
	}
	if got := pc.ConnConfig.RuntimeParams; !reflect.DeepEqual(got, want) {
		t.Errorf("startup parameters %v, want %v", got, want)
	}
	// Behind a transaction pooler only what PgBouncer keeps per client is sent at connect; the
	// rest starts every transaction.
	cfg.Database.TransactionPooling = true
	pc, err = PoolConfig(cfg.Database, cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"application_name": "emsquery", "DateStyle": "ISO, YMD"}
	if got := pc.ConnConfig.RuntimeParams; !reflect.DeepEqual(got, want) {
		t.Errorf("startup parameters behind a pooler %v, want %v", got, want)
	}
	s := newSessionSettings(cfg.Database.Schema, cfg.Limits.StatementTimeout)
	if want := `BEGIN READ ONLY; SET LOCAL search_path TO "Ana ""lytics"""; SET LOCAL statement_timeout = 30000`; s.begin != want {
		t.Errorf("begin %q, want %q", s.begin, want)
	}
	if pc.ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheDescribe {
		t.Errorf("exec mode %v, want unnamed statements", pc.ConnConfig.DefaultQueryExecMode)
	}
}
