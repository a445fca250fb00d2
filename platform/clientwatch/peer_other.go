//go:build !linux

package clientwatch

import "syscall"

// peerClosed cannot tell on this system; requests run until they end or reach their bound
// (Bounded's timeout: LIMITS__REQUEST_TIMEOUT for GraphQL).
func peerClosed(syscall.RawConn) bool { return false }
