package answercache

import (
	"bytes"
	"fmt"
	"testing"
)

func answerOf(n int) *Answer {
	return &Answer{Status: 200, Header: [][2]string{{"Content-Type", "application/json"}}, Body: bytes.Repeat([]byte("x"), n)}
}

func keyN(i int) Key {
	var k Key
	copy(k[:], fmt.Sprintf("%031d", i))
	return k
}

// The bound holds however many distinct answers come: the least recently used go first.
func TestStoreStaysWithinItsBytes(t *testing.T) {
	const max = 1 << 20
	evictions := 0
	s := newStore(max, func(n int) { evictions += n })
	for i := range 10000 {
		if !s.put(keyN(i), answerOf(1000+i%5000), 1, false, nil) {
			t.Fatalf("answer %d not kept", i)
		}
		if _, b := s.stats(); b > max {
			t.Fatalf("after %d answers: %d bytes kept, bound %d", i+1, b, max)
		}
	}
	n, b := s.stats()
	if n == 0 || b < max/2 {
		t.Errorf("%d answers, %d bytes kept: the bound is not used", n, b)
	}
	if evictions != 10000-n {
		t.Errorf("%d evictions counted, want %d", evictions, 10000-n)
	}
	// The newest are kept, the oldest gone.
	if s.get(keyN(9999), 1) == nil || s.get(keyN(0), 1) != nil {
		t.Error("eviction is not least recently used first")
	}
}

func TestStoreLeastRecentlyUsedGoesFirst(t *testing.T) {
	a := answerOf(1000)
	s := newStore(3*a.Size(), nil)
	s.maxEntry = a.Size()
	s.put(keyN(1), a, 1, false, nil)
	s.put(keyN(2), a, 1, false, nil)
	s.put(keyN(3), a, 1, false, nil)
	s.get(keyN(1), 1) // 2 is now the least recently used
	s.put(keyN(4), a, 1, false, nil)
	if s.get(keyN(2), 1) != nil || s.get(keyN(1), 1) == nil || s.get(keyN(3), 1) == nil || s.get(keyN(4), 1) == nil {
		t.Error("not the least recently used answer went")
	}
	// Replacing an answer counts its bytes once.
	s.put(keyN(4), a, 1, false, nil)
	if n, b := s.stats(); n != 3 || b != 3*a.Size() {
		t.Errorf("after replacing: %d answers, %d bytes; want 3, %d", n, b, 3*a.Size())
	}
}

func TestStoreKeepsNoLargeAnswer(t *testing.T) {
	s := newStore(8<<10, nil)
	if s.put(keyN(1), answerOf(2<<10), 1, false, nil) {
		t.Error("an answer larger than an eighth of the bound was kept")
	}
	if !s.put(keyN(2), answerOf(100), 1, false, nil) {
		t.Error("a small answer was not kept")
	}
}

// Answers belong to one epoch: a newer one drops them all; an answer computed in an older one
// is neither served nor kept.
func TestStoreEpochs(t *testing.T) {
	s := newStore(1<<20, nil)
	s.put(keyN(1), answerOf(10), 5, false, nil)
	if s.get(keyN(1), 5) == nil {
		t.Fatal("answer not kept")
	}
	if s.get(keyN(1), 4) != nil {
		t.Error("answer served to a request of an older epoch")
	}
	if s.get(keyN(1), 6) != nil {
		t.Error("answer of epoch 5 served in epoch 6")
	}
	if n, b := s.stats(); n != 0 || b != 0 {
		t.Errorf("a new epoch left %d answers, %d bytes", n, b)
	}
	if s.put(keyN(2), answerOf(10), 5, false, nil) {
		t.Error("an answer computed in epoch 5 was kept in epoch 6")
	}
	if s.get(keyN(2), 6) != nil {
		t.Error("an answer of an older epoch is served")
	}
}

// A table's change ends the answers kept under its version and those of any table, and only
// them; they leave memory at once.
func TestStoreEndsATablesAnswers(t *testing.T) {
	s := newStore(1<<20, nil)
	a := answerOf(100)
	s.put(keyN(1), a, 1, true, []string{"dim_resource", "dim_station"})
	s.put(keyN(2), a, 1, true, []string{"fact_record"})
	s.put(keyN(3), a, 1, true, nil)                     // any table
	s.put(keyN(4), a, 1, false, nil)                    // snapshot: the epoch ends it
	s.put(keyN(5), a, 1, true, []string{"fact_record"}) // evicted below
	s.lru.Remove(keyN(5))
	if n := s.end("fact_record"); n != 2 {
		t.Errorf("a change to fact_record ended %d answers, want 2 (its own and the one of any table)", n)
	}
	if s.get(keyN(2), 1) != nil || s.get(keyN(3), 1) != nil {
		t.Error("an ended answer is still kept")
	}
	if s.get(keyN(1), 1) == nil || s.get(keyN(4), 1) == nil {
		t.Error("an answer of other tables was ended")
	}
	if n := s.end("dim_station"); n != 1 {
		t.Errorf("a change to dim_station ended %d answers, want 1", n)
	}
	if n := s.end("dim_resource"); n != 0 {
		t.Errorf("an answer was ended twice (%d)", n)
	}
	if entries, bytes := s.stats(); entries != 1 || bytes != a.Size() {
		t.Errorf("%d answers, %d bytes kept; want 1, %d", entries, bytes, a.Size())
	}
}
