package answercache

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

func newTestVersions(staleness time.Duration) (*versions, *[]string) {
	var reasons []string
	v := newVersions(1, staleness, slog.New(slog.NewTextHandler(io.Discard, nil)), func(r string) { reasons = append(reasons, r) })
	return v, &reasons
}

func TestVersionsEpochs(t *testing.T) {
	v, reasons := newTestVersions(time.Hour)
	if _, ok := v.epoch(); ok {
		t.Fatal("an epoch is current before the first poll")
	}
	v.Version(0, "0/100", time.Now())
	e1, ok := v.epoch()
	if !ok {
		t.Fatal("no epoch after a poll")
	}
	v.Version(0, "0/100", time.Now())
	if e, _ := v.epoch(); e != e1 {
		t.Error("the same data version started a new epoch")
	}
	v.Version(0, "0/200", time.Now())
	e2, _ := v.epoch()
	if e2 == e1 {
		t.Error("a new data version did not start a new epoch")
	}
	v.Notified()
	e3, _ := v.epoch()
	if e3 == e2 {
		t.Error("a notification did not start a new epoch")
	}
	v.Lost(0, errors.New("connection reset"))
	if e, ok := v.epoch(); !ok || e != e3 {
		t.Error("a failure made the epoch not current before the bound")
	}
	v.Version(0, "0/200", time.Now())
	e4, _ := v.epoch()
	if e4 == e3 {
		t.Error("the first poll after a failure did not start a new epoch")
	}
	want := []string{reasonDataChanged, reasonNotified, reasonReconnected}
	if len(*reasons) != len(want) {
		t.Fatalf("invalidations %v, want %v", *reasons, want)
	}
	for i := range want {
		if (*reasons)[i] != want[i] {
			t.Errorf("invalidations %v, want %v", *reasons, want)
		}
	}
}

// An epoch is current only while its latest poll was sent within the bound: a poll older than
// that may not have seen a commit made more than the bound ago.
func TestVersionsStaleness(t *testing.T) {
	v, _ := newTestVersions(2 * time.Second)
	v.Version(0, "0/100", time.Now().Add(-1900*time.Millisecond))
	if _, ok := v.epoch(); !ok {
		t.Error("a poll sent 1.9 s ago is not current with a 2 s bound")
	}
	v.Version(0, "0/100", time.Now().Add(-2100*time.Millisecond)) // an older poll that answered late
	if _, ok := v.epoch(); !ok {
		t.Error("a late answer of an older poll made the newer one count less")
	}
	w, _ := newTestVersions(2 * time.Second)
	w.Version(0, "0/100", time.Now().Add(-2001*time.Millisecond))
	if _, ok := w.epoch(); ok {
		t.Error("a poll sent more than the bound ago is current")
	}
}

// With several hosts each has its own version: a change on any starts a new epoch, and an epoch
// is current only while every host was polled within the bound (a standby that replays a change
// later than the primary shows it must not be left unread).
func TestVersionsSeveralHosts(t *testing.T) {
	v := newVersions(2, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), func(string) {})
	v.Version(0, "0/100", time.Now())
	if _, ok := v.epoch(); ok {
		t.Fatal("an epoch is current before every host was polled")
	}
	v.Version(1, "0/90", time.Now())
	e1, ok := v.epoch()
	if !ok {
		t.Fatal("no epoch after every host was polled")
	}
	v.Version(0, "0/100", time.Now())
	v.Version(1, "0/90", time.Now())
	if e, _ := v.epoch(); e != e1 {
		t.Error("unchanged versions started a new epoch")
	}
	v.Version(1, "0/100", time.Now()) // the standby replayed the primary's change
	if e, _ := v.epoch(); e == e1 {
		t.Error("a new version on the second host did not start a new epoch")
	}
	v.Version(0, "0/100", time.Now())
	v.Version(1, "0/100", time.Now().Add(-2100*time.Millisecond))
	if _, ok := v.epoch(); !ok {
		t.Error("a late answer of an older poll made the newer one count less")
	}
	w := newVersions(2, 2*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), func(string) {})
	w.Version(0, "0/100", time.Now())
	w.Version(1, "0/100", time.Now().Add(-2001*time.Millisecond))
	if _, ok := w.epoch(); ok {
		t.Error("an epoch is current while one host's latest poll is older than the bound")
	}
}
