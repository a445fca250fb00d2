package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Root is the repository's top folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Unavailable skips the test for want, a missing component, or fails it when CI is set: there
// a missing component is a broken pipeline, not a reason to check less.
func Unavailable(t testing.TB, want string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not available (CI is set, so this fails instead of skipping): %v", want, err)
	}
	t.Skipf("%s not available, skipping (with CI set this fails): %v", want, err)
}

// Tool finds a program on PATH or at one of paths, or calls Unavailable.
func Tool(t testing.TB, name, install string, paths ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range paths {
		if info, err := os.Stat(p); err == nil && !info.IsDir() {
			return p
		}
	}
	Unavailable(t, name+" ("+install+")", exec.ErrNotFound)
	return ""
}

// EditEnv sets keys in env-file text as an operator editing it would: each key's line
// ("KEY=..." or a commented "# KEY=...") gets the new value. A key without such a line fails
// the test, so that the file and the instructions that name its keys stay in step.
func EditEnv(t testing.TB, text string, set map[string]string) string {
	t.Helper()
	lines := strings.Split(text, "\n")
	for k, v := range set {
		found := false
		for i, line := range lines {
			bare := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
			if strings.HasPrefix(bare, k+"=") {
				lines[i] = k + "=" + v
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("no %s= line to edit", k)
		}
	}
	return strings.Join(lines, "\n")
}
