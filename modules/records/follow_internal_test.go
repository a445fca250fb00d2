package records

import (
	"regexp"
	"testing"
)

// isTimestampText accepts exactly what the ISO DateStyle's pattern does.
func TestIsTimestampText(t *testing.T) {
	pattern := regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?$`)
	for _, s := range []string{
		"2025-06-01 12:00:00", "2025-06-01 12:00:00.5", "2025-06-01 12:00:00.123456", "0001-01-01 00:00:00",
		"2025-06-01 12:00:00.1234567", "2025-06-01 12:00:00.", "2025-06-01T12:00:00", "2025-06-01 12:00",
		"12025-06-01 12:00:00", "2025-06-01 12:00:00 BC", "infinity", "", "2025-6-01 12:00:00",
		"2025-06-01 12:00:0a", "2025-06-01 12:00:00.12a", "2025-06-01 12:00:00+02",
	} {
		if got, want := isTimestampText(s), pattern.MatchString(s); got != want {
			t.Errorf("isTimestampText(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzIsTimestampText: isTimestampText agrees with the pattern on any text.
func FuzzIsTimestampText(f *testing.F) {
	pattern := regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?$`)
	f.Add("2025-06-01 12:00:00.123456")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isTimestampText(s), pattern.MatchString(s); got != want {
			t.Errorf("isTimestampText(%q) = %v, want %v", s, got, want)
		}
	})
}
