package reports_test

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// The same tests through PgBouncer in transaction pooling mode and on the partitioned layout
// (contract section 6.6): the answers must not change. The export's tests of shutdown and
// client disconnects are about the service's own connection handling and run directly only.

func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.ThroughPgBouncer,
		TestMainReportRowsAndTotal, TestMainReportPaging, TestMainReportBadArguments, TestMainReportSummary,
		TestLookups, TestLookupsColumns, TestEndpointsHaveTheirOwnSchemas,
		TestExportEqualsMainReport, TestExportFormat, TestExportBadArguments)
}

func TestOnPartitionedLayout(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.Partitioned,
		TestMainReportRowsAndTotal, TestMainReportPaging, TestMainReportSummary, TestLookups, TestLookupsColumns,
		TestExportEqualsMainReport)
}
