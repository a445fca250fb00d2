package patients

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// The lists here can hold hundreds of thousands of rows whose nullable fields gqlgen wants as
// pointers. The helpers below keep that from costing one small allocation per field per row.

// slabChunk is how many values one slab allocation holds.
const slabChunk = 1024

// slab hands out pointers to values stored in chunks: one allocation per slabChunk values.
// A chunk is never grown (only replaced), so pointers into it stay valid.
type slab[T any] struct{ buf []T }

func (s *slab[T]) ptr(v T) *T {
	if len(s.buf) == cap(s.buf) {
		s.buf = make([]T, 0, slabChunk)
	}
	s.buf = append(s.buf, v)
	return &s.buf[len(s.buf)-1]
}

// keep returns a pointer to a copy of *p in the slab, or nil for nil: for a value that is
// reused after the call.
func (s *slab[T]) keep(p *T) *T {
	if p == nil {
		return nil
	}
	return s.ptr(*p)
}

// maxInterned bounds an interner: columns with few distinct values (gender, route) share one
// string per value; past the bound, values are simply copied.
const maxInterned = 256

// interner turns driver bytes of a low-cardinality text column into shared *string values.
type interner struct{ m map[string]*string }

func (in *interner) text(t rawText) *string {
	if !t.valid {
		return nil
	}
	if p, ok := in.m[string(t.b)]; ok { // no allocation for the lookup
		return p
	}
	s := string(t.b)
	if in.m == nil {
		in.m = make(map[string]*string)
	}
	if len(in.m) < maxInterned {
		in.m[s] = &s
	}
	return &s
}

// rawText scans a text value without copying it: b refers to the driver's buffer and is valid
// only until the next row, so it must be interned or copied before then. NULL arrives as nil,
// an empty string as a non-nil empty slice.
type rawText struct {
	b     []byte
	valid bool
}

func (t *rawText) ScanBytes(v []byte) error {
	t.b, t.valid = v, v != nil
	return nil
}

// timestampLayout is PostgreSQL's ISO text form of a timestamp without time zone: seconds, and
// a fraction only when there is one.
const timestampLayout = "2006-01-02 15:04:05.999999"

func formatTimestamp(ts pgtype.Timestamp) string {
	switch ts.InfinityModifier {
	case pgtype.Infinity:
		return "infinity"
	case pgtype.NegativeInfinity:
		return "-infinity"
	}
	return ts.Time.Format(timestampLayout)
}

// appendTimestamp appends formatTimestamp's spelling of a timestamp in PostgreSQL's binary
// format (microseconds since 2000-01-01 00:00:00, as pgx reads it), without a string per row.
// false when raw is not a binary timestamp.
func appendTimestamp(b []byte, raw []byte) ([]byte, bool) {
	if len(raw) != 8 {
		return b, false
	}
	us := int64(binary.BigEndian.Uint64(raw))
	switch us {
	case math.MaxInt64:
		return append(b, "infinity"...), true
	case math.MinInt64:
		return append(b, "-infinity"...), true
	}
	// In seconds and nanoseconds, as pgx: the microseconds since the Unix epoch of the latest
	// timestamps (294276 AD) do not fit an int64.
	return time.Unix(y2kUnix+us/1000000, us%1000000*1000).UTC().AppendFormat(b, timestampLayout), true
}

// y2kUnix is 2000-01-01 00:00:00 UTC in seconds since the Unix epoch.
const y2kUnix = 946684800
