package database

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// FormatDate renders a date as YYYY-MM-DD, keeping PostgreSQL's spelling of infinite dates.
// Repositories scan dates in binary and format them here, so answers do not depend on the
// connection's DateStyle.
func FormatDate(d pgtype.Date) string {
	switch d.InfinityModifier {
	case pgtype.Infinity:
		return "infinity"
	case pgtype.NegativeInfinity:
		return "-infinity"
	}
	y, m, day := d.Time.Date()
	if y < 0 || y > 9999 {
		return d.Time.Format(time.DateOnly)
	}
	// time.Format's general machinery costs several times this, per row of a large list.
	b := [10]byte{byte('0' + y/1000), byte('0' + y/100%10), byte('0' + y/10%10), byte('0' + y%10), '-',
		byte('0' + int(m)/10), byte('0' + int(m)%10), '-', byte('0' + day/10), byte('0' + day%10)}
	return string(b[:])
}
