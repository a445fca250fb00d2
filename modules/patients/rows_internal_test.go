package patients

import (
	"reflect"
	"strings"
	"testing"
)

// appendPatientField takes Patient's struct field i for patientsSQL's column i: the struct's
// fields and the statement's columns must stay in the same order, one format each.
func TestPatientFieldsAreTheColumnsInOrder(t *testing.T) {
	list, _, _ := strings.Cut(strings.TrimPrefix(patientsSQL, "SELECT "), " FROM ")
	var cols []string
	for _, c := range strings.Split(list, ", ") {
		name, _, _ := strings.Cut(c, "::")
		cols = append(cols, name)
	}
	pt := reflect.TypeFor[Patient]()
	if pt.NumField() != len(cols) || len(patientFormats) != len(cols) {
		t.Fatalf("%d fields, %d columns %v, %d formats", pt.NumField(), len(cols), cols, len(patientFormats))
	}
	for i, c := range cols {
		if tag := pt.Field(i).Tag.Get("json"); tag != c {
			t.Errorf("field %d is %q, column %d is %q", i, tag, i, c)
		}
	}
}

// appendOxygenField relies on the same for Oxygen and oxygensSQL.
func TestOxygenFieldsAreTheColumnsInOrder(t *testing.T) {
	list, _, _ := strings.Cut(strings.TrimPrefix(oxygensSQL, "SELECT "), " FROM ")
	var cols []string
	for _, c := range strings.Split(list, ", ") {
		name, _, _ := strings.Cut(c, "::")
		cols = append(cols, name)
	}
	ot := reflect.TypeFor[Oxygen]()
	if ot.NumField() != len(cols) || len(oxygenFormats) != len(cols) {
		t.Fatalf("%d fields, %d columns %v, %d formats", ot.NumField(), len(cols), cols, len(oxygenFormats))
	}
	for i, c := range cols {
		if tag := ot.Field(i).Tag.Get("json"); tag != c {
			t.Errorf("field %d is %q, column %d is %q", i, tag, i, c)
		}
	}
}
