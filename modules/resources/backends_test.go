package resources_test

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// The same tests through PgBouncer in transaction pooling mode (contract section 6.6).
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.ThroughPgBouncer, TestResourcesOnFixture, TestStationResourcesOnFixture)
}
