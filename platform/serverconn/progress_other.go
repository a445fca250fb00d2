//go:build !linux

package serverconn

import "syscall"

const progressSupported = false

func tcpProgress(syscall.Conn) (acked uint64, queued uint64, ok bool) { return 0, 0, false }

func limitUnsent(syscall.Conn) {}
