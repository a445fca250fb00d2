// Package records is the one definition of "which mission records": the queryable-column
// catalog (contract section 2), the record filter (a date range and filters, combined with AND
// or OR) compiled to SQL over the catalog's columns, the GraphQL input Filter and enum
// FilterOperator (filter.graphqls), and the bounds on a filter's size. The stats and reports
// modules select records with it; it serves no field of its own.
package records
