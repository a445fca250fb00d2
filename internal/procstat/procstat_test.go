package procstat

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	// A command with a space and a parenthesis, as the kernel writes it.
	st, err := parseStat("4242 (post (gres) x) S 17 4242 4242 0 -1 4194560 1 0 0 0 250 31 7 3 20 0 1 0 5 1000 10 0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, PPID: 17, Comm: "post (gres) x", State: 'S', UTime: 250, STime: 31, CUTime: 7, CSTime: 3}
	if st != want {
		t.Errorf("parseStat = %+v, want %+v", st, want)
	}
	if got := st.CPU(); got != 2810*1e6 {
		t.Errorf("CPU = %s", got)
	}
	if _, err := parseStat("4242 (x) S 17"); err == nil {
		t.Error("a short stat: no error")
	}
}

// This process can be read like any other.
func TestSelf(t *testing.T) {
	pid := os.Getpid()
	rss, err := RSS(pid)
	if err != nil || rss <= 0 {
		t.Fatalf("RSS = %d, %v", rss, err)
	}
	if hwm, err := PeakRSS(pid); err != nil || hwm < rss {
		t.Errorf("PeakRSS = %d, %v (RSS %d)", hwm, err, rss)
	}
	st, err := ReadStat(pid)
	if err != nil || st.PID != pid || st.PPID != os.Getppid() {
		t.Errorf("ReadStat = %+v, %v", st, err)
	}
	if m, err := ReadMachine(); err != nil || m.Busy <= 0 || m.Total < m.Busy {
		t.Errorf("ReadMachine = %+v, %v", m, err)
	}
	if mem, err := MemInfo("MemTotal:"); err != nil || mem <= 0 {
		t.Errorf("MemInfo = %d, %v", mem, err)
	}
	if _, err := RSS(-1); err == nil {
		t.Error("RSS of no process: no error")
	}
	s := SampleRSS(pid, 1e6)
	if peak, err := s.Stop(true); err != nil || peak < rss/2 {
		t.Errorf("sampler: %d, %v", peak, err)
	}
}
