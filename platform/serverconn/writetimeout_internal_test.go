package serverconn

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// pair returns a server connection wrapped as the listener wraps it (write timeout d, unsent
// data bounded) and its client, whose receive buffer is small when small is set.
func pair(t *testing.T, d time.Duration, small bool) (*lingeringConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialer := net.Dialer{}
	if small {
		dialer.Control = func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}
	}
	client, err := dialer.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	s, err := Lingering(ln, d).Accept()
	if err != nil {
		t.Fatal(err)
	}
	sc := s.(*lingeringConn)
	t.Cleanup(func() { sc.Close() })
	return sc, client.(*net.TCPConn)
}

// A client that never reads: the write blocked on it fails after the timeout (at most a quarter
// more), the connection is reset, and later writes fail at once.
func TestWriteTimeoutBlockedWrite(t *testing.T) {
	const d = 400 * time.Millisecond
	s, client := pair(t, d, true)
	start := time.Now()
	_, err := s.Write(make([]byte, 8<<20))
	took := time.Since(start)
	if !IsWriteStalled(err) {
		t.Fatalf("write to a client that never reads: %v after %s, want the stall error", err, took)
	}
	if took < d || took > d*5/4+300*time.Millisecond {
		t.Errorf("the stalled write failed after %s, want %s to %s", took, d, d*5/4)
	}
	if _, err := s.Write([]byte("x")); !IsWriteStalled(err) {
		t.Errorf("a later write: %v", err)
	}
	s.Close()
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, client)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the client read to %v, want a reset", err)
	}
}

// A response the kernel took whole, never read: the server's wait for the next request ends
// after the timeout.
func TestWriteTimeoutResponseLeftInTheKernel(t *testing.T) {
	const d = 400 * time.Millisecond
	s, _ := pair(t, d, true)
	if _, err := s.Write(make([]byte, 32<<10)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Second)) // the idle timeout, say
	_, err := s.Read(make([]byte, 1))
	if took := time.Since(start); !IsWriteStalled(err) || took > d*5/4+300*time.Millisecond {
		t.Errorf("read after a response nobody takes: %v after %s, want the stall error within %s", err, took, d*5/4)
	}
}

// A client that reads slowly but steadily is never cut, however long the response takes; one
// that took everything leaves the connection alone.
func TestWriteTimeoutSteadyReader(t *testing.T) {
	const d = 200 * time.Millisecond
	s, client := pair(t, d, true)
	const size = 300 << 10
	got := make(chan int64, 1)
	go func() {
		var n int64
		buf := make([]byte, 8<<10)
		for n < size {
			k, err := client.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond) // about 400 KB/s at most
		}
		got <- n
	}()
	start := time.Now()
	if _, err := s.Write(make([]byte, size)); err != nil {
		t.Fatalf("write to a steady reader failed after %s: %v", time.Since(start), err)
	}
	if n := <-got; n != size {
		t.Fatalf("the reader got %d bytes of %d", n, size)
	}
	if took := time.Since(start); took < 3*d {
		t.Logf("the response took %s, not several timeouts: the test proves less", took)
	}
	// Everything taken: the connection waits for a next request as long as its own deadline.
	_ = s.SetReadDeadline(time.Now().Add(3 * d))
	if _, err := s.Read(make([]byte, 1)); IsWriteStalled(err) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("idle read after a response taken whole: %v, want the read deadline", err)
	}
}
