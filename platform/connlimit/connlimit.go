// Package connlimit bounds the connections a listener keeps open (APP__MAX_CONNECTIONS), and
// those of one remote address (APP__MAX_CONNECTIONS_PER_CLIENT): past a bound, a new connection
// is closed as soon as it is accepted, so a client that opens thousands of connections and keeps
// them busy cannot take every file descriptor of the process, nor, from one address, every
// place under APP__MAX_CONNECTIONS, and the clients past a bound learn at once that they were
// refused.
//
// Neither of the ready-made limits does that. golang.org/x/net/netutil.LimitListener stops
// calling Accept while the bound is reached: new connections then wait in the kernel's listen
// queue (and, once it is full, their handshakes are retried by the client's kernel) for as long
// as the bound holds, which for a client that trickles bytes is as long as it likes.
// fasthttp's Server.Concurrency accepts the connection, writes a 503 and closes it, but only
// after handing it to a worker, and counts connections being served, not the descriptors the
// process holds (a connection closing gracefully in platform/serverconn's Lingering still holds
// one).
package connlimit

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// warnEvery is how often, at most, refusals are logged while they go on.
const warnEvery = time.Minute

// Listener is a net.Listener that keeps at most max connections open, and at most perClient
// from one remote address.
type Listener struct {
	net.Listener
	max       int64
	perClient int // 0: no bound
	open      atomic.Int64
	log       *slog.Logger

	// byClient counts the open connections of each remote address, when perClient bounds them.
	// An address is in it only while it has a connection open, so it never holds more entries
	// than there are open connections (at most max).
	clientMu sync.Mutex
	byClient map[netip.Addr]int

	mu              sync.Mutex
	refused         int64 // since the last warning
	refusedByClient int64
	lastWarn        time.Time
}

// New returns ln bounded to max open connections, and to perClient of them from one remote
// address (0: no bound per address). A connection counts from its Accept until its Close (of the
// connection the listener returned, so a wrapper that closes later, such as a lingering close,
// counts until then). Refusals are logged as a WARNING at most once a minute, with how many
// there were.
func New(ln net.Listener, max, perClient int, log *slog.Logger) *Listener {
	if limit, ok := fileLimit(); ok && uint64(max)+reservedFiles > limit {
		log.Warn("APP__MAX_CONNECTIONS is more than the open-file limit leaves for connections: past that, new connections fail to be accepted instead of being refused at once; raise the limit (systemd LimitNOFILE=, ulimit -n) or lower APP__MAX_CONNECTIONS",
			"max_connections", max, "open_file_limit", limit, "reserved", reservedFiles)
	}
	l := &Listener{Listener: ln, max: int64(max), perClient: perClient, log: log}
	if perClient > 0 {
		l.byClient = make(map[netip.Addr]int)
	}
	return l
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
			refuse(c)
			l.refusedOne(false)
			continue
		}
		release := func() { l.open.Add(-1) }
		if l.byClient != nil {
			client, ok := remoteAddr(c)
			if ok && !l.takeClient(client) {
				release()
				refuse(c)
				l.refusedOne(true)
				continue
			}
			if ok {
				release = func() { l.giveClient(client); l.open.Add(-1) }
			}
		}
		if tc, ok := c.(*net.TCPConn); ok {
			// Keeps *net.TCPConn's methods (CloseWrite, SyscallConn) for the wrappers above.
			return &TCPConn{TCPConn: tc, release: release}, nil
		}
		return &conn{Conn: c, release: release}, nil
	}
}

// refuse closes c with a reset, which frees the socket at once.
func refuse(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// remoteAddr is c's remote IP address (an IPv4 address in IPv6 form as IPv4), when it has one.
func remoteAddr(c net.Conn) (netip.Addr, bool) {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	return ip.Unmap(), ok
}

// takeClient counts one more connection of client, unless it has perClient open already.
func (l *Listener) takeClient(client netip.Addr) bool {
	l.clientMu.Lock()
	defer l.clientMu.Unlock()
	n := l.byClient[client]
	if n >= l.perClient {
		return false
	}
	l.byClient[client] = n + 1
	return true
}

func (l *Listener) giveClient(client netip.Addr) {
	l.clientMu.Lock()
	defer l.clientMu.Unlock()
	if n := l.byClient[client]; n > 1 {
		l.byClient[client] = n - 1
	} else {
		delete(l.byClient, client)
	}
}

// OpenFrom is the number of connections open now from client (0 when not counted per address).
func (l *Listener) OpenFrom(client netip.Addr) int {
	l.clientMu.Lock()
	defer l.clientMu.Unlock()
	return l.byClient[client]
}

func (l *Listener) refusedOne(perClient bool) {
	l.mu.Lock()
	if perClient {
		l.refusedByClient++
	} else {
		l.refused++
	}
	now := time.Now()
	if now.Sub(l.lastWarn) < warnEvery {
		l.mu.Unlock()
		return
	}
	n, m := l.refused, l.refusedByClient
	l.refused, l.refusedByClient, l.lastWarn = 0, 0, now
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn("connections refused: APP__MAX_CONNECTIONS reached; new connections are closed until open ones end (logged at most once a minute)",
			"max_connections", l.max, "refused", n)
	}
	if m > 0 {
		// No address: the log says that the bound works, not who was refused.
		l.log.Warn("connections refused: a client reached APP__MAX_CONNECTIONS_PER_CLIENT; its new connections are closed until its open ones end (logged at most once a minute)",
			"max_connections_per_client", l.perClient, "refused", m)
	}
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
