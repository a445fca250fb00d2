package serverconn

import (
	"errors"
	"os"
	"sync"
	"time"
)

// APP__WRITE_TIMEOUT: a response whose client accepts no byte of it for that long is abandoned,
// its connection reset, and what the request still runs (an export's COPY) fails on its next
// write and is cancelled; a client that reads slowly but steadily is never cut, however large
// the response.
//
// "Accepts" is what the client's kernel acknowledges. A deadline per write cannot tell that:
// fasthttp's WriteTimeout (one deadline per response) cuts a slow download of a large export,
// and a write call returns as soon as the kernel has taken the bytes, which on Linux is up to a
// few megabytes per socket (the send buffer grows to net.ipv4.tcp_wmem's maximum): a client that
// never reads a 1 MB file leaves no write waiting, only the file in the kernel, and the
// connection idle until APP__IDLE_TIMEOUT. So on Linux each connection with bytes not yet
// acknowledged is looked at every writeTimeout/writeChecks (TCP_INFO: bytes acknowledged so far,
// bytes still queued): when the count acknowledged has not moved for writeTimeout, the
// connection is marked stalled and the server's wait on it (a write, or the read of a next
// request) is woken at once. Connections with nothing queued are not looked at: a response
// costs at most one timer and one getsockopt, a quarter of the timeout after it was written.
//
// Elsewhere (no TCP_INFO), a write waits for its client at most writeTimeout/writeChecks at a
// time and gives up after a whole timeout of such waits without one byte taken; a response the
// kernel took whole is left to APP__IDLE_TIMEOUT.
//
// A stalled connection is cut between 1 and 1 + 1/writeChecks timeouts after its client's last
// acknowledgement.
const writeChecks = 4

// errWriteStalled is what writes and reads return once the connection is stalled.
var errWriteStalled = errors.New("the client accepted no byte of the response within APP__WRITE_TIMEOUT")

// IsWriteStalled says whether err comes from a connection abandoned at APP__WRITE_TIMEOUT.
func IsWriteStalled(err error) bool { return errors.Is(err, errWriteStalled) }

// progressWatch looks at a connection with bytes queued for its client (Linux).
type progressWatch struct {
	mu           sync.Mutex
	timer        *time.Timer
	armed        bool
	stopped      bool
	lastAcked    uint64
	lastProgress time.Time
}

// writeTimed writes p to the socket within APP__WRITE_TIMEOUT (Write, cork.go, gathers writes
// first when the connection is corked).
func (c *lingeringConn) writeTimed(p []byte) (int, error) {
	if c.writeTimeout <= 0 {
		return c.tcpConn.Write(p)
	}
	if c.stalled.Load() {
		return 0, errWriteStalled
	}
	if c.watchable() {
		c.arm()
		n, err := c.tcpConn.Write(p)
		if err != nil && c.stalled.Load() {
			return n, errors.Join(errWriteStalled, err)
		}
		return n, err
	}
	return c.writeInParts(p)
}

// Read fails at once on a stalled connection: the server may set its own read deadline after
// the watch woke it (see stall), and must not wait for a next request there.
func (c *lingeringConn) Read(p []byte) (int, error) {
	// The server reads the next request once it has written its responses (sent.go).
	c.runSent()
	if c.stalled.Load() {
		return 0, errWriteStalled
	}
	n, err := c.tcpConn.Read(p)
	if err != nil && c.stalled.Load() {
		return n, errors.Join(errWriteStalled, err)
	}
	return n, err
}

// watchable says whether the connection's progress can be looked at (Linux TCP).
func (c *lingeringConn) watchable() bool { return progressSupported }

// arm starts the look at the connection unless it is on already; the client's time without
// progress counts from now.
func (c *lingeringConn) arm() {
	w := &c.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed || w.stopped {
		return
	}
	w.armed = true
	w.lastProgress = time.Now()
	every := c.writeTimeout / writeChecks
	if w.timer == nil {
		w.timer = time.AfterFunc(every, c.check)
	} else {
		w.timer.Reset(every)
	}
}

// check runs every writeTimeout/writeChecks while bytes are queued for the client.
func (c *lingeringConn) check() {
	w := &c.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || !w.armed {
		return
	}
	acked, queued, ok := tcpProgress(c.tcpConn)
	now := time.Now()
	switch {
	case !ok || queued == 0:
		// Everything was taken (or the socket is gone): nothing to watch until the next write.
		w.armed = false
		w.lastAcked = acked
		return
	case acked != w.lastAcked:
		w.lastAcked, w.lastProgress = acked, now
	case now.Sub(w.lastProgress) >= c.writeTimeout:
		w.armed = false
		c.stall()
		return
	}
	w.timer.Reset(c.writeTimeout / writeChecks)
}

// stall marks the connection abandoned and wakes whatever the server waits for on it.
func (c *lingeringConn) stall() {
	c.stalled.Store(true)
	past := time.Unix(1, 0)
	_ = c.tcpConn.SetWriteDeadline(past)
	_ = c.tcpConn.SetReadDeadline(past)
}

func (w *progressWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// writeInParts writes p where the client's progress cannot be looked at: it waits at most a
// part of the timeout at a time, starts over after a part in which the client took bytes, and
// gives up after a whole timeout of parts in a row without one.
func (c *lingeringConn) writeInParts(p []byte) (int, error) {
	part := c.writeTimeout / writeChecks
	var sum int
	idle := time.Duration(0)
	for {
		_ = c.tcpConn.SetWriteDeadline(time.Now().Add(part))
		n, err := c.tcpConn.Write(p)
		sum += n
		p = p[n:]
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return sum, err
		}
		if n > 0 {
			idle = 0
		} else if idle += part; idle >= c.writeTimeout {
			c.stalled.Store(true)
			return sum, errors.Join(errWriteStalled, err)
		}
	}
}

// Stalled says whether conn (a connection the server got from Lingering) was abandoned at
// APP__WRITE_TIMEOUT: for the log of a handler whose writes failed, which sees only that its
// response was cut off.
func Stalled(conn any) bool {
	c, ok := conn.(*lingeringConn)
	return ok && c.stalled.Load()
}
