//go:build linux

package clientwatch

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func rawOf(t *testing.T, c net.Conn) syscall.RawConn {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestPeerClosed(t *testing.T) {
	server, client := tcpPair(t)
	raw := rawOf(t, server)
	if peerClosed(raw) {
		t.Fatal("an open, quiet connection looks closed")
	}
	// Bytes of a next (pipelined) request: still open, and the bytes stay for the server.
	if _, err := io.WriteString(client, "GET /next"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if peerClosed(raw) {
		t.Fatal("a connection with unread bytes looks closed")
	}
	// A read deadline of the server's that passed says nothing about the peer.
	if err := server.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if peerClosed(raw) {
		t.Fatal("a passed read deadline looks like a closed connection")
	}
	if err := server.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := server.Read(buf)
	if err != nil || string(buf[:n]) != "GET /next" {
		t.Fatalf("the peeked bytes were consumed: read %q, %v", buf[:n], err)
	}
	client.Close()
	time.Sleep(50 * time.Millisecond)
	if !peerClosed(raw) {
		t.Fatal("a connection the client closed does not look closed")
	}
	// A passed read deadline (APP__READ_TIMEOUT, set when the request began) does not blind
	// the look either.
	if err := server.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if !peerClosed(raw) {
		t.Fatal("a connection the client closed does not look closed once the read deadline passed")
	}
}

func TestWatchClient(t *testing.T) {
	server, client := tcpPair(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := WatchClient(server, cancel)
	defer stop()
	time.Sleep(2 * clientCheckInterval)
	if ctx.Err() != nil {
		t.Fatal("cancelled while the client is there")
	}
	client.Close()
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("not cancelled 2s after the client left")
	}
	if !errors.Is(context.Cause(ctx), ErrClientGone) {
		t.Errorf("cause %v, want ErrClientGone", context.Cause(ctx))
	}

	// After stop, nothing is cancelled any more.
	server2, client2 := tcpPair(t)
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	WatchClient(server2, cancel2)()
	client2.Close()
	time.Sleep(2 * clientCheckInterval)
	if ctx2.Err() != nil {
		t.Error("cancelled after stop")
	}
}
