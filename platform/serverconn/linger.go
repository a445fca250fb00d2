// Package serverconn is the server's connections as fasthttp, under Fiber, does not make them:
// a Close that lingers, so that a client still sending a body the server refused reads the
// answer instead of a reset (Lingering); APP__WRITE_TIMEOUT on every write, cutting a client
// that stopped reading but never one that reads slowly (writetimeout.go); writes gathered
// while a streamed body is sent (Cork); and what runs once a response is written (AfterSent).
package serverconn

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Closing a socket that still has unread data from the client makes the kernel answer with a
// reset, which can destroy the server's last answer before the client reads it. That is what
// happens to a body over APP__MAX_BODY_BYTES: the server answers 413 without reading the body
// and closes, and a client still sending (browsers, Go's and most HTTP clients) reports a broken
// connection instead of the 413. So connections close gracefully, as web servers' "lingering
// close" does: the server's side is shut down first (the client reads the answer, then end of
// file), and what the client still sends is read and dropped, for lingerTimeout at most, before
// the socket is closed.
const (
	lingerTimeout  = 5 * time.Second
	lingerMaxBytes = 256 << 20
)

// Lingering returns ln with connections whose Close lingers (see above) and whose writes give
// up when the client accepts no byte for writeTimeout (APP__WRITE_TIMEOUT; see Write). It takes
// TCP connections, and connections that wrap one and keep its CloseWrite, SetLinger and
// SyscallConn (those of platform/connlimit, which give their place back only when the socket is
// closed).
func Lingering(ln net.Listener, writeTimeout time.Duration) net.Listener {
	return lingeringListener{Listener: ln, writeTimeout: writeTimeout}
}

type lingeringListener struct {
	net.Listener
	writeTimeout time.Duration
}

// tcpConn is what a lingering close needs of a connection; SyscallConn lets the client watch
// (Watched) look at the socket through the wrapper.
type tcpConn interface {
	net.Conn
	syscall.Conn
	CloseWrite() error
	SetLinger(sec int) error
}

func (l lingeringListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(tcpConn); ok && err == nil {
		if l.writeTimeout > 0 {
			limitUnsent(tc)
		}
		return &lingeringConn{tcpConn: tc, writeTimeout: l.writeTimeout}, nil
	}
	return c, err
}

// lingeringConn is a TCP connection whose Close shuts down the sending side at once and closes
// the socket in the background, once the client has stopped sending or lingerTimeout passed.
// A connection whose client stopped reading (see Write) is reset instead.
type lingeringConn struct {
	tcpConn
	writeTimeout time.Duration
	// stalled is set when the response was abandoned (writetimeout.go); atomic, because Close
	// may come from another goroutine (the export's stream writer closes the connection when
	// it fails).
	stalled atomic.Bool
	watch   progressWatch
	once    sync.Once
	corked  corked    // see cork.go
	sent    sentHooks // see sent.go
}

func (c *lingeringConn) Close() error {
	// The last response was written, or never will be: what waited for it runs now.
	c.runSent()
	var err error
	c.once.Do(func() {
		c.watch.stop()
		if c.stalled.Load() {
			// Reset: the client gets no more of an answer it stopped taking, and the kernel
			// frees the socket and its unsent data at once.
			_ = c.tcpConn.SetLinger(0)
			err = c.tcpConn.Close()
			return
		}
		if err = c.tcpConn.CloseWrite(); err != nil {
			err = c.tcpConn.Close()
			return
		}
		go func() {
			defer c.tcpConn.Close()
			_ = c.tcpConn.SetReadDeadline(time.Now().Add(lingerTimeout))
			_, _ = io.CopyN(io.Discard, c.tcpConn, lingerMaxBytes)
		}()
	})
	return err
}
