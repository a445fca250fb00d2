package resources_test

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// The same tests through PgBouncer in transaction pooling mode and on the partitioned layout
// (contract section 6.6): the answers, paging included, must not change.
var backendTests = []func(*testing.T){
	TestResourcesOnFixture, TestStationResourcesOnFixture, TestEmptyDatabase, TestResourcesPaging,
}

func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.ThroughPgBouncer, backendTests...)
}

func TestOnPartitionedLayout(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.Partitioned, backendTests...)
}
