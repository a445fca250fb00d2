package stats_test

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// The same tests through PgBouncer in transaction pooling mode and on the partitioned layout
// (contract section 6.6): the answers must not change.

func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.ThroughPgBouncer,
		TestDistinctValuesAndUniqueCountsMatchSQL, TestValuesRoundTripAsFilters, TestBadInputIsRefused, TestRecordsCount)
}

func TestOnPartitionedLayout(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.Partitioned,
		TestDistinctValuesAndUniqueCountsMatchSQL, TestValuesRoundTripAsFilters, TestBadInputIsRefused, TestRecordsCount)
}
