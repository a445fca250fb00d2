package answercache

import (
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// versions is the data version answers are kept under: an epoch that starts anew whenever the
// data may have changed. It is what the change source (changes.Snapshot) reports to (see that
// for what moves the version). An answer computed while epoch e was current is served only while e still is.
//
// Freshness: a poll sent at time p reflects every commit made before p. An epoch is current
// only while its latest poll was sent less than the staleness bound ago, so a commit made more
// than the bound before a request has been seen by the poll that request relies on: that poll
// started a new epoch, and nothing computed before the commit is served. When the version cannot
// be read (the database is down), no epoch is current after the bound: answers are computed,
// none is served from memory. A notification starts a new epoch at once; so does the first poll
// after a failure (notifications may have been lost, and a server that came back may be another
// one). With several database hosts, each is polled on its own and all must be (hostState):
// while one cannot be read, answers are computed, none is served from memory.
type versions struct {
	staleness time.Duration
	log       *slog.Logger
	onNew     func(reason string) // counts the invalidations
	// onTables is told the tables whose versions changed (replication change source), in
	// order, under mu; nil: nobody is.
	onTables func(changed []string)

	current atomic.Pointer[versionState]

	mu         sync.Mutex  // held by the writers: Version, Notified, Lost
	hosts      []hostState // one per configured database host
	failing    bool        // a failure is logged; recovery will be
	unlistened bool        // LISTEN refused, logged
	// sets are the channels of the live answers that read some tables only (changedFor), one
	// per set of tables (at most one per subset of the followed tables), each closed when one
	// of its tables changes or the epoch ends.
	sets map[string]tableSet
}

// tableSet is a set of tables that live answers wait on, and their channel.
type tableSet struct {
	tables  []string
	changed chan struct{}
}

// hostState is one database host as its polls found it. With several hosts each has its own
// version: the pool may read from any of them, and a standby shows a change only once it has
// replayed it, later than the primary. An epoch is current only while every host's latest poll
// is within the bound, so an answer a lagging standby computed after the primary's change was
// seen is dropped when the standby's own poll sees the change.
type hostState struct {
	lastRead string
	read     time.Time // when its latest successful poll was sent
	lost     bool      // a failure since its last poll: the next one starts a new epoch
}

type versionState struct {
	epoch uint64
	// tables are the followed tables' versions (replication change source only; nil with
	// snapshot), as of the latest poll.
	tables map[string]uint64
	read   time.Time // when the oldest of the hosts' latest polls was sent; zero before all polled
	// changed is closed when the epoch ends (a new one starts): what live answers wait on.
	changed chan struct{}
}

// next is s in a new epoch: s's waiters are woken.
func (s versionState) next() versionState {
	close(s.changed)
	s.epoch++
	s.changed = make(chan struct{})
	return s
}

// next is s in a new epoch, every waiter woken (those of some tables too). v.mu is held.
func (v *versions) next(s versionState) versionState {
	v.wake(func(string) bool { return true })
	return s.next()
}

// wake closes the channels of the table sets that hold a table for which changed is true.
// v.mu is held.
func (v *versions) wake(changed func(table string) bool) {
	for k, set := range v.sets {
		if slices.ContainsFunc(set.tables, changed) {
			close(set.changed)
			delete(v.sets, k)
		}
	}
}

// changedFor is closed when the current epoch ends or one of tables changes (nil tables: any
// table, as changed). Taken before the version is read, it misses no change after that read:
// a set's channel is made and closed under v.mu, as the changes are recorded.
func (v *versions) changedFor(tables []string) <-chan struct{} {
	if tables == nil {
		return v.changed()
	}
	k := strings.Join(tables, " ")
	v.mu.Lock()
	defer v.mu.Unlock()
	if s := v.current.Load(); s.tables == nil {
		return s.changed // the snapshot source: any change is every table's
	}
	if set, ok := v.sets[k]; ok {
		return set.changed
	}
	if v.sets == nil {
		v.sets = map[string]tableSet{}
	}
	set := tableSet{tables: slices.Clone(tables), changed: make(chan struct{})}
	v.sets[k] = set
	return set.changed
}

// Reasons for a new epoch, the emsquery.cache.invalidations counter's attribute.
const (
	reasonDataChanged = "data_changed"
	reasonNotified    = "notified"
	reasonReconnected = "reconnected"
)

// newVersions is the data version of hosts database hosts (at least 1).
func newVersions(hosts int, staleness time.Duration, log *slog.Logger, onNew func(string)) *versions {
	v := &versions{staleness: staleness, log: log, onNew: onNew, hosts: make([]hostState, max(hosts, 1))}
	v.current.Store(&versionState{changed: make(chan struct{})})
	return v
}

// epoch returns the current epoch, and false when none is current (some host not polled
// within the bound).
func (v *versions) epoch() (uint64, bool) { return v.epochOf(v.current.Load()) }

// epochOf is epoch for state s.
func (v *versions) epochOf(s *versionState) (uint64, bool) {
	if s.read.IsZero() || time.Since(s.read) >= v.staleness {
		return 0, false
	}
	return s.epoch, true
}

// changed is closed when the current epoch ends.
func (v *versions) changed() <-chan struct{} { return v.current.Load().changed }

// age is how long ago the oldest of the hosts' latest successful polls was sent; false before
// every host was polled once.
func (v *versions) age() (time.Duration, bool) {
	s := v.current.Load()
	if s.read.IsZero() {
		return 0, false
	}
	return time.Since(s.read), true
}

// Version records a poll's result on host.
func (v *versions) Version(host int, read string, sent time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := *v.current.Load()
	h := &v.hosts[host]
	switch {
	case h.read.IsZero() && h.lastRead == "":
		s = v.next(s) // the host's first: nothing computed there before is known to be current
	case h.lost:
		s = v.next(s)
		v.onNew(reasonReconnected)
	case read != h.lastRead:
		s = v.next(s)
		v.onNew(reasonDataChanged)
	}
	if sent.After(h.read) {
		h.read = sent
	}
	h.lastRead, h.lost = read, false
	s.read = v.oldestRead()
	v.current.Store(&s)
	if v.failing && !v.anyLost() {
		v.failing = false
		v.log.Info("cache: the data version can be read again; answers are kept again")
	}
}

// oldestRead is the oldest of the hosts' latest polls, zero while one was never polled.
func (v *versions) oldestRead() time.Time {
	oldest := v.hosts[0].read
	for _, h := range v.hosts[1:] {
		if h.read.IsZero() || h.read.Before(oldest) {
			oldest = h.read
		}
		if oldest.IsZero() {
			break
		}
	}
	return oldest
}

func (v *versions) anyLost() bool {
	for _, h := range v.hosts {
		if h.lost {
			return true
		}
	}
	return false
}

// Notified starts a new epoch at once.
func (v *versions) Notified() {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.next(*v.current.Load())
	v.current.Store(&s)
	v.onNew(reasonNotified)
	v.log.Info("cache: notification received; answers from memory dropped")
}

// Lost notes that host's version cannot be read for now.
func (v *versions) Lost(host int, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hosts[host].lost = true
	if !v.failing {
		v.failing = true
		attrs := []any{"error", err.Error()}
		if len(v.hosts) > 1 {
			attrs = append(attrs, "host_index", host)
		}
		v.log.Warn("cache: cannot read the data version; answers are computed, none from memory, until it can be read again",
			attrs...)
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

// tableVersions names the versions of tables in s (all the followed tables when tables is
// nil); empty with the snapshot source.
func (s *versionState) tableVersions(tables []string) string {
	if s.tables == nil {
		return ""
	}
	if tables == nil {
		tables = slices.Sorted(maps.Keys(s.tables))
		// "*" tells "every table" from a list that happens to name them all.
		b := []byte{'*'}
		for _, t := range tables {
			b = append(b, ' ')
			b = append(b, t...)
			b = append(b, ':')
			b = strconv.AppendUint(b, s.tables[t], 10)
		}
		return string(b)
	}
	var b []byte
	for _, t := range tables {
		b = append(b, ' ')
		b = append(b, t...)
		b = append(b, ':')
		b = strconv.AppendUint(b, s.tables[t], 10)
	}
	return string(b)
}

// Tables records the followed tables' versions as of the poll whose Version comes next
// (replication change source). A change wakes the live answers (changed), which compute again
// and ask with their own tables; the epoch stays, so the answers of other tables stay.
func (v *versions) Tables(t map[string]uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := *v.current.Load()
	if s.tables != nil && maps.Equal(s.tables, t) {
		return
	}
	if s.tables != nil {
		close(s.changed)
		s.changed = make(chan struct{})
		old := s.tables
		v.wake(func(table string) bool { return old[table] != t[table] })
		if v.onTables != nil {
			var changed []string
			for table := range t {
				if old[table] != t[table] {
					changed = append(changed, table)
				}
			}
			slices.Sort(changed)
			v.onTables(changed)
		}
	}
	s.tables = t
	v.current.Store(&s)
}
