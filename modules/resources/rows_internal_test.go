package resources

import (
	"reflect"
	"strings"
	"testing"
)

// appendResourceField takes Resource's struct field i for resourcesSQL's column i: the struct's
// fields and the statement's columns must stay in the same order, one format each.
func TestResourceFieldsAreTheColumnsInOrder(t *testing.T) {
	list, _, _ := strings.Cut(strings.TrimPrefix(resourcesSQL, "SELECT "), "\nFROM ")
	cols := strings.Split(list, ", ")
	rt := reflect.TypeFor[Resource]()
	if rt.NumField() != len(cols) || len(resourceFormats) != len(cols) {
		t.Fatalf("%d fields, %d columns %v, %d formats", rt.NumField(), len(cols), cols, len(resourceFormats))
	}
	for i, c := range cols {
		if tag := rt.Field(i).Tag.Get("json"); tag != c {
			t.Errorf("field %d is %q, column %d is %q", i, tag, i, c)
		}
	}
}
