package clientwatch

import (
	"errors"
	"os"
	"syscall"
)

// peerClosed says whether the other end of the socket has closed it: a read would return end of
// file or a reset. It peeks (MSG_PEEK) without waiting (MSG_DONTWAIT), so bytes the client
// already sent for its next request stay in the socket for the server to read.
//
// A client that half-closes its sending side after the request (shutdown(SHUT_WR)) looks the
// same as one that went away; HTTP clients do not do that.
//
// The look goes through Control, not Read: RawConn.Read fails at once, without looking, when
// the connection's read deadline has passed, and the server's read deadline (APP__READ_TIMEOUT,
// set when the request began) passes while a long request runs. MSG_DONTWAIT makes the peek
// return at once without the poller that Read would wait on.
func peerClosed(raw syscall.RawConn) bool {
	var closed bool
	var buf [1]byte
	err := raw.Control(func(fd uintptr) {
		for {
			n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case err == syscall.EINTR:
				continue
			case err == nil:
				closed = n == 0
			case err == syscall.EAGAIN:
			default: // ECONNRESET, ETIMEDOUT, ...: the connection is broken
				closed = true
			}
			return
		}
	})
	// Control fails only when the socket is closed already: nobody reads an answer on it.
	return closed || err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}
