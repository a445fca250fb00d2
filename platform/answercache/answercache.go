// Package answercache keeps GraphQL answers in memory and serves them again while the data
// they were computed from has not changed (contract section 6.5). It is the store and the data
// versions only: the GraphQL path (platform/gqlhttp) decides what a question is (its
// Key), asks here for a kept answer, computes the others and hands back those that may be kept.
//
// What is kept: per question, a successful answer (HTTP 200, no errors member) byte for byte as
// it was sent, headers included. Answers with errors are never kept.
//
// Freshness: every answer is kept under the data version (an epoch, see versions) current when
// its computation started, and served only while that version is still current. The version
// comes from changes.Snapshot: a connection of its own to each database host that reads the
// server's data version (the snapshot of its writing transactions on a primary, the replay
// position on a standby) every CACHE__MAX_STALENESS/2 and listens for NOTIFY on
// CACHE__NOTIFY_CHANNEL; with several hosts a change on any of them starts a new version, and
// every host must have been read within the bound (see versions). With CACHE__CHANGES
// replication (changes.Replication) the epoch moves only with NOTIFY, a definition change or a
// recovery, and each question is kept under the versions of the tables it reads as well
// (CurrentFor), so it outlives changes to other tables.
//
// Identical questions in flight are coalesced (flight.go, keyed by key and version): the first
// computes into memory, the others wait for its answer, and each sends its own copy at its own
// pace; when that answer cannot be shared (errors: a timeout or a client that left may be the
// cause; or too large to keep, which the computation says as soon as it knows) each computes
// its own.
//
// Memory: answers, keys and bookkeeping stay within CACHE__MAX_BYTES (least recently used out
// first); an answer larger than an eighth of it is not kept (MaxAnswer).
package answercache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/emsanalytics/emsquery/platform/changes"
	"github.com/emsanalytics/emsquery/platform/database"
)

// The Cache-Status values (RFC 9211), "emsquery" being the cache's name.
const (
	HeaderCacheStatus = "Cache-Status"
	StatusHit         = "emsquery; hit"
	StatusMiss        = "emsquery; fwd=miss"
	StatusBypass      = "emsquery; fwd=bypass"
)

// minPollInterval bounds how often the data version is read, however small the staleness.
const minPollInterval = 10 * time.Millisecond

// Cache is the answers kept for the GraphQL endpoints. A nil Cache is caching off: every
// method answers as an empty cache that keeps nothing.
type Cache struct {
	store    *store
	versions *versions
	flights  flightGroup
	metrics  *cacheMetrics
	source   changes.Source
}

// Options are the cache's settings.
type Options struct {
	Enabled       bool          // CACHE__ENABLED
	MaxStaleness  time.Duration // CACHE__MAX_STALENESS
	MaxBytes      int64         // CACHE__MAX_BYTES
	NotifyChannel string        // CACHE__NOTIFY_CHANNEL; empty: no LISTEN
	Changes       changes.Mode  // CACHE__CHANGES
	Publication   string        // CACHE__PUBLICATION
	// Follower (may be nil) is handed the replication source's committed transactions
	// (platform/follow).
	Follower changes.Follower
}

// startTimeout bounds setting up the change source: creating a replication slot waits for the
// write transactions running on the whole server to end.
const startTimeout = 90 * time.Second

