package jsonscalar

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// AppendDate spells every binary date as FormatDate spells what pgx decodes from it.
func TestAppendDateMatchesFormatDate(t *testing.T) {
	check := func(days int32) {
		t.Helper()
		want := "infinity"
		switch days {
		case math.MinInt32:
			want = "-infinity"
		case math.MaxInt32:
		default:
			want = FormatDate(pgtype.Date{Time: time.Date(2000, 1, int(1+days), 0, 0, 0, 0, time.UTC), Valid: true})
		}
		raw := binary.BigEndian.AppendUint32(nil, uint32(days))
		got, ok := AppendDate([]byte("x"), raw)
		if !ok || string(got) != "x"+want {
			t.Fatalf("AppendDate(%d days) = %q, %v; want %q", days, got, ok, "x"+want)
		}
	}
	// Every day from 4713 BC (PostgreSQL's first) to past 10000 AD, then samples to its last.
	for days := int32(-2451545); days < 2922500; days++ {
		check(days)
	}
	for days := int32(2922500); days < 2147483494 && days > 0; days += 997 {
		check(days)
	}
	check(math.MinInt32)
	check(math.MaxInt32)
	if _, ok := AppendDate(nil, []byte{1, 2, 3}); ok {
		t.Fatal("AppendDate accepted 3 bytes")
	}
}

// BenchmarkAppendDate writes dates of birth spread over a century, as the patients list does.
func BenchmarkAppendDate(b *testing.B) {
	raws := make([][]byte, 4096)
	for i := range raws {
		days := int32(-36500 + i*9)
		raws[i] = []byte{byte(days >> 24), byte(days >> 16), byte(days >> 8), byte(days)}
	}
	buf := make([]byte, 0, 64)
	for i := 0; b.Loop(); i++ {
		buf, _ = AppendDate(buf[:0], raws[i%len(raws)])
	}
}

// FormatDate's fast path must spell every date as time.Format does.
func TestFormatDateMatchesTimeFormat(t *testing.T) {
	check := func(d time.Time) {
		t.Helper()
		if got, want := FormatDate(pgtype.Date{Time: d, Valid: true}), d.Format(time.DateOnly); got != want {
			t.Fatalf("FormatDate(%v) = %q, want %q", d, got, want)
		}
	}
	for d := time.Date(1890, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 2110; d = d.AddDate(0, 0, 1) {
		check(d)
	}
	for _, y := range []int{-10000, -1, 0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10000, 123456} {
		check(time.Date(y, 2, 28, 0, 0, 0, 0, time.UTC))
		check(time.Date(y, 12, 31, 0, 0, 0, 0, time.UTC))
	}
	if got := FormatDate(pgtype.Date{InfinityModifier: pgtype.Infinity, Valid: true}); got != "infinity" {
		t.Fatalf("infinity: %q", got)
	}
}
