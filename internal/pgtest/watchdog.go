package pgtest

import (
	"os/exec"
	"syscall"
)

// watchdogScript waits for EOF on stdin, which comes when the test process closes the lifeline
// or dies in any way, then makes sure the server is gone and removes the cluster directory.
// It only signals a pid whose working directory is the cluster's data directory, so a stale pid
// file can never make it kill an unrelated process. SIGQUIT is PostgreSQL's immediate shutdown.
const watchdogScript = `trap '' HUP INT
while read -r _; do :; done
dir=$1
pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null)
if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$dir/data" ]; then
  kill -QUIT "$pid" 2>/dev/null
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$dir/data" ] && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i+1))
  done
  kill -KILL "$pid" 2>/dev/null
fi
rm -rf "$dir"
`

// startWatchdog covers what deferred clean-up cannot: a test that panics crashes the process
// from its own goroutine, and the -timeout alarm or SIGKILL run no Go code at all. The watchdog
// runs in its own session so a Ctrl-C to the terminal's process group does not kill it first.
func (c *Cluster) startWatchdog() error {
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgtest-watchdog", c.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// No stdout/stderr: an inherited pipe would keep `go test` waiting for this process.
	w, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	c.watchdog, c.lifeline = cmd, w
	return nil
}