// New starts the cache (its watch connection) unless CACHE__ENABLED is false, in which case it
// returns a nil Cache: nothing is kept and nothing runs. The cleanup stops the watch.
func New(o Options, db *database.DB, log *slog.Logger, mp metric.MeterProvider) (*Cache, func(), error) {
	if !o.Enabled {
		log.Info("cache: off (CACHE__ENABLED=false)")
		return nil, func() {}, nil
	}
	staleness := o.MaxStaleness
	sctx, scancel := context.WithTimeout(context.Background(), startTimeout)
	source, err := changes.Open(sctx, db, changes.Options{
		Mode: o.Changes, Publication: o.Publication, NotifyChannel: o.NotifyChannel,
		MaxStaleness: staleness, PollInterval: max(staleness/2, minPollInterval), Logger: log,
		Follower: o.Follower,
	})
	scancel()
	if err != nil {
		return nil, nil, err
	}
	c := &Cache{source: source}
	c.metrics, err = newCacheMetrics(mp,
		func() (int, int64) { return c.store.stats() },
		func() (time.Duration, bool) { return c.versions.age() },
		source.Health)
	if err != nil {
		source.Close()
		return nil, nil, err
	}
	c.store = newStore(o.MaxBytes, c.metrics.evicted)
	c.versions = newVersions(source.Hosts(), staleness, log, c.metrics.invalidated)
	// With the replication change source a table's change ends the answers that read it:
	// they go from memory at once, counted by table.
	c.versions.onTables = func(changed []string) {
		for _, t := range changed {
			c.metrics.ended(t, c.store.end(t))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		source.Watch(ctx, c.versions)
	}()
	log.Info("cache: on", "max_staleness", staleness.String(), "max_bytes", o.MaxBytes,
		"notify_channel", o.NotifyChannel)
	return c, func() {
		cancel()
		<-done
		source.Close()
		_ = c.metrics.reg.Unregister()
	}, nil
}

// Health is the change source's state; ok false with the cache off.
func (c *Cache) Health() (changes.Health, bool) {
	if c == nil {
		return changes.Health{}, false
	}
	return c.source.Health(), true
}

// Key identifies a question: a SHA-256 of everything its answer's bytes depend on.
type Key [32]byte

// KeyOf is the key of the parts of a question (each given whole; no two different lists of
// parts have one key).
func KeyOf(parts ...[]byte) Key {
	h := sha256.New()
	for _, part := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var k Key
	h.Sum(k[:0])
	return k
}

// Answer is a response kept in memory, byte for byte as it was sent. It is never changed once
// made, so any number of responses may send it at once.
type Answer struct {
	Status int
	Header [][2]string // in the order written
	Body   []byte
}

// Version is the data version a question is asked in: the epoch, and with the replication
// change source the versions of the tables the question reads.
type Version struct {
	epoch  uint64
	ok     bool
	tables string
	// reads are the tables the question reads (nil: any), with the replication change source
	// only (tables not empty): an answer kept in this version ends when one of them changes.
	reads []string
}

// String names the version (for ETags); it says nothing of the data.
func (v Version) String() string {
	return strconv.FormatUint(v.epoch, 10) + v.tables + "@" + startID
}

// keyOf is the key question k is kept under in v: the tables' versions are part of it, so an
// answer ends when one of its tables changes, and the others' answers stay.
func (v Version) keyOf(k Key) Key {
	if v.tables == "" {
		return k
	}
	return KeyOf(k[:], []byte(v.tables))
}

// startID tells this process's epochs from another's (a restarted replica counts from 1 again).
var startID = strconv.FormatInt(time.Now().UnixNano(), 36)

// Current is the data version now; not ok (nothing may be answered from memory, nor kept)
// while the cache is off or a database host's version is older than CACHE__MAX_STALENESS. It
// is the version of a question that may read any table: with the replication change source
// every followed table's version is part of it (a live answer woken by a change to one of them
// finds no answer kept from before it).
func (c *Cache) Current() (Version, bool) { return c.CurrentFor(nil) }

// CurrentFor is Current for a question that reads tables (nil: it may read any): with the
// replication change source its version moves only when one of them changes.
func (c *Cache) CurrentFor(tables []string) (Version, bool) {
	if c == nil {
		return Version{}, false
	}
	s := c.versions.current.Load()
	e, ok := c.versions.epochOf(s)
	v := Version{epoch: e, ok: ok, tables: s.tableVersions(tables)}
	if v.tables != "" {
		v.reads = tables
	}
	return v, ok
}

// Changed is closed when the data version that is current now ends: a live answer (contract
// 6.11) takes it before Current and computes again when it is closed. With the cache off it is
// nil (never closed): nothing tells when the data changes.
func (c *Cache) Changed() <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.versions.changed()
}

// ChangedFor is Changed for a question that reads tables (nil: it may read any): with the
// replication change source it is closed only when one of them changes or the epoch ends, so
// a live answer of other tables is not woken by a load. Take it before CurrentFor.
func (c *Cache) ChangedFor(tables []string) <-chan struct{} {
	if c == nil {
		return nil
	}
	return c.versions.changedFor(tables)
}

// MaxAnswer is the size of the largest answer that may be kept (0: none), so that the GraphQL
// path stops recording an answer past it.
func (c *Cache) MaxAnswer() int64 {
	if c == nil {
		return 0
	}
	return c.store.maxEntry
}

// Get returns the answer kept for k in version v, or nil.
func (c *Cache) Get(k Key, v Version) *Answer {
	if c == nil || !v.ok {
		return nil
	}
	return c.store.get(v.keyOf(k), v.epoch)
}

// The outcomes a request has with the cache, counted per route.
type Outcome int

const (
	Hit       Outcome = iota // answered from memory
	Miss                     // computed, and kept or keepable
	Coalesced                // answered with what an identical request in flight computed
	Bypass                   // not cacheable, or computed again after a computation it waited for could not be shared
)

// Count counts a request's outcome for the endpoint at route.
func (c *Cache) Count(ctx context.Context, route string, o Outcome) {
	if c == nil {
		return
	}
	c.metrics.count(ctx, route, o)
}

// flightKey is the coalescing key: the question and the epoch it is asked in (a question
// asked after the data changed does not wait for an answer computed before).
func flightKey(k Key, epoch uint64) string {
	var b [len(Key{}) + 8]byte
	copy(b[:], k[:])
	binary.BigEndian.PutUint64(b[len(k):], epoch)
	return string(b[:])
}
