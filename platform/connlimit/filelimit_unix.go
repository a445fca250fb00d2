//go:build unix

package connlimit

import "syscall"

// fileLimit is the process's open-file limit (the soft one, which Go raises to the hard one at
// start-up).
func fileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return r.Cur, true
}
