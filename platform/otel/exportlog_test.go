package otel

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

func TestExportLogRateLimit(t *testing.T) {
	log, buf := newLogger()
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	l := newExportLog(log, "metrics", 5*time.Minute)
	l.now = func() time.Time { return now }
	failure := errors.New("dial tcp 127.0.0.1:4318: connect: connection refused")

	l.Succeeded() // a success without failures says nothing
	for range 100 {
		l.Handle(failure)
		now = now.Add(2 * time.Second) // 200 s in all
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings after 100 failures within 5 minutes, want 1:\n%s", n, buf)
	}
	if !strings.Contains(buf.String(), "connection refused") || !strings.Contains(buf.String(), "unreachable") {
		t.Errorf("warning does not say what failed:\n%s", buf)
	}
	now = now.Add(100 * time.Second) // 5 minutes after the first warning
	l.Handle(failure)
	l.Handle(failure)
	if n := strings.Count(buf.String(), "level=WARN"); n != 2 {
		t.Fatalf("%d warnings after 5 minutes of failures, want 2:\n%s", n, buf)
	}
	if !strings.Contains(buf.String(), "still failing") || !strings.Contains(buf.String(), "failures=101") {
		t.Errorf("reminder does not count the failures:\n%s", buf)
	}
	l.Succeeded()
	l.Succeeded()
	if n := strings.Count(buf.String(), "level=INFO"); n != 1 || !strings.Contains(buf.String(), "recovered") {
		t.Fatalf("%d INFO lines after recovery, want one 'recovered':\n%s", n, buf)
	}
	l.Handle(failure) // a new outage warns at once
	if n := strings.Count(buf.String(), "level=WARN"); n != 3 {
		t.Fatalf("%d warnings after a new outage, want 3:\n%s", n, buf)
	}
}

// newLogger logs to a buffer that tests read while the SDK's goroutine writes.
func newLogger() (*slog.Logger, *servicetest.Buffer) {
	buf := &servicetest.Buffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}
