package deploytest

import (
	"os"
	"path/filepath"
	"testing"
)

// HelmVersion is the Helm that scripts/helm.sh builds into ~/.cache/emsquery/ for the chart
// tests: Helm 3, the release line most clusters' tooling still runs.
const HelmVersion = "v3.22.0"

// Helm returns the pinned helm binary (HELM_BIN names another), or skips the test, failing it
// when CI is set: make test-deps builds it (scripts/helm.sh).
func Helm(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("HELM_BIN"); bin != "" {
		return bin
	}
	cache, err := os.UserCacheDir()
	if err == nil {
		bin := filepath.Join(cache, "emsquery", "helm-"+HelmVersion, "helm")
		if _, err = os.Stat(bin); err == nil {
			return bin
		}
	}
	Unavailable(t, "helm "+HelmVersion+" (scripts/helm.sh builds it; make test-deps runs that)", err)
	return ""
}
