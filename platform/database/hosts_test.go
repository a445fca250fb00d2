package database

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// hungHost accepts TCP connections and never answers: a server that hangs, or an address whose
// packets are dropped after the handshake.
func hungHost(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// A host listed first that hangs holds a new connection for connectTimeoutPerHost, then the next
// host serves; the database does not count as down, and healthz's per-host check says which host
// does not answer.
func TestHungHostIsPassedOver(t *testing.T) {
	t.Parallel()
	cfg, c, _ := clusterConfig(t)
	hung := hungHost(t)
	cfg.Database.Hosts = []string{"127.0.0.1", c.Host()}
	cfg.Database.Ports = []int{hung, c.Port()}
	cfg.Database.PoolSize = 0
	cfg.Database.MaxOverflow = 1
	db, logs := open(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("ping with the first host hanging: %v", err)
	}
	t.Logf("first statement after %s", time.Since(start))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the first statement took %s with the first host hanging, want < 5s", d)
	}
	if db.reach.down.Load() || strings.Contains(logs.String(), "database unreachable") {
		t.Errorf("the database counted as down while a host answered:\n%s", logs.String())
	}
	hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
	defer hcancel()
	start = time.Now()
	states := db.CheckHosts(hctx)
	t.Logf("hosts checked in %s", time.Since(start))
	if len(states) != 2 || states[0].State != "no answer" || states[1].State != "ok" {
		t.Errorf("hosts %+v, want the first without answer and the second ok", states)
	}
}
