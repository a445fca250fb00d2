package serverconn

import "sync"

// fasthttp sends a body of unknown length (responsebody.SendStream) in chunks of 4 KiB, flushing each to the
// connection: one system call and one TCP segment per 4 KiB. For an 82 MB answer that was 20,000
// writes, most of the service's processor time besides the encoding (TCP_CORK in the kernel
// merged the segments but left the system calls). So a connection of Lingering can be corked
// while such a body is sent: its writes are gathered into corkSize bytes and written together,
// and the rest when it is uncorked, as the body ends.
const corkSize = 64 << 10

// corker is a connection whose writes can be gathered (lingeringConn).
type corker interface {
	cork()
	uncork()
}

// Cork gathers conn's writes until the returned function is called, when conn is a connection
// of Lingering; otherwise it does nothing.
func Cork(conn any) (uncork func()) {
	c, ok := conn.(corker)
	if !ok {
		return func() {}
	}
	c.cork()
	return c.uncork
}

// corked is the state of a lingeringConn's gathering; its zero value writes through.
type corked struct {
	mu  sync.Mutex
	on  bool
	buf []byte
}

func (c *lingeringConn) cork() {
	c.corked.mu.Lock()
	defer c.corked.mu.Unlock()
	c.corked.on = true
}

// uncork writes what was gathered and writes through again.
func (c *lingeringConn) uncork() {
	c.corked.mu.Lock()
	defer c.corked.mu.Unlock()
	c.corked.on = false
	if len(c.corked.buf) > 0 {
		_, _ = c.writeTimed(c.corked.buf)
	}
	c.corked.buf = nil
}

func (c *lingeringConn) Write(p []byte) (int, error) {
	c.corked.mu.Lock()
	defer c.corked.mu.Unlock()
	if !c.corked.on {
		return c.writeTimed(p)
	}
	if len(c.corked.buf)+len(p) > corkSize {
		if len(c.corked.buf) > 0 {
			if _, err := c.writeTimed(c.corked.buf); err != nil {
				return 0, err
			}
			c.corked.buf = c.corked.buf[:0]
		}
		if len(p) >= corkSize {
			return c.writeTimed(p)
		}
	}
	if c.corked.buf == nil {
		c.corked.buf = make([]byte, 0, corkSize)
	}
	c.corked.buf = append(c.corked.buf, p...)
	return len(p), nil
}
