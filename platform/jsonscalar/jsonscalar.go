// Package jsonscalar writes GraphQL's built-in scalars as JSON exactly as gqlgen's marshalers
// and its transports' json.Marshal write them together, so that JSON written from a value (or
// from a column's bytes) is gqlgen's own, byte for byte: the encoders of platform/gqljson and
// the modules' column writers both use it. Dates, which the schema answers as strings, are
// spelled here too (date.go): one spelling whether a date is scanned or read raw.
package jsonscalar

import (
	"errors"
	"math"
	"strconv"
)

// AppendFloat appends f as gqlgen's MarshalFloatContext writes it (fmt's %g); false for NaN and
// infinities, which gqlgen reports as errors.
func AppendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	// A whole number of tenths (a numeric(p,1) column read as float8: weights, flow rates) from
	// 0.1 to 1e6, where %g writes no exponent, without the general search for the shortest
	// digits, which costs several times this per value of a large list. n/10 is the double
	// nearest the decimal n/10 (division is correctly rounded), so that decimal reads back as f;
	// no decimal with fewer digits is within the double's precision of it; so it is the shortest.
	if a := math.Abs(f); a >= 0.1 && a < 1e6 {
		if n := math.Round(f * 10); n/10 == f {
			i := int64(n)
			if i < 0 {
				b, i = append(b, '-'), -i
			}
			b = strconv.AppendInt(b, i/10, 10)
			if r := i % 10; r != 0 {
				b = append(b, '.', byte('0'+r))
			}
			return b, true
		}
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64), true
}

// AppendDecimal appends, as AppendFloat does, the float64 nearest to the decimal number text
// (as strconv.ParseFloat, and PostgreSQL's conversion of a numeric to float8, round it): text
// is a numeric column's text (an optional '-', digits, optionally '.' and digits; or NaN,
// Infinity). false as for AppendFloat, and when text is no number.
//
// A numeric read as text costs the database far less than one it converts to float8 (which
// it does by printing the numeric and parsing the text: a third of the statement's time for
// the patients' weights). A whole number of tenths from 0.1 to 1e6, the numeric(p,1) columns'
// usual values, is written from its digits: that is what AppendFloat writes for the float64
// nearest to it (see its fast path: n/10 is that float64, and Round(f*10) is n); anything else
// is parsed and written by AppendFloat.
func AppendDecimal(b, text []byte) ([]byte, bool) {
	s := text
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	whole := 0 // digits before the point
	for whole < len(s) && '0' <= s[whole] && s[whole] <= '9' {
		whole++
	}
	intPart, frac := s[:whole], s[whole:]
	for len(intPart) > 1 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	tenth := byte('0')
	ok := whole > 0 && len(intPart) <= 6 // below 1e6
	if ok && len(frac) > 0 {
		ok = frac[0] == '.' && len(frac) > 1
		if ok {
			tenth = frac[1]
			ok = '0' <= tenth && tenth <= '9'
			for _, c := range frac[2:] {
				ok = ok && c == '0'
			}
		}
	}
	if ok && (intPart[0] != '0' || tenth != '0') { // from 0.1
		if neg {
			b = append(b, '-')
		}
		b = append(b, intPart...)
		if tenth != '0' {
			b = append(b, '.', tenth)
		}
		return b, true
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return b, false
	}
	return AppendFloat(b, f)
}

const (
	hexDigits = "0123456789ABCDEF"
	lowerHex  = "0123456789abcdef"
)

// AppendString appends s quoted as gqlgen's MarshalString writes it, then escaped as the
// transports' json.Marshal escapes it: control characters, '"' and '\\' as gqlgen escapes them;
// '<', '>', '&', U+2028 and U+2029 as \\u sequences, as json.Marshal does; every other byte
// (invalid UTF-8 included) as it is. Written here, the second escaping is done already, so
// the JSON is final: json.Marshal leaves it unchanged, and Transport writes it as it is.
//
// s may be a string or the bytes of one (a text column as the database sent it).
func AppendString[S ~string | ~[]byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !special[c] {
			continue
		}
		switch c {
		case '\t':
			b = append(b, s[start:i]...)
			b = append(b, `\t`...)
		case '\r':
			b = append(b, s[start:i]...)
			b = append(b, `\r`...)
		case '\n':
			b = append(b, s[start:i]...)
			b = append(b, `\n`...)
		case '\\':
			b = append(b, s[start:i]...)
			b = append(b, `\\`...)
		case '"':
			b = append(b, s[start:i]...)
			b = append(b, `\"`...)
		case 0xE2:
			if i+2 >= len(s) || s[i+1] != 0x80 || s[i+2]&^1 != 0xA8 {
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xF])
			i += 2
		case '<', '>', '&': // json.Marshal's escapes, in its lower-case hex
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
		default: // control characters, in gqlgen's upper-case hex
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// special marks the bytes AppendString looks at twice.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for _, c := range []byte{'"', '\\', '<', '>', '&', 0xE2} {
		t[c] = true
	}
	return t
}()
