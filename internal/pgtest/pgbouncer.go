package pgtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// PgBouncer is a PgBouncer in front of a cluster, in transaction pooling mode and otherwise with
// PgBouncer's defaults, except for authentication: clients log in as the cluster's superuser
// with its password (scram-sha-256), which PgBouncer also uses towards the server. Every
// database of the cluster is reachable through it under its own name.
//
// It runs as the server's user (PgBouncer refuses to run as root) in a directory inside the
// cluster's, in the foreground under a small shell that holds a lifeline like the cluster's
// watchdog: when the test process ends in any way, the shell stops PgBouncer.
type PgBouncer struct {
	dir      string
	port     int
	lifeline io.WriteCloser // closing it (or dying) stops PgBouncer
	exited   chan error     // the shell's exit
}

// bouncerScript runs PgBouncer until its stdin closes, then stops it (SIGTERM: PgBouncer's
// immediate shutdown).
const bouncerScript = `trap '' HUP INT
"$1" "$2" &
pid=$!
while read -r _; do :; done
kill -TERM "$pid" 2>/dev/null
wait "$pid"
`

// findPgBouncer looks for the pgbouncer binary: PATH, then Debian's /usr/sbin (outside a
// normal user's PATH).
func findPgBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if st, err := os.Stat("/usr/sbin/pgbouncer"); err == nil && !st.IsDir() {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("pgbouncer not found (install Debian's 'pgbouncer' package; scripts/test-deps.sh does)")
}

// StartPgBouncer starts a PgBouncer in front of c (see PgBouncer) and waits until it accepts
// connections. settings are extra lines for the [pgbouncer] section, e.g. "default_pool_size = 1".
func (c *Cluster) StartPgBouncer(settings ...string) (*PgBouncer, error) {
	bin, err := findPgBouncer()
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	// A folder of its own, not one named by the port: a later PgBouncer of the same cluster may
	// be given the port of one stopped before it, whose folder is still there.
	dir, err := os.MkdirTemp(c.dir, "pgbouncer-")
	if err != nil {
		return nil, err
	}
	if err := c.chown(dir); err != nil {
		return nil, err
	}
	// The password is hex (see setup), so it needs no escaping inside the quotes.
	if err := c.writeFile(filepath.Join(dir, "userlist.txt"), []byte(fmt.Sprintf("%q %q\n", superuser, c.password)), 0o600); err != nil {
		return nil, err
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
pool_mode = transaction
logfile = %s
`, c.Host(), c.Port(), port, filepath.Join(dir, "userlist.txt"), filepath.Join(dir, "pgbouncer.log"))
	for _, s := range settings {
		ini += s + "\n"
	}
	conf := filepath.Join(dir, "pgbouncer.ini")
	if err := c.writeFile(conf, []byte(ini), 0o600); err != nil {
		return nil, err
	}
	b := &PgBouncer{dir: dir, port: port, exited: make(chan error, 1)}
	cmd := exec.Command("/bin/sh", "-c", bouncerScript, "pgtest-pgbouncer", bin, conf)
	cmd.Dir = dir
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if c.cred != nil {
		cmd.SysProcAttr.Credential = c.cred
	}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	b.lifeline = w
	go func() { b.exited <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(b.Host(), strconv.Itoa(port)), time.Second)
		if err == nil {
			conn.Close()
			return b, nil
		}
		select {
		case err := <-b.exited:
			w.Close()
			return nil, fmt.Errorf("pgbouncer exited: %v\n%s", err, b.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(fmt.Errorf("pgbouncer did not listen on %d within 15 s\n%s", port, b.logTail()), b.Stop())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Host is where PgBouncer listens: loopback only, like the cluster.
func (b *PgBouncer) Host() string { return "127.0.0.1" }

// Port is PgBouncer's port.
func (b *PgBouncer) Port() int { return b.port }

// Stop stops PgBouncer and waits for it (at most 10 s).
func (b *PgBouncer) Stop() error {
	b.lifeline.Close()
	select {
	case <-b.exited:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("pgtest: pgbouncer did not stop within 10 s")
	}
}

// LogFile is PgBouncer's log.
func (b *PgBouncer) LogFile() string { return filepath.Join(b.dir, "pgbouncer.log") }

func (b *PgBouncer) logTail() string {
	out, err := os.ReadFile(b.LogFile())
	if err != nil {
		return fmt.Sprintf("(no pgbouncer log: %v)", err)
	}
	return tail(string(out), 20)
}

// NewPgBouncer is StartPgBouncer for one test, stopped at t.Cleanup. A PgBouncer that cannot
// start follows the rule for a missing database (see New).
func NewPgBouncer(t testing.TB, c *Cluster, settings ...string) *PgBouncer {
	t.Helper()
	b, err := c.StartPgBouncer(settings...)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
	})
	return b
}
