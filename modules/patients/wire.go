// Package patients answers patients and oxygens: the patient dimension and the oxygen
// administrations, the latter optionally distinct on some of its columns.
package patients

import "github.com/google/wire"

var ProviderSet = wire.NewSet(NewRepository, NewResolver)
