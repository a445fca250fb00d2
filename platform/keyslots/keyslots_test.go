package keyslots

import (
	"sync"
	"testing"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

func TestKeyShareThenTotal(t *testing.T) {
	s := New(5, HalfRoundedUp(5), "answers", "LIMITS__MAX_STREAMED_ANSWERS", 10)
	var releases []func()
	for i := 0; i < 3; i++ {
		r, err := s.Take("a")
		if err != nil {
			t.Fatalf("take %d of key a: %v", i+1, err)
		}
		releases = append(releases, r)
	}
	if _, err := s.Take("a"); err == nil || err.Code != apierr.RateLimited {
		t.Fatalf("key a past its share of 3: %v, want RATE_LIMITED", err)
	}
	for i := 0; i < 2; i++ {
		r, err := s.Take("b")
		if err != nil {
			t.Fatalf("take %d of key b: %v", i+1, err)
		}
		releases = append(releases, r)
	}
	// Both bounds reached for a: the total wins.
	if _, err := s.Take("a"); err == nil || err.Code != apierr.ServiceUnavailable {
		t.Fatalf("all 5 held, key a at its share: %v, want SERVICE_UNAVAILABLE", err)
	}
	if _, err := s.Take("c"); err == nil || err.Code != apierr.ServiceUnavailable {
		t.Fatalf("all 5 held: %v, want SERVICE_UNAVAILABLE", err)
	}
	releases[0]()
	releases[0]() // twice gives back once
	if got := s.Held(); got != 4 {
		t.Fatalf("held after one release (called twice): %d, want 4", got)
	}
	if _, err := s.Take("a"); err != nil {
		t.Fatalf("key a after giving one back: %v", err)
	}
}

func TestConcurrentTakesNeverPassTheBounds(t *testing.T) {
	s := New(4, 2, "things", "X", 1)
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		held, max int
		byKey     = map[string]int{}
	)
	for g := 0; g < 8; g++ {
		key := string(rune('a' + g%3))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				r, err := s.Take(key)
				if err != nil {
					continue
				}
				mu.Lock()
				held++
				byKey[key]++
				if held > max {
					max = held
				}
				if byKey[key] > 2 {
					t.Errorf("key %s holds %d, share 2", key, byKey[key])
				}
				held--
				byKey[key]--
				mu.Unlock()
				r()
			}
		}()
	}
	wg.Wait()
	if max > 4 {
		t.Errorf("held %d at once, total 4", max)
	}
	if s.Held() != 0 {
		t.Errorf("held %d at the end", s.Held())
	}
}
