package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var binDir struct {
	once sync.Once
	dir  string
	err  error
}

// findBinDir locates initdb/pg_ctl/postgres once per process, because the fallback may install
// a package, which must not happen once per test.
func findBinDir() (string, error) {
	binDir.once.Do(func() {
		binDir.dir, binDir.err = lookBinDir()
	})
	return binDir.dir, binDir.err
}

func lookBinDir() (string, error) {
	if d := os.Getenv("PGTEST_BINDIR"); d != "" {
		if hasServer(d) {
			return d, nil
		}
		return "", fmt.Errorf("PGTEST_BINDIR=%s holds no initdb, pg_ctl and postgres", d)
	}
	if d, ok := searchBinDir(); ok {
		return d, nil
	}
	// Fresh CI machines may lack the server; the project's script installs it (as root) and
	// prints where it went.
	script := ensureScript()
	if st, err := os.Stat(script); err == nil && st.Mode()&0o111 != 0 {
		var stderr bytes.Buffer
		cmd := exec.Command(script)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("PostgreSQL server binaries not found and %s failed: %v\n%s", script, err, tail(stderr.String(), 20))
		}
		d := strings.TrimSpace(lastLine(string(out)))
		if hasServer(d) {
			return d, nil
		}
		return "", fmt.Errorf("%s printed %q, which holds no initdb, pg_ctl and postgres", script, d)
	}
	return "", errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: tried pg_config --bindir, /usr/lib/postgresql/*/bin and PATH; install the 'postgresql' package or set PGTEST_BINDIR")
}

func searchBinDir() (string, bool) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); hasServer(d) {
			return d, true
		}
	}
	// Debian keeps the server outside PATH, one directory per major version; take the newest.
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if hasServer(d) {
			return d, true
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if d := filepath.Dir(p); hasServer(d) {
			return d, true
		}
	}
	return "", false
}

// majorOf reads the version out of /usr/lib/postgresql/<version>/bin so that 10 sorts after 9.
func majorOf(dir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
	if err != nil {
		return -1
	}
	return v
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// ensureScript finds scripts/ensure-postgres.sh from this source file, since tests run with the
// package directory, not the module root, as working directory.
func ensureScript() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "ensure-postgres.sh")
}

// serverIdentity says whom the server binaries run as: nil means the current user. initdb and
// pg_ctl refuse to run as root, so root hands them to the "postgres" system user.
func serverIdentity() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, the server must run as the 'postgres' system user, which is missing (install the 'postgresql' package): %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user postgres: uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user postgres: gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// serverEnv is the environment without PG* variables, which would otherwise redirect pg_ctl
// and the server (PGDATA, PGPORT, ...) to whatever the developer's shell points at.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// tempParents lists where cluster directories may go, best first. A RAM disk makes initdb and
// CREATE DATABASE about three times faster than ext4 even with fsync off (file creation
// dominates), so a roomy /dev/shm comes first; PGTEST_TMPDIR overrides both.
func tempParents(cred *syscall.Credential) []string {
	if d := os.Getenv("PGTEST_TMPDIR"); d != "" {
		return []string{d}
	}
	var dirs []string
	var fs syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	if syscall.Statfs("/dev/shm", &fs) == nil && fs.Type == tmpfsMagic && fs.Bavail*uint64(fs.Bsize) >= 2<<30 {
		dirs = append(dirs, "/dev/shm")
	}
	if d := os.TempDir(); reachable(d, cred) {
		dirs = append(dirs, d)
	}
	return append(dirs, "/tmp")
}

// reachable says whether the server's user can get into dir: a root process's TMPDIR may be
// private to root.
func reachable(dir string, cred *syscall.Credential) bool {
	if cred == nil {
		return true
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return false
		}
		sys, _ := st.Sys().(*syscall.Stat_t)
		if st.Mode().Perm()&0o001 == 0 && (sys == nil || sys.Uid != cred.Uid) {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tail keeps the last n lines, which is where PostgreSQL explains why it did not start.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
