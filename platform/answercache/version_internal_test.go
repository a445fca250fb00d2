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

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// With the tables' versions (replication), a live answer of some tables is woken only by a
// change to one of them or by a new epoch; one of any table by every change.
func TestVersionsChangedForTables(t *testing.T) {
	v, _ := newTestVersions(time.Hour)
	v.Tables(map[string]uint64{"fact_record": 1, "dim_station": 1})
	v.Version(0, "replication", time.Now())
	dims := v.changedFor([]string{"dim_resource", "dim_station"})
	facts := v.changedFor([]string{"fact_record"})
	anyTable := v.changedFor(nil)
	if again := v.changedFor([]string{"dim_resource", "dim_station"}); again != dims {
		t.Error("two waiters on the same tables got different channels")
	}
	v.Tables(map[string]uint64{"fact_record": 2, "dim_station": 1})
	if closed(dims) {
		t.Error("a change to fact_record woke a question on dim_resource and dim_station")
	}
	if !closed(facts) || !closed(anyTable) {
		t.Error("a change to fact_record did not wake its question and the question of any table")
	}
	v.Tables(map[string]uint64{"fact_record": 2, "dim_station": 1, "dim_resource": 1})
	if !closed(dims) {
		t.Error("a change to dim_resource (never changed before) did not wake its question")
	}
	dims = v.changedFor([]string{"dim_resource", "dim_station"})
	v.Notified()
	if !closed(dims) {
		t.Error("a new epoch did not wake a question of some tables")
	}
	// The snapshot source has no tables' versions: every change is every table's.
	s, _ := newTestVersions(time.Hour)
	s.Version(0, "snapshot 1", time.Now())
	ch := s.changedFor([]string{"fact_record"})
	s.Version(0, "snapshot 2", time.Now())
	if !closed(ch) {
		t.Error("snapshot: a new data version did not wake a question of some tables")
	}
}
