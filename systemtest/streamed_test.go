package systemtest

// Contract 6.10, the answers sent while their rows are read, outside in: the real binary over
// real HTTP, a real PostgreSQL. A caller never waits on another caller's reading (identical
// questions share one computation, made into memory, and each caller is sent its own copy; a
// whole table too large to keep is computed per caller), and slow readers of whole tables hold
// at most LIMITS__MAX_STREAMED_ANSWERS connections, one key at most half of them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// patientsQuery selects every patient: a whole-table list, sent while its rows are read.
const patientsQuery = `{ patients { sk_patient age gender weight date_of_birth } }`

// loadPatients adds n patients (about 80 bytes of answer each).
func loadPatients(t *testing.T, db servicetest.DB, n int) {
	t.Helper()
	if err := db.Cluster.Exec(context.Background(), db.Name, fmt.Sprintf(`
		INSERT INTO dim_patient (sk_patient, age, gender, weight, date_of_birth)
		SELECT i, i %% 100, CASE WHEN i %% 2 = 0 THEN 'female' ELSE 'male' END, 70.5, date '1950-01-01' + i %% 20000
		FROM generate_series(1, %d) AS i;
		ANALYZE dim_patient`, n)); err != nil {
		t.Fatalf("load patients: %v", err)
	}
}

// slowReader is a client that asks a GraphQL question and then reads its answer at a kilobyte a
// second through a 4 KiB receive buffer, until closed.
type slowReader struct {
	conn   net.Conn
	status int
	header http.Header
	read   chan int // bytes read so far, after each read
	done   chan struct{}
}

// startSlowReader sends query with key and reads the response's head, then keeps reading a
// kilobyte a second in the background.
func startSlowReader(t *testing.T, svc *servicetest.Service, key, query string) *slowReader {
	t.Helper()
	addr := strings.TrimPrefix(svc.URL, "http://")
	conn, err := smallReceiveBuffer(&net.Dialer{Timeout: 5 * time.Second}).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"query": query})
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s: %s\r\nContent-Length: %d\r\n\r\n%s",
		addr, svc.Header, key, len(body), body)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(conn, 1024)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		t.Fatalf("slow reader: the response's head: %v", err)
	}
	r := &slowReader{conn: conn, status: resp.StatusCode, header: resp.Header, read: make(chan int, 1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]byte, 1024)
		total := 0
		for {
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
			n, err := resp.Body.Read(buf)
			total += n
			select {
			case <-r.read:
			default:
			}
			r.read <- total
			if err != nil {
				return
			}
			time.Sleep(time.Second)
		}
	}()
	return r
}

// waitBytes waits until the reader has read at least n bytes of the body.
func (r *slowReader) waitBytes(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-r.read:
			r.read <- got
			if got >= n {
				return
			}
			time.Sleep(50 * time.Millisecond)
		case <-deadline:
			t.Fatalf("the slow reader read less than %d bytes in 30 s", n)
		}
	}
}

func (r *slowReader) close() {
	r.conn.Close()
	<-r.done
}

