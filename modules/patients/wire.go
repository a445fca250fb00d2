// Package patients answers patients and oxygens: the patient dimension and the oxygen
// administrations, the latter optionally distinct on some of its columns.
package patients

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewRepository, NewResolver)

// FieldTables are the tables each root field of the module reads: with the replication change
// source (contract 6.13) their answers outlive changes to the other tables.
var FieldTables = map[string][]string{
	"patients": {"dim_patient"},
	"oxygens":  {"fact_oxygen"},
}
