// Package connlimit bounds the connections a listener keeps open (APP__MAX_CONNECTIONS): past
// the bound, a new connection is closed as soon as it is accepted, so a client that opens
// thousands of connections and keeps them busy cannot take every file descriptor of the process,
// and the clients past the bound learn at once that they were refused.
//
// Neither of the ready-made limits does that. golang.org/x/net/netutil.LimitListener stops
// calling Accept while the bound is reached: new connections then wait in the kernel's listen
// queue (and, once it is full, their handshakes are retried by the client's kernel) for as long
// as the bound holds, which for a client that trickles bytes is as long as it likes.
// fasthttp's Server.Concurrency accepts the connection, writes a 503 and closes it, but only
// after handing it to a worker, and counts connections being served, not the descriptors the
// process holds (a connection closing gracefully in platform/httpbridge's Lingering still holds
// one).
package connlimit

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// warnEvery is how often, at most, refusals are logged while they go on.
const warnEvery = time.Minute

// Listener is a net.Listener that keeps at most max connections open.
type Listener struct {
	net.Listener
	max  int64
	open atomic.Int64
	log  *slog.Logger

	mu       sync.Mutex
	refused  int64 // since the last warning
	lastWarn time.Time
}

// New returns ln bounded to max open connections. A connection counts from its Accept until its
// Close (of the connection the listener returned, so a wrapper that closes later, such as a
// lingering close, counts until then). Refusals are logged as a WARNING at most once a minute,
// with how many there were.
func New(ln net.Listener, max int, log *slog.Logger) *Listener {
	if limit, ok := fileLimit(); ok && uint64(max)+reservedFiles > limit {
		log.Warn("APP__MAX_CONNECTIONS is more than the open-file limit leaves for connections: past that, new connections fail to be accepted instead of being refused at once; raise the limit (systemd LimitNOFILE=, ulimit -n) or lower APP__MAX_CONNECTIONS",
			"max_connections", max, "open_file_limit", limit, "reserved", reservedFiles)
	}
	return &Listener{Listener: ln, max: int64(max), log: log}
}

// reservedFiles is what the process needs besides client connections: the database pool, log
// files, the metrics endpoint, collectors' connections, with room to spare.
const reservedFiles = 256

// Open is the number of connections open now.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Accept returns the next connection within the bound; connections past it are closed (with a
// reset, which frees the socket at once) and never returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			l.refusedOne()
			continue
		}
		release := func() { l.open.Add(-1) }
		if tc, ok := c.(*net.TCPConn); ok {
			// Keeps *net.TCPConn's methods (CloseWrite, SyscallConn) for the wrappers above.
			return &TCPConn{TCPConn: tc, release: release}, nil
		}
		return &conn{Conn: c, release: release}, nil
	}
}

func (l *Listener) refusedOne() {
	l.mu.Lock()
	l.refused++
	now := time.Now()
	if now.Sub(l.lastWarn) < warnEvery {
		l.mu.Unlock()
		return
	}
	n := l.refused
	l.refused, l.lastWarn = 0, now
	l.mu.Unlock()
	l.log.Warn("connections refused: APP__MAX_CONNECTIONS reached; new connections are closed until open ones end (logged at most once a minute)",
		"max_connections", l.max, "refused", n)
}

// TCPConn is an accepted TCP connection that gives its place back when closed.
type TCPConn struct {
	*net.TCPConn
	once    sync.Once
	release func()
}

func (c *TCPConn) Close() error {
	err := c.TCPConn.Close()
	c.once.Do(c.release)
	return err
}

type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
