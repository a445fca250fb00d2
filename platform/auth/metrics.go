package auth

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// reloadFailuresName is the counter of keys-file reloads that left the keys in force as they were
// (Prometheus: emsquery_auth_keys_reload_failures_total), for an alert: the log says why, but
// nobody reads it until a new key does not work.
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
