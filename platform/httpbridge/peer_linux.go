package httpbridge

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
func peerClosed(raw syscall.RawConn) bool {
	var closed bool
	var buf [1]byte
	err := raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case err == syscall.EAGAIN || err == syscall.EINTR:
		default: // ECONNRESET, ETIMEDOUT, ...: the connection is broken
			closed = true
		}
		return true // never wait for the socket to become readable
	})
	// A read deadline the server set that has passed says nothing about the peer.
	return closed || err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}
