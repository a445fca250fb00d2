package database

import (
	"math"
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

// AppendDate appends FormatDate's spelling of a date in PostgreSQL's binary format (days since
// 2000-01-01, as pgx reads it), for rows read raw (ForEachRawRow): the same text without a
// time.Time or a string per row. false when raw is not a binary date.
func AppendDate(b []byte, raw []byte) ([]byte, bool) {
	if len(raw) != 4 {
		return b, false
	}
	days := int32(uint32(raw[0])<<24 | uint32(raw[1])<<16 | uint32(raw[2])<<8 | uint32(raw[3]))
	switch days {
	case math.MaxInt32:
		return append(b, "infinity"...), true
	case math.MinInt32:
		return append(b, "-infinity"...), true
	}
	// Years 0 to 9999 of the proleptic Gregorian calendar, from a day count (H. Hinnant's
	// civil_from_days) from 0000-03-01, so that a leap day ends its year; unsigned, as the
	// divisions by constants are cheaper so.
	if z := int64(days) + 730425; z >= 0 && z < 4*146097*25 { // 0000-03-01 to 10000-03-01
		zu := uint32(z)
		era := zu / 146097
		doe := zu - era*146097                                 // day of the 400-year era, [0, 146096]
		yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of the era, [0, 399]
		doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of the year from March 1st, [0, 365]
		mp := (5*doy + 2) / 153                                // month from March, [0, 11]
		d := doy - (153*mp+2)/5 + 1
		m, y := mp+3, yoe+era*400
		if m > 12 {
			m, y = m-12, y+1
		}
		if y <= 9999 {
			return append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
				byte('0'+m/10), byte('0'+m%10), '-', byte('0'+d/10), byte('0'+d%10)), true
		}
	}
	return append(b, FormatDate(pgtype.Date{Time: time.Date(2000, 1, int(1+days), 0, 0, 0, 0, time.UTC), Valid: true})...), true
}
