package serverconn

import (
	"syscall"

	"golang.org/x/sys/unix"
)

const progressSupported = true

// tcpProgress reads the socket's TCP_INFO: how many bytes the client has acknowledged so far,
// and how many are still queued for it (sent but not acknowledged, or not sent yet). ok is false
// when the socket cannot be read (closed).
func tcpProgress(conn syscall.Conn) (acked uint64, queued uint64, ok bool) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var info *unix.TCPInfo
	cerr := raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if cerr != nil || err != nil {
		return 0, 0, false
	}
	// Unacked counts segments; any is bytes queued. Notsent_bytes is the rest of the queue.
	queued = uint64(info.Notsent_bytes)
	if info.Unacked > 0 {
		queued++
	}
	return info.Bytes_acked, queued, true
}

// unsentLimit is the most of a response the kernel keeps queued for a client beyond what is on
// the way to it (TCP_NOTSENT_LOWAT). Without it, Linux lets a socket's send buffer grow to
// net.ipv4.tcp_wmem's maximum (4 MiB by default) whatever the client takes: 2,000 clients that
// ask for a 1 MB file and never read pin 2 GB of kernel memory, past the system's tcp_mem
// limit, where every socket of the machine (the database's too) is starved of buffers and the
// server's writes spin on a socket that says it is writable and then takes nothing. With it, a
// client that does not read holds this much and its own receive window; the response waits in
// the server's write (where APP__WRITE_TIMEOUT ends it). Bytes in flight to a fast client are
// not counted, so its throughput does not suffer; a response is handed to the kernel in pieces
// of about this size.
const unsentLimit = 128 << 10

// limitUnsent sets TCP_NOTSENT_LOWAT on conn (best effort: a socket that refuses keeps the
// kernel's default).
func limitUnsent(conn syscall.Conn) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, unsentLimit)
	})
}
