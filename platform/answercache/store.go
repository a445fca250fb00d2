package answercache

import (
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// entryOverhead is what an entry costs besides its header and body bytes: its key, the answer
// struct, the LRU's list element and map slot.
const entryOverhead = 256

// Size is what a kept answer costs.
func (a *Answer) Size() int64 {
	n := int64(entryOverhead + len(a.Body))
	for _, h := range a.Header {
		n += int64(len(h[0]) + len(h[1]) + 32)
	}
	return n
}

// store keeps the answers of one epoch, least recently used first out, within maxBytes. An
// answer of an epoch that is no longer current can never be served again, so moving to a new
// epoch drops them all at once.
//
// The LRU is hashicorp/golang-lru's simplelru, bounded here by bytes instead of by its entry
// count (given as unbounded): after an add, the oldest entries go until the total fits.
type store struct {
	maxBytes int64
	maxEntry int64 // larger answers are not kept

	mu    sync.Mutex
	lru   *simplelru.LRU[Key, *Answer]
	bytes int64
	epoch uint64
	// readers are, per table, the answers kept under its version (replication change source),
	// anyTable under the name of those that may read any table; reads is each such answer's
	// tables. A table's change ends its readers (end).
	readers map[string]map[Key]struct{}
	reads   map[Key][]string

	evicted func(n int) // counts evictions (outside the lock is not needed: a counter)
}

// maxEntryShare: an answer larger than this share of the bound is not kept, so that one huge
// answer cannot push out everything else (whole tables are streamed, not kept).
const maxEntryShare = 8

func newStore(maxBytes int64, evicted func(int)) *store {
	s := &store{maxBytes: maxBytes, maxEntry: maxBytes / maxEntryShare, evicted: evicted}
	s.reset()
	return s
}

// anyTable is the readers' name of the answers that may read any table.
const anyTable = "*"

// reset empties the store; the caller holds mu (or owns s).
func (s *store) reset() {
	// Not Purge: that would walk every entry while holding mu.
	lru, err := simplelru.NewLRU[Key, *Answer](math.MaxInt, s.removed)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	s.lru, s.bytes = lru, 0
	s.readers, s.reads = map[string]map[Key]struct{}{}, map[Key][]string{}
}

// removed follows an answer out of the LRU (evicted, or ended by a table); mu is held.
func (s *store) removed(k Key, a *Answer) {
	s.bytes -= a.Size()
	tables, ok := s.reads[k]
	if !ok {
		return
	}
	delete(s.reads, k)
	if tables == nil {
		tables = []string{anyTable}
	}
	for _, t := range tables {
		delete(s.readers[t], k)
	}
}

// fits says whether an answer of this size may be kept at all.
func (s *store) fits(a *Answer) bool { return a.Size() <= s.maxEntry }

// advance moves the store to epoch e when e is newer, dropping every answer; the caller holds
// mu. It says whether the store is now at e.
func (s *store) advance(e uint64) bool {
	if e > s.epoch {
		s.reset()
		s.epoch = e
	}
	return e == s.epoch
}

// get returns the answer kept for k in epoch e.
func (s *store) get(k Key, e uint64) *Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.advance(e) {
		return nil
	}
	a, _ := s.lru.Get(k)
	return a
}

// put keeps a, computed for k in epoch e, unless e is no longer the store's epoch (the data
// may have changed while it was computed) or a is too large. keyed: k holds the versions of
// the tables a reads (reads; nil: any), whose changes end it (end).
func (s *store) put(k Key, a *Answer, e uint64, keyed bool, reads []string) bool {
	if !s.fits(a) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.advance(e) {
		return false
	}
	s.lru.Remove(k) // an answer kept meanwhile for the same question: a's replaces it
	s.lru.Add(k, a)
	s.bytes += a.Size()
	if keyed {
		s.reads[k] = reads
		tables := reads
		if tables == nil {
			tables = []string{anyTable}
		}
		for _, t := range tables {
			if s.readers[t] == nil {
				s.readers[t] = map[Key]struct{}{}
			}
			s.readers[t][k] = struct{}{}
		}
	}
	n := 0
	for s.bytes > s.maxBytes {
		if _, _, ok := s.lru.RemoveOldest(); !ok {
			break
		}
		n++
	}
	if n > 0 && s.evicted != nil {
		s.evicted(n)
	}
	return true
}

// end drops the answers kept under table's version and those that may read any table (table
// changed: they can never be served again), and says how many.
func (s *store) end(table string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range []string{table, anyTable} {
		for k := range s.readers[t] {
			if s.lru.Remove(k) {
				n++
			}
		}
	}
	return n
}

// stats returns the number of answers kept and their bytes.
func (s *store) stats() (entries int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len(), s.bytes
}
