// Package schema ships the analytics database's DDL (contract section 1) for tests, the demo and
// ETL authors. The service never applies it to a database it serves.
package schema

import (
	_ "embed"
	"fmt"
)

// DDL creates the analytics tables and indexes; it is idempotent.
//
//go:embed schema.sql
var DDL string

// PartitionedDDL is DDL with fact_record range-partitioned by month (contract section 6.6),
// and the function create_fact_record_months that ETL authors call to add months; it is
// idempotent.
//
//go:embed partitioned.sql
var PartitionedDDL string

// MeasuresDDL adds the optional extensions that EMS performance measures read (contract
// section 6.12.6): the time columns of fact_record and the table fact_unit_shift. It applies
// after either layout's DDL and is idempotent.
//
//go:embed measures.sql
var MeasuresDDL string

// Layout is how fact_record is stored: one table, or partitioned by month.
type Layout string

const (
	Plain       Layout = "plain"
	Partitioned Layout = "partitioned"
)

// ParseLayout reads a layout's name.
func ParseLayout(s string) (Layout, error) {
	switch l := Layout(s); l {
	case Plain, Partitioned:
		return l, nil
	}
	return "", fmt.Errorf("layout %q is not plain or partitioned", s)
}

// DDL is the layout's DDL.
func (l Layout) DDL() string {
	if l == Partitioned {
		return PartitionedDDL
	}
	return DDL
}
