package procstat

import (
	"sync"
	"time"
)

// RSSSampler follows a process's resident memory at a fixed interval and keeps the highest
// value: the peak of one measurement, where VmHWM alone would be the peak since the process
// started.
type RSSSampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak int64
	err  error // the first failed read
}

// SampleRSS starts sampling pid's VmRSS every interval (the benchmarks use 5 ms).
func SampleRSS(pid int, interval time.Duration) *RSSSampler {
	s := &RSSSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.note(RSS(pid))
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *RSSSampler) note(v int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.peak = max(s.peak, v)
}

// Stop ends sampling and returns the highest VmRSS seen, one more sample taken now, and, when
// withHWM, the kernel's high-water mark (VmHWM) too, so that a spike between two samples is not
// missed when the process lived for this measurement only. The error is the first failed read.
func (s *RSSSampler) Stop(withHWM bool) (int64, error) {
	close(s.stop)
	<-s.done
	s.note(RSS(s.pid))
	if withHWM {
		s.note(PeakRSS(s.pid))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.err
}
