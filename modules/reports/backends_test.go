package reports_test

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// The same tests through PgBouncer in transaction pooling mode and on the partitioned layout
// (contract section 6.6): the answers and the refusals must not change. backendTests is every
// test of the reporting endpoints and the export except those about the service's own handling
// of keys and connections (TestExportAuth, TestExportClientDisconnectStopsQuery,
// TestExportStopsAtShutdown), which run directly only; each says why.
var backendTests = []func(*testing.T){
	TestMainReportRowsAndTotal, TestMainReportPaging, TestMainReportBadArguments, TestMainReportSummary,
	TestLookups, TestLookupsColumns, TestEndpointsHaveTheirOwnSchemas,
	TestExportEqualsMainReport, TestExportFormat, TestExportBadArguments,
}

func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.ThroughPgBouncer, backendTests...)
}

func TestOnPartitionedLayout(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.Partitioned, backendTests...)
}
