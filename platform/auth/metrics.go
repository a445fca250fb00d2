package auth

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// meterName is the instrumentation scope of the checker's instruments.
const meterName = "github.com/emsanalytics/emsquery/platform/auth"

// newReloadFailures is the counter of keys-file reloads that failed (auth.keys.reload.failures;
// Prometheus: auth_keys_reload_failures_total): a file that cannot be read or does not parse
// leaves the old keys in force, which nobody notices until a new key is refused, so it is
// counted for alerting, besides the log line and healthz.
func newReloadFailures(mp metric.MeterProvider) (metric.Int64Counter, error) {
	c, err := mp.Meter(meterName).Int64Counter("auth.keys.reload.failures",
		metric.WithDescription("Reloads of AUTHENTICATION__API_KEYS_FILE that failed (the file could not be read or did not parse); the keys in force stayed."),
		metric.WithUnit("{reload}"))
	if err != nil {
		return nil, fmt.Errorf("auth metrics: %w", err)
	}
	return c, nil
}

// KeysFileState is how the keys file's last reload went.
type KeysFileState struct {
	// FailedAt is when the last reload failed; zero when the last reload (or the read at
	// start-up) worked.
	FailedAt time.Time
	// Reason says why, in one short line without keys or hashes (it may name the file).
	Reason string
}

// maxReasonLength bounds the reason kept for healthz.
const maxReasonLength = 200

// KeysFile is the keys file's state; ok is false when there is no keys file.
func (c *Checker) KeysFile() (KeysFileState, bool) {
	if c.file == "" {
		return KeysFileState{}, false
	}
	if st := c.fileState.Load(); st != nil {
		return *st, true
	}
	return KeysFileState{}, true
}

// reloadFailed records a failed reload: counted, and shown in healthz until a reload works.
func (c *Checker) reloadFailed(reason string) {
	reason = strings.Join(strings.Fields(reason), " ")
	if len(reason) > maxReasonLength {
		reason = reason[:maxReasonLength] + "..."
	}
	c.fileState.Store(&KeysFileState{FailedAt: time.Now(), Reason: reason})
	c.reloadFailures.Add(context.Background(), 1)
}

func (c *Checker) reloadWorked() { c.fileState.Store(nil) }
