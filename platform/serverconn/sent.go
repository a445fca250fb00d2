package serverconn

import "sync"

// fasthttp writes a response after its handler returned, so what the middleware records of a
// request (the access log's line, the HTTP metrics, the request's span) used to run before the
// response's first byte left: at concurrency 1 that was a few microseconds of every answer's
// time, about a tenth of the service's own work on a light question. A connection of Lingering
// runs such work once the response is written instead: when the server next reads from the
// connection (for the client's next request: fasthttp reads only after it has written the
// responses it holds) or closes it, whichever comes first. A response is never held for it.

// sentHooks are what runs once the response being made on a connection is written.
type sentHooks struct {
	mu  sync.Mutex
	fns []func()
}

// AfterSent has f run once the server has written the response it is making on conn (see
// above), and says whether it will; it will not when conn is not a connection of Lingering
// (tests, in-memory listeners), and the caller then runs f itself. f runs on the connection's
// goroutine, or on the one that closes the connection, exactly once.
func AfterSent(conn any, f func()) bool {
	c, ok := conn.(*lingeringConn)
	if !ok {
		return false
	}
	c.sent.mu.Lock()
	c.sent.fns = append(c.sent.fns, f)
	c.sent.mu.Unlock()
	return true
}

// runSent runs what waited for the response to be written, outside the lock: f may take as long
// as it likes, and a Close from another goroutine runs only what is left.
func (c *lingeringConn) runSent() {
	c.sent.mu.Lock()
	fns := c.sent.fns
	c.sent.fns = nil
	c.sent.mu.Unlock()
	for _, f := range fns {
		f()
	}
}
