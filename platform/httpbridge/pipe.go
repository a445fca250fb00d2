package httpbridge

import (
	"io"
	"sync"
)

// pipeBuffers and pipeBufferSize bound what a streamed body holds between its writer and the
// client: its writer may run ahead of fasthttp's sending by this many buffers, so that
// producing the answer (reading rows, encoding them) and sending it overlap on two processors
// instead of taking turns, as they did through io.Pipe.
const (
	pipeBuffers    = 4
	pipeBufferSize = 64 << 10
)

// Pipe is a body written while it is sent (see SendStream): what Write takes is copied into one
// of pipeBuffers buffers, handed to the reader when full (or at Close), and the buffer comes
// back when the reader has read it. Write waits while all buffers are in flight; it fails once
// the reader is closed (the client's connection failed).
type Pipe struct {
	full chan []byte   // filled buffers, in order
	free chan []byte   // read buffers, to fill again
	gone chan struct{} // closed when the reader is closed
	made int           // buffers made so far
	buf  []byte        // the writer's buffer being filled

	closeOnce sync.Once
	err       error // the writer's, once full is closed

	rbuf    []byte // the reader's buffer being read
	rest    []byte // what is left of it
	goneErr sync.Once
}

// NewPipe returns an empty Pipe.
func NewPipe() *Pipe {
	return &Pipe{full: make(chan []byte, pipeBuffers), free: make(chan []byte, pipeBuffers+1), gone: make(chan struct{})}
}

// Write copies p into the pipe.
func (p *Pipe) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		if p.buf == nil {
			select {
			case p.buf = <-p.free:
			default:
				if p.made <= pipeBuffers {
					p.made++
					p.buf = make([]byte, 0, pipeBufferSize)
				} else {
					select {
					case p.buf = <-p.free:
					case <-p.gone:
						return n - len(b), errClientGone
					}
				}
			}
		}
		k := copy(p.buf[len(p.buf):cap(p.buf)], b)
		p.buf, b = p.buf[:len(p.buf)+k], b[k:]
		if len(p.buf) == cap(p.buf) {
			if err := p.send(); err != nil {
				return n - len(b), err
			}
		}
	}
	return n, nil
}

// Swap hands b to the reader whole, after what was written before, instead of copying it as
// Write does, and returns a buffer of pipeBufferSize to fill next (empty, and nil with an
// error). b becomes the pipe's: its writer must not touch it again. A streamed list writes its
// chunks so (platform/gqljson): one copy less of the whole body.
func (p *Pipe) Swap(b []byte) ([]byte, error) {
	if len(p.buf) > 0 {
		if err := p.send(); err != nil {
			return nil, err
		}
	}
	p.buf = nil
	if len(b) > 0 {
		select {
		case p.full <- b:
		case <-p.gone:
			return nil, errClientGone
		}
	}
	select {
	case next := <-p.free:
		return next, nil
	default:
	}
	if p.made <= pipeBuffers {
		p.made++
		return make([]byte, 0, pipeBufferSize), nil
	}
	select {
	case next := <-p.free:
		return next, nil
	case <-p.gone:
		return nil, errClientGone
	}
}

func (p *Pipe) send() error {
	select {
	case p.full <- p.buf:
		p.buf = nil
		return nil
	case <-p.gone:
		return errClientGone
	}
}

// CloseWithError ends the body: with nil, after what was written; otherwise the reader gets err
// after what was written (fasthttp then cuts the chunked body).
func (p *Pipe) CloseWithError(err error) error {
	p.closeOnce.Do(func() {
		if len(p.buf) > 0 {
			_ = p.send()
		}
		p.err = err
		close(p.full)
	})
	return nil
}

// Close ends the body after what was written.
func (p *Pipe) Close() error { return p.CloseWithError(nil) }

// Read reads the body as written.
func (p *Pipe) Read(b []byte) (int, error) {
	for len(p.rest) == 0 {
		if p.rbuf != nil {
			// Dropped when the free buffers are enough already: buffers handed over by Swap
			// add to those the pipe made.
			select {
			case p.free <- p.rbuf[:0]:
			default:
			}
			p.rbuf = nil
		}
		buf, ok := <-p.full
		if !ok {
			if p.err != nil {
				return 0, p.err
			}
			return 0, io.EOF
		}
		p.rbuf, p.rest = buf, buf
	}
	n := copy(b, p.rest)
	p.rest = p.rest[n:]
	return n, nil
}

// closeRead tells the writer that nothing more is read.
func (p *Pipe) closeRead() { p.goneErr.Do(func() { close(p.gone) }) }
