package auth

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// reloadFailuresName is the counter of keys-file reloads that left the keys in force as they were
// (Prometheus: emsquery_auth_keys_reload_failures_total), for an alert: the log says why, but
// nobody reads it until a new key does not work. Healthz shows the last failure too (KeysFile).
const reloadFailuresName = "emsquery.auth.keys.reload.failures"

func newReloadFailures(mp metric.MeterProvider) (metric.Int64Counter, error) {
	c, err := mp.Meter("github.com/emsanalytics/emsquery/platform/auth").Int64Counter(reloadFailuresName,
		metric.WithDescription("Reloads of AUTHENTICATION__API_KEYS_FILE that failed (reason: read, the file could not be read; invalid, it did not parse); the keys in force stayed"),
		metric.WithUnit("{reload}"))
	if err != nil {
		return nil, fmt.Errorf("create metric %s: %w", reloadFailuresName, err)
	}
	return c, nil
}

// countReloadFailure counts a failed reload; a Checker made without NewChecker counts nothing.
func (c *Checker) countReloadFailure(reason string) {
	if c.reloadFailures != nil {
		c.reloadFailures.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", reason)))
	}
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

// reloadFailed records a failed reload for healthz until a reload works.
func (c *Checker) reloadFailed(reason string) {
	reason = strings.Join(strings.Fields(reason), " ")
	if len(reason) > maxReasonLength {
		reason = reason[:maxReasonLength] + "..."
	}
	c.fileState.Store(&KeysFileState{FailedAt: time.Now(), Reason: reason})
}

func (c *Checker) reloadWorked() { c.fileState.Store(nil) }
