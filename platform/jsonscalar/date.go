package jsonscalar

import (
	"encoding/binary"
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
	// Years 0 to 9999 of the proleptic Gregorian calendar, by C. Neri and L. Schneider's
	// Euclidean affine functions ("Euclidean affine functions and their application to
	// calendar algorithms", 2022): a few multiplications instead of the divisions of the usual
	// algorithm, in a computational calendar whose years start on March 1st (a leap day ends
	// them), counted from 0000-03-01.
	if n := int64(days) + 730425; n >= 0 && n < 3652425 { // 0000-03-01 to 10000-03-01
		n1 := 4*uint32(n) + 3
		c := n1 / 146097               // century
		n2 := n1%146097 | 3            // 4 * day of the century + 3
		p2 := 2939745 * uint64(n2)     // year of the century and day of the year, as a fraction
		z := uint32(p2 >> 32)          // year of the century
		ny := uint32(p2) / 2939745 / 4 // day of the year, [0, 365]
		n3 := 2141*ny + 197913         // month and day of the month, as a fraction
		y, m, d := 100*c+z, n3>>16, (n3&0xFFFF)/2141+1
		if ny >= 306 { // January and February belong to the next year
			y, m = y+1, m-12
		}
		if y <= 9999 {
			// Two digits at a time from a table, and "YYYY-MM-" written as one word: the
			// divisions by ten, and the date's bytes put one by one, cost as much as the rest.
			n := len(b)
			b = append(b, "0000-00-00"...)
			binary.LittleEndian.PutUint64(b[n:], uint64(digitPairs[y/100%100])|uint64(digitPairs[y%100])<<16|
				'-'<<32|uint64(digitPairs[m%100])<<40|'-'<<56)
			binary.LittleEndian.PutUint16(b[n+8:], digitPairs[d%100])
			return b, true
		}
	}
	return append(b, FormatDate(pgtype.Date{Time: time.Date(2000, 1, int(1+days), 0, 0, 0, 0, time.UTC), Valid: true})...), true
}

// digitPairs are 00 to 99, each as the two bytes it is spelled with, first in the low byte.
var digitPairs = func() (t [100]uint16) {
	for i := range t {
		t[i] = uint16('0'+i/10) | uint16('0'+i%10)<<8
	}
	return t
}()