// timedPost is post with its duration.
func timedPost(t *testing.T, svc *servicetest.Service, key, query string) (int, []byte, time.Duration) {
	t.Helper()
	start := time.Now()
	status, _, body, err := post(svc, key, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return status, body, time.Since(start)
}

// TestSlowReaderHoldsNoOtherCaller: a client that reads a kilobyte a second holds a large
// patients answer; another key's identical request completes in about the time it takes alone,
// both when the answer is small enough to keep (one computation, each caller sent its copy) and
// when it is not (each caller runs its own statement).
func TestSlowReaderHoldsNoOtherCaller(t *testing.T) {
	t.Parallel()
	db := servicetest.NewDB(t)
	loadPatients(t, db, 60000) // an answer of about 4 MB
	reader, other := newTestKey("reader", "graphql"), newTestKey("other", "graphql")
	keys := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, keys, reader, other)
	for _, tc := range []struct {
		name, maxBytes string
	}{
		{"kept", "268435456"},    // an answer up to 16 MiB is kept
		{"too large", "8388608"}, // an answer up to 1 MiB is kept
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := servicetest.Start(t, db, map[string]string{
				"AUTHENTICATION__API_KEYS_FILE": keys, "CACHE__MAX_BYTES": tc.maxBytes, "DATABASE__POOL_SIZE": "10",
			})
			// Alone: the same question under another response name (another question to the
			// cache, the same work).
			status, want, _ := timedPost(t, svc, other.secret, `{ patients { sk_patient age gender weight date_of_birth } }`)
			if status != http.StatusOK {
				t.Fatalf("patients: %d %.300s", status, want)
			}
			var alone time.Duration
			for i := 0; i < 3; i++ {
				_, _, d := timedPost(t, svc, other.secret, fmt.Sprintf(`{ p%d: patients { sk_patient age gender weight date_of_birth } }`, i))
				if i == 0 || d < alone {
					alone = d
				}
			}
			slow := startSlowReader(t, svc, reader.secret, patientsQuery)
			defer slow.close()
			if slow.status != http.StatusOK {
				t.Fatalf("the slow reader's answer: status %d", slow.status)
			}
			slow.waitBytes(t, 2048)
			t.Logf("%s: the slow reader is reading", tc.name)
			status, got, took := timedPost(t, svc, other.secret, patientsQuery)
			if status != http.StatusOK || !bytes.Equal(got, want) {
				t.Fatalf("the other key's identical request while the slow reader reads: %d, %d bytes (want %d, the same bytes)", status, len(got), len(want))
			}
			bound := max(3*alone, time.Second)
			t.Logf("%s: alone %s, beside a reader of 1 KB/s %s (bound %s), answer %d bytes", tc.name, alone.Round(time.Millisecond), took.Round(time.Millisecond), bound, len(got))
			if took > bound || took > 10*time.Second {
				t.Errorf("the other key's identical request took %s beside a slow reader, alone %s", took, alone)
			}
		})
	}
}

