// Package schema ships the analytics database's DDL (contract section 1) for tests, the demo and
// ETL authors. The service never applies it to a database it serves.
package schema

import _ "embed"

// DDL creates the analytics tables and indexes; it is idempotent.
//
//go:embed schema.sql
var DDL string
