package otel

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
)

// Service identifies the running program in the resource (service.name, service.version).
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it.
type Service struct {
	Name    string
	Version string
}

// newResource describes the service: service.name and service.version from the build, the SDK's
// telemetry.sdk.* attributes, then OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, which win.
// fromEnv is OTEL_RESOURCE_ATTRIBUTES, quoted in the error when the SDK cannot parse it.
func newResource(svc Service, fromEnv string) (*resource.Resource, error) {
	name := svc.Name
	if name == "" {
		name = "emsquery"
	}
	version := svc.Version
	if version == "" {
		version = "dev"
	}
	res, err := resource.New(context.Background(),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(
			attribute.String("service.name", name),
			attribute.String("service.version", version),
		),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %q: %w", fromEnv, err)
	}
	return res, nil
}

// redactURL drops a user name and password from an endpoint before it is logged.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}

// firstSet returns the first of values that is not blank, trimmed: a signal-specific variable
// before the general one.
func firstSet(values ...string) string {
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
