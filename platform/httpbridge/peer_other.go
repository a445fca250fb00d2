//go:build !linux

package httpbridge

import "syscall"

// peerClosed cannot tell on this system; requests run until they end or reach
// LIMITS__REQUEST_TIMEOUT.
func peerClosed(syscall.RawConn) bool { return false }
