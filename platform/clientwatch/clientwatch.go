// Package clientwatch ends a request's context when its client closes the connection (Watched,
// WatchClient), and looks whether it has (PeerGone): fasthttp, under Fiber, reads a connection
// only between requests, so unlike a net/http server it never notices a client that left while
// its answer is computed.
package clientwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
)

// ErrClientGone is the cause of a request context cancelled because the client closed its
// connection, and the error of a write to a client that stopped reading.
var ErrClientGone = fmt.Errorf("the client closed its connection: %w", context.Canceled)

// clientCheckInterval is how often a running API request looks whether its client is still
// there. The first look comes after one interval, so quick requests never look.
const clientCheckInterval = 250 * time.Millisecond

// Watched runs h with a request context that is cancelled when the client closes its
// connection while h runs. fasthttp does not notice a client that goes away while a handler runs
// (it reads the connection only between requests), so the connection is looked at every
// clientCheckInterval with a non-consuming read (see peerClosed).
//
// The export uses it alone: its own limit is LIMITS__EXPORT_TIMEOUT, and once its handler has
// returned, a failed write is what tells that the client left.
func Watched(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		parent := c.UserContext()
		ctx, cancel := context.WithCancelCause(parent)
		defer cancel(nil)
		stop := WatchClient(c.Context().Conn(), cancel)
		defer stop()
		c.SetUserContext(ctx)
		err := h(c)
		c.SetUserContext(parent)
		if errors.Is(context.Cause(ctx), ErrClientGone) {
			// Nobody reads this answer. The access line and the metrics get nginx's "client
			// closed request" instead of an error of the service's.
			c.Status(StatusClientClosedRequest)
			return nil
		}
		return err
	}
}

// StatusClientClosedRequest is the status logged for a request whose client left before the
// answer (nginx's 499).
const StatusClientClosedRequest = 499

// WatchClient calls cancel(ErrClientGone) when the peer of conn closes it, looking every
// clientCheckInterval until stop is called. After stop returns no look is under way, so the
// server's own reads of the connection never overlap with one. Connections that are not
// sockets (tests, in-memory listeners) are not watched.
func WatchClient(conn any, cancel context.CancelCauseFunc) (stop func()) {
	raw, ok := rawConn(conn)
	if !ok {
		return func() {}
	}
	w := &clientWatch{raw: raw, cancel: cancel, looked: time.Now()}
	watching.mu.Lock()
	watching.set[w] = struct{}{}
	if !watching.started {
		watching.started = true
		go lookAtClients()
	}
	watching.mu.Unlock()
	return w.stop
}

// PeerGone returns a look at whether the peer of conn has closed it (false for connections that
// are not sockets): for a response that waits long between writes, as a live answer's stream
// does, which would otherwise learn that its client left only from a failed write. It must
// not be called while the server may read the connection (between responses).
func PeerGone(conn any) func() bool {
	raw, ok := rawConn(conn)
	if !ok {
		return func() bool { return false }
	}
	return func() bool { return peerClosed(raw) }
}

// rawConn is conn's socket, for a look at it; false when conn is not one (tests, in-memory
// listeners).
func rawConn(conn any) (syscall.RawConn, bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, false
	}
	raw, err := sc.SyscallConn()
	return raw, err == nil
}

// watching is every connection being watched. One goroutine looks at each once its last look
// (or its watch's start) is clientCheckInterval old, checking every lookEvery: a timer per
// request cost a light request about 4% of its processor time, its deadline, nearer than any
// other, waking the runtime's network poller every time it was set.
var watching = struct {
	mu      sync.Mutex
	set     map[*clientWatch]struct{}
	started bool
}{set: map[*clientWatch]struct{}{}}

// lookEvery is how often lookAtClients runs: a watched request is first looked at between one
// clientCheckInterval and that plus lookEvery after it began.
const lookEvery = clientCheckInterval / 4

func lookAtClients() {
	var due []*clientWatch
	for now := range time.NewTicker(lookEvery).C { // for the life of the process
		watching.mu.Lock()
		for w := range watching.set {
			if now.Sub(w.looked) >= clientCheckInterval {
				w.looked = now
				due = append(due, w)
			}
		}
		watching.mu.Unlock()
		for i, w := range due {
			w.check()
			due[i] = nil
		}
		due = due[:0]
	}
}

type clientWatch struct {
	raw    syscall.RawConn
	cancel context.CancelCauseFunc
	looked time.Time // guarded by watching.mu

	mu      sync.Mutex // held during a look, so that stop waits for it
	stopped bool
}

func (w *clientWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if peerClosed(w.raw) {
		w.cancel(ErrClientGone)
		w.stopped = true // looked at no more
	}
}

func (w *clientWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	watching.mu.Lock()
	delete(watching.set, w)
	watching.mu.Unlock()
}

// IsClientGone says whether err is (or comes from) a request cancelled because its client left.
func IsClientGone(err error) bool { return errors.Is(err, ErrClientGone) }
