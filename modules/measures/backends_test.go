package measures_test

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// The same answers through PgBouncer in transaction pooling mode and on the partitioned
// layout (contract 6.6), where the time columns are added to the partitioned table and
// inherited by its partitions.
var backendTests = []func(*testing.T){
	TestIntervalStatsMatchesSQL, TestDemandGridMatchesSQL, TestPeriodComparisonMatchesSQL,
	TestUnitHourUtilizationMatchesSQL, TestBadInput,
}

func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.ThroughPgBouncer, backendTests...)
}

func TestOnPartitionedLayout(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.Partitioned, backendTests...)
}
