// Package procstat reads what Linux's /proc says about a process (resident memory, processor
// time, parent) and about the machine (processor time, memory), for the tools that measure the
// service: bench/run, bench/exportbench, bench/scale and cmd/soak. It does not import testing,
// so that commands can use it; tests reach it through the same functions.
package procstat

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Tick is one clock tick of /proc's processor times: USER_HZ, 100 on every Linux the tools run
// on (sysconf(_SC_CLK_TCK) needs cgo to ask, and the kernel fixes it at 100 for user space).
const Tick = 10 * time.Millisecond

// RSS is the process's resident memory now (VmRSS), in bytes.
func RSS(pid int) (int64, error) { return statusBytes(pid, "VmRSS:") }

// PeakRSS is the kernel's high-water mark of the process's resident memory (VmHWM), in bytes:
// it catches a peak that falls between two samples.
func PeakRSS(pid int) (int64, error) { return statusBytes(pid, "VmHWM:") }

func statusBytes(pid int, field string) (int64, error) {
	return kBLine("/proc/"+strconv.Itoa(pid)+"/status", field)
}

// MemInfo is a line of /proc/meminfo ("MemTotal:", "MemAvailable:"), in bytes.
func MemInfo(field string) (int64, error) { return kBLine("/proc/meminfo", field) }

// kBLine reads a "<field> <n> kB" line of a /proc file, in bytes.
func kBLine(path, field string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %s %q: %w", path, field, rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no %s line", path, field)
}

// Stat is what /proc/<pid>/stat says of a process, processor times in clock ticks (Tick).
type Stat struct {
	PID, PPID    int
	Comm         string // the command name, as the kernel keeps it (15 characters at most)
	State        byte   // R running, S sleeping, Z zombie, ...
	UTime, STime int64  // the process's own user and system time
	// CUTime and CSTime are the times of its children that it has waited for.
	CUTime, CSTime int64
}

// CPU is the process's own user and system time.
func (s Stat) CPU() time.Duration { return time.Duration(s.UTime+s.STime) * Tick }

// CPUWithChildren adds the time of the children it has waited for.
func (s Stat) CPUWithChildren() time.Duration {
	return time.Duration(s.UTime+s.STime+s.CUTime+s.CSTime) * Tick
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) { return readStat(strconv.Itoa(pid)) }

// Self is ReadStat of this process.
func Self() (Stat, error) { return readStat("self") }

func readStat(pid string) (Stat, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return Stat{}, fmt.Errorf("read process %s: %w", pid, err)
	}
	return parseStat(string(b))
}

// parseStat reads "pid (comm) state ppid ... utime stime cutime cstime ...". The command may
// hold spaces and parentheses, so the fields after it start after the last ')'.
func parseStat(s string) (Stat, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("process stat %.80q: no command", s)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return Stat{}, fmt.Errorf("process stat %.80q: %d fields", s, len(f))
	}
	st := Stat{Comm: s[open+1 : end], State: f[0][0]}
	var errs []error
	num := func(v string) int64 {
		n, err := strconv.ParseInt(v, 10, 64)
		errs = append(errs, err)
		return n
	}
	st.PID = int(num(strings.TrimSpace(s[:open])))
	// f[0] is the state, f[1] the parent; utime is the stat's 14th field, f[11] here.
	st.PPID = int(num(f[1]))
	st.UTime, st.STime, st.CUTime, st.CSTime = num(f[11]), num(f[12]), num(f[13]), num(f[14])
	if err := errors.Join(errs...); err != nil {
		return Stat{}, fmt.Errorf("process stat %.80q: %w", s, err)
	}
	return st, nil
}

// CPUTime is the process's user and system time so far.
func CPUTime(pid int) (time.Duration, error) {
	st, err := ReadStat(pid)
	return st.CPU(), err
}

// Processes reads the stat of every process that still runs when it gets to it (one that ends
// in between is left out).
func Processes() ([]Stat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Stat
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if st, err := readStat(e.Name()); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

// Machine is the machine's processor time since boot over all processors, in clock ticks:
// Total, and Busy (Total without idle and iowait).
type Machine struct{ Total, Busy int64 }

// ReadMachine reads the first line of /proc/stat.
func ReadMachine() (Machine, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, fmt.Errorf("read /proc/stat: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return Machine{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var m Machine
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Machine{}, fmt.Errorf("/proc/stat %q: %w", line, err)
		}
		m.Total += n
		if i != 3 && i != 4 { // idle, iowait
			m.Busy += n
		}
	}
	return m, nil
}
