package resources

import (
	"testing"

	"github.com/emsanalytics/emsquery/internal/dbtest"
)

// appendResourceField takes Resource's struct field i for resourcesSQL's column i: the struct's
// fields and the statement's columns must stay in the same order, one format each.
func TestResourceFieldsAreTheColumnsInOrder(t *testing.T) {
	dbtest.FieldsAreColumns[Resource](t, resourcesSQL, resourceFormats)
}
