package patients_test

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// The same tests through PgBouncer in transaction pooling mode and, for fact_oxygen, whose key
// to fact_record the partitioned layout drops, on that layout (contract section 6.6).

func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.ThroughPgBouncer, TestPatientsOnFixture, TestOxygensOnFixture)
}

func TestOnPartitionedLayout(t *testing.T) {
	t.Parallel()
	servicetest.RunOn(t, servicetest.Partitioned, TestOxygensOnFixture)
}
