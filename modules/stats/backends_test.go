package stats_test

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// The same tests through PgBouncer in transaction pooling mode and on the partitioned layout
// (contract section 6.6): the answers must not change. backendTests is every test of /graphql
// that asks the database (answers and refused input, record_stats, record_series, every
// operator); the rest of the package's tests are unit tests of the SQL it builds and run once.
var backendTests = []func(*testing.T){
	TestDistinctValuesAndUniqueCountsMatchSQL, TestValuesRoundTripAsFilters, TestBadInputIsRefused, TestRecordsCount,
	TestRecordStatsMatchesSQL, TestRecordStatsFixture, TestRecordStatsBadInput,
	TestRecordSeriesMatchesSQL, TestRecordSeriesCountsEveryRecordOnce, TestRecordSeriesPointsLimit, TestRecordSeriesBadInput,
	TestEveryOperatorOnEveryColumn, TestContainsIsNotAPattern, TestBadFilterCombinations,
}

func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.ThroughPgBouncer, backendTests...)
}

func TestOnPartitionedLayout(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.Partitioned, backendTests...)
}