// TestStreamedAnswersShare: one key opens more slow readers of a whole table than its share of
// LIMITS__MAX_STREAMED_ANSWERS: the extra get 429 with Retry-After, a second key gets 503 once
// every slot is held, paged lists are not bounded, and a third key's records_count keeps its
// p99 under 2 s without a failure all along. The database runs no more of the service's
// statements for them than the bound.
func TestStreamedAnswersShare(t *testing.T) {
	t.Parallel()
	db := servicetest.NewDB(t)
	loadRecords(t, db, 1000)
	loadPatients(t, db, 60000)
	hog, second, victim := newTestKey("hog", "graphql"), newTestKey("second", "graphql"), newTestKey("victim", "graphql")
	keys := filepath.Join(t.TempDir(), "keys.json")
	writeKeysFile(t, keys, hog, second, victim)
	// A pool of 10: 5 streamed answers, 3 for one key. The cache keeps answers up to 1 MiB, so
	// that the patients answer (about 4 MB) is sent while its rows are read.
	svc := servicetest.Start(t, db, map[string]string{
		"AUTHENTICATION__API_KEYS_FILE": keys, "DATABASE__POOL_SIZE": "10", "CACHE__MAX_BYTES": "8388608",
	})

	// The victim asks all along, ten times a second, one at a time.
	stop := make(chan struct{})
	var (
		mu        sync.Mutex
		latencies []time.Duration
		failures  []string
		wg        sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			start := time.Now()
			status, _, body, err := post(svc, victim.secret, fmt.Sprintf(`{ records_count(station: "S%d") { count } }`, i%7))
			d := time.Since(start)
			mu.Lock()
			latencies = append(latencies, d)
			if err != nil || status != http.StatusOK || bytes.Contains(body, []byte(`"errors"`)) {
				failures = append(failures, fmt.Sprintf("%d %v %.200s", status, err, body))
			}
			mu.Unlock()
		}
	}()

	// Whole-table lists small enough to keep are made into memory at the database's pace and
	// hold no slot: one key's eight at once are all answered (once the cache knows the data
	// version; before, an answer goes to its client as it is made and holds one).
	waitCacheLive(t, svc)
	var burst sync.WaitGroup
	for i := 0; i < 8; i++ {
		burst.Add(1)
		go func() {
			defer burst.Done()
			status, _, body, err := post(svc, hog.secret, fmt.Sprintf(`{ r%d: resources { sk_resource } s%d: oxygens { sk_oxygen } }`, i, i))
			if err != nil || status != http.StatusOK || bytes.Contains(body, []byte(`"errors"`)) {
				t.Errorf("whole-table lists kept in memory, %d of 8 at once: %d %v %.300s", i+1, status, err, body)
			}
		}()
	}
	burst.Wait()

	var readers []*slowReader
	defer func() {
		for _, r := range readers {
			r.close()
		}
	}()
	open := func(key testKey) *slowReader {
		r := startSlowReader(t, svc, key.secret, patientsQuery)
		readers = append(readers, r)
		return r
	}
	ok, limited := 0, 0
	for i := 0; i < 32; i++ {
		r := open(hog)
		switch r.status {
		case http.StatusOK:
			ok++
			r.waitBytes(t, 1)
		case http.StatusTooManyRequests:
			limited++
			if r.header.Get("Retry-After") == "" {
				t.Errorf("slow reader %d of the hog: 429 without Retry-After", i+1)
			}
		default:
			t.Errorf("slow reader %d of the hog: status %d", i+1, r.status)
		}
	}
	if ok != 3 || limited != 29 {
		t.Errorf("the hog's 32 slow readers: %d answered, %d refused with 429; want 3 and 29", ok, limited)
	}
	// The hog's refusal names the bound.
	status, h, body, err := post(svc, hog.secret, patientsQuery)
	if err != nil || status != http.StatusTooManyRequests || h.Get("Retry-After") == "" ||
		errorCode(t, body, true) != "RATE_LIMITED" || !bytes.Contains(body, []byte("LIMITS__MAX_STREAMED_ANSWERS=5")) {
		t.Errorf("the hog past its share: %d %v %s", status, h, body)
	}
	// A paged list is not such an answer.
	if status, _, body, err := post(svc, hog.secret, `{ patients(limit: 10) { sk_patient } }`); err != nil || status != http.StatusOK || bytes.Contains(body, []byte(`"errors"`)) {
		t.Errorf("a page of patients for the hog at its share: %d %v %.300s", status, err, body)
	}
	// Another key takes the two slots left, then meets the total: 503.
	for i := 0; i < 2; i++ {
		if r := open(second); r.status != http.StatusOK {
			t.Errorf("the second key's slow reader %d: status %d, want 200", i+1, r.status)
		}
	}
	status, h, body, err = post(svc, second.secret, patientsQuery)
	if err != nil || status != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || errorCode(t, body, true) != "SERVICE_UNAVAILABLE" {
		t.Errorf("the second key with every slot held: %d %v %s; want 503 SERVICE_UNAVAILABLE with Retry-After", status, h, body)
	}
	// The slow readers hold their statements: no more than the bound.
	pool := db.Pool(t)
	var running int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'emsquery' AND query ILIKE '%dim_patient%' AND state <> 'idle'`).Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running > 5 {
		t.Errorf("%d of the service's statements on dim_patient while the readers read; the bound is 5", running)
	}
	time.Sleep(5 * time.Second) // the victim asks on while the readers hold their slots
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	if len(latencies) < 20 {
		t.Fatalf("the victim asked %d times", len(latencies))
	}
	p99 := latencies[(len(latencies)*99-1)/100]
	t.Logf("victim: %d requests, p50 %s, p99 %s, max %s; statements on dim_patient: %d",
		len(latencies), latencies[len(latencies)/2].Round(time.Millisecond), p99.Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond), running)
	if len(failures) > 0 {
		t.Errorf("the victim's requests failed: %q", failures)
	}
	if p99 >= 2*time.Second {
		t.Errorf("the victim's p99 %s, want < 2 s", p99)
	}
	// Given back: once the readers are gone, the hog is served again.
	for _, r := range readers {
		r.close()
	}
	readers = nil
	servicetest.WaitFor(t, 10*time.Second, "the hog served once its readers left", func() bool {
		status, _, body, err := post(svc, hog.secret, patientsQuery)
		return err == nil && status == http.StatusOK && bytes.HasSuffix(body, []byte("]}}"))
	})
}
