package patients

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/dbtest"
)

// appendPatientField and appendOxygenField take the struct's field i for the statement's column
// i: the struct's fields and the statement's columns must stay in the same order, one format
// each.
func TestFieldsAreTheColumnsInOrder(t *testing.T) {
	dbtest.FieldsAreColumns[Patient](t, patientRowsSQL, patientFormats)
	dbtest.FieldsAreColumns[Oxygen](t, oxygenRowsSQL, oxygenFormats)
}
