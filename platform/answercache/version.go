package answercache

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// versions is the data version answers are kept under: an epoch that starts anew whenever the
// data may have changed. It is what database.Watch reports to (see that for what moves the
// version). An answer computed while epoch e was current is served only while e still is.
//
// Freshness: a poll sent at time p reflects every commit made before p. An epoch is current
// only while its latest poll was sent less than the staleness bound ago, so a commit made more
// than the bound before a request has been seen by the poll that request relies on: that poll
// started a new epoch, and nothing computed before the commit is served. When the version cannot
// be read (the database is down), no epoch is current after the bound: answers are computed,
// none is served from memory. A notification starts a new epoch at once; so does the first poll
// after a failure (notifications may have been lost, and a server that came back may be another
// one).
type versions struct {
	staleness time.Duration
	log       *slog.Logger
	onNew     func(reason string) // counts the invalidations

	current atomic.Pointer[versionState]

	mu         sync.Mutex // held by the writers: Version, Notified, Lost
	lastRead   string
	lost       bool // a failure since the last poll: the next one starts a new epoch
	failing    bool // the failure is logged; recovery will be
	unlistened bool // LISTEN refused, logged
}

type versionState struct {
	epoch uint64
	read  time.Time // when the latest poll that confirmed epoch was sent
}

// Reasons for a new epoch, the emsquery.cache.invalidations counter's attribute.
const (
	reasonDataChanged = "data_changed"
	reasonNotified    = "notified"
	reasonReconnected = "reconnected"
)

func newVersions(staleness time.Duration, log *slog.Logger, onNew func(string)) *versions {
	v := &versions{staleness: staleness, log: log, onNew: onNew}
	v.current.Store(&versionState{})
	return v
}

// epoch returns the current epoch, and false when none is current (no poll within the bound).
func (v *versions) epoch() (uint64, bool) {
	s := v.current.Load()
	if s.read.IsZero() || time.Since(s.read) >= v.staleness {
		return 0, false
	}
	return s.epoch, true
}

// age is how long ago the latest successful poll was sent; false before the first.
func (v *versions) age() (time.Duration, bool) {
	s := v.current.Load()
	if s.read.IsZero() {
		return 0, false
	}
	return time.Since(s.read), true
}

// Version records a poll's result.
func (v *versions) Version(read string, sent time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := *v.current.Load()
	switch {
	case s.read.IsZero() && v.lastRead == "":
		s.epoch++ // the first: nothing is kept yet
	case v.lost:
		s.epoch++
		v.onNew(reasonReconnected)
	case read != v.lastRead:
		s.epoch++
		v.onNew(reasonDataChanged)
	}
	if sent.After(s.read) {
		s.read = sent
	}
	v.lastRead, v.lost = read, false
	v.current.Store(&s)
	if v.failing {
		v.failing = false
		v.log.Info("cache: the data version can be read again; answers are kept again")
	}
}

// Notified starts a new epoch at once.
func (v *versions) Notified() {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := *v.current.Load()
	s.epoch++
	v.current.Store(&s)
	v.onNew(reasonNotified)
	v.log.Info("cache: notification received; answers from memory dropped")
}

// Lost notes that the version cannot be read for now.
func (v *versions) Lost(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lost = true
	if !v.failing {
		v.failing = true
		v.log.Warn("cache: cannot read the data version; answers are computed, none from memory, until it can be read again",
			"error", err.Error())
	}
}

// Unlistened notes that notifications cannot be received; said once.
func (v *versions) Unlistened(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.unlistened {
		v.unlistened = true
		v.log.Warn("cache: the database refuses LISTEN (a hot standby cannot listen); NOTIFY is not received, answers stay fresh within CACHE__MAX_STALENESS by polling",
			"error", err.Error())
	}
}
