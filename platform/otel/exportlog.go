package otel

import (
	"log/slog"
	"sync"
	"time"
)

// exportLog says what happens to the exports of one signal (metrics, traces). A collector that
// cannot be reached fails every export; the log says so once (WARNING) when the failures start,
// then at most once per interval while they go on, and once (INFO) when an export succeeds
// again. Nothing here is on a request's path: exports run in the SDK's own goroutines.
//
// It is an otel.ErrorHandler (Handle), and exporters wrapped to report their outcome call
// Handle and Succeeded themselves.
type exportLog struct {
	log    *slog.Logger
	signal string
	every  time.Duration
	now    func() time.Time

	mu       sync.Mutex
	failing  bool
	since    time.Time // first failure of the current run of failures
	lastWarn time.Time
	failures int // in the current run of failures
}

// reminderInterval is how often, at most, a collector that keeps failing is logged again.
const reminderInterval = 5 * time.Minute

// newExportLog returns the log of signal's exports ("metrics", "traces"), reminding at most
// every interval.
func newExportLog(log *slog.Logger, signal string, every time.Duration) *exportLog {
	return &exportLog{log: log, signal: signal, every: every, now: time.Now}
}

// Handle notes a failed export (it implements otel.ErrorHandler).
func (l *exportLog) Handle(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	now := l.now()
	l.failures++
	switch {
	case !l.failing:
		l.failing, l.since, l.lastWarn = true, now, now
		l.mu.Unlock()
		l.log.Warn(l.signal+" export failed: the telemetry endpoint is unreachable or refused the data; the service keeps running and retries, and this is logged again at most every "+l.every.String(),
			"error", err.Error())
		return
	case now.Sub(l.lastWarn) >= l.every:
		failures, since := l.failures, l.since
		l.lastWarn = now
		l.mu.Unlock()
		l.log.Warn(l.signal+" export still failing: the telemetry endpoint is unreachable or refused the data",
			"error", err.Error(), "failures", failures, "failing_for", now.Sub(since).Round(time.Second).String())
		return
	default:
		l.mu.Unlock()
	}
}

// Succeeded notes a successful export; after failures it logs the recovery once.
func (l *exportLog) Succeeded() {
	l.mu.Lock()
	if !l.failing {
		l.mu.Unlock()
		return
	}
	failures, since := l.failures, l.since
	l.failing, l.failures = false, 0
	now := l.now()
	l.mu.Unlock()
	l.log.Info(l.signal+" export recovered: the telemetry endpoint accepts data again",
		"failures", failures, "failed_for", now.Sub(since).Round(time.Second).String())
}
