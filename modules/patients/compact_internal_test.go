package patients

import (
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/jackc/pgx/v5/pgtype"
)

// formatDate's fast path must spell every date as time.Format does.
func TestFormatDateMatchesTimeFormat(t *testing.T) {
	check := func(d time.Time) {
		t.Helper()
		if got, want := database.FormatDate(pgtype.Date{Time: d, Valid: true}), d.Format(time.DateOnly); got != want {
			t.Fatalf("database.FormatDate(%v) = %q, want %q", d, got, want)
		}
	}
	for d := time.Date(1890, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 2110; d = d.AddDate(0, 0, 1) {
		check(d)
	}
	for _, y := range []int{-10000, -1, 0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10000, 123456} {
		check(time.Date(y, 2, 28, 0, 0, 0, 0, time.UTC))
		check(time.Date(y, 12, 31, 0, 0, 0, 0, time.UTC))
	}
	if got := database.FormatDate(pgtype.Date{InfinityModifier: pgtype.Infinity, Valid: true}); got != "infinity" {
		t.Fatalf("infinity: %q", got)
	}
}
