package changes

import (
	"maps"
	"testing"

	"github.com/emsanalytics/emsquery/platform/replication"
	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

func newTwoHosts() *Replication {
	return &Replication{tables: map[string]uint64{}, hosts: make([]hostView, 2), base: map[string]uint64{}, combined: map[string]uint64{}, primary: map[string]uint64{}}
}

func commit(r *Replication, end replication.LSN, tables ...string) {
	r.Commit(&replication.Transaction{End: end, Tables: tables})
}

// A standby shows the commits its replay position has reached; a table's combined version moves
// whenever any host's view of it moves, and only then.
func TestStandbyShowsWhatItReplayed(t *testing.T) {
	r := newTwoHosts()
	commit(r, 100, "fact_record")
	commit(r, 200, "dim_station")
	r.show(0, maps.Clone(r.tables)) // the primary
	r.hosts[1].standby, r.hosts[1].replayed = true, 150
	r.show(1, r.visibleAt(150)) // the standby replayed the first commit only
	r.prune()
	v1 := maps.Clone(r.combined)
	if got := r.visibleAt(150); got["fact_record"] != 1 || got["dim_station"] != 0 {
		t.Errorf("at 150 the standby shows %v, want fact_record 1, dim_station 0", got)
	}
	// The standby replays the second commit: dim_station's version moves, fact_record's not.
	r.hosts[1].replayed = 200
	r.show(1, r.visibleAt(200))
	r.prune()
	if r.combined["dim_station"] == v1["dim_station"] || r.combined["fact_record"] != v1["fact_record"] {
		t.Errorf("after the standby replayed dim_station's commit: %v, before %v", r.combined, v1)
	}
	if len(r.pending) != 0 || r.base["fact_record"] != 1 || r.base["dim_station"] != 1 {
		t.Errorf("every host shows both commits: pending %v, base %v; want none pending", r.pending, r.base)
	}
	// Polls that see nothing new move nothing.
	v2 := maps.Clone(r.combined)
	r.show(0, maps.Clone(r.tables))
	r.show(1, r.visibleAt(300))
	if !maps.Equal(v2, r.combined) {
		t.Errorf("polls without a change moved the versions: %v, before %v", r.combined, v2)
	}
}

// Past maxPending the oldest pending commit is merged into the next: a standby shows it only
// with the next, later, never earlier.
func TestPendingCommitsBounded(t *testing.T) {
	r := newTwoHosts()
	r.hosts[1].standby = true
	for i := range maxPending + 1 {
		table := "fact_record"
		if i == 0 {
			table = "dim_station"
		}
		commit(r, replication.LSN(100+i), table)
	}
	if len(r.pending) != maxPending {
		t.Fatalf("%d commits pending, want at most %d", len(r.pending), maxPending)
	}
	if got := r.visibleAt(100); got["dim_station"] != 0 {
		t.Errorf("the merged commit shows at its own end: %v", got)
	}
	if got := r.visibleAt(101); got["dim_station"] != 1 || got["fact_record"] != 1 {
		t.Errorf("at the next commit's end the standby shows %v, want dim_station 1, fact_record 1", got)
	}
}

// A recovery bumps every table; a standby shows it once it replayed past the position the new
// stream starts from.
func TestResumedPendsForStandbys(t *testing.T) {
	r := newTwoHosts()
	commit(r, 100, "fact_record")
	r.Resumed(500)
	if got := r.visibleAt(499); got["fact_record"] != 1 {
		t.Errorf("before the new stream's start a standby shows %v, want fact_record 1", got)
	}
	if got := r.visibleAt(500); got["fact_record"] != 2 {
		t.Errorf("at the new stream's start a standby shows %v, want fact_record 2", got)
	}
}

// A delivered commit shows on the primary once one of its snapshots sees it: while
// synchronous replication holds the committing session, the commit is delivered but not yet
// visible there, and an answer computed then must not be kept under versions that count it.
func TestCommitShowsOnThePrimaryOnceVisible(t *testing.T) {
	r := &Replication{tables: map[string]uint64{}, hosts: make([]hostView, 1), base: map[string]uint64{},
		combined: map[string]uint64{}, primary: map[string]uint64{}, confirm: make(chan struct{}, 1)}
	r.Commit(&replication.Transaction{End: 100, Xid: 0xFFFFFFF0, Tables: []string{"fact_record"}})
	r.Commit(&replication.Transaction{End: 200, Xid: 0xFFFFFFF1, Tables: []string{"dim_station"}})
	r.Commit(&replication.Transaction{End: 300, Xid: 0xFFFFFFF2}) // changed no followed table
	if len(r.confirm) != 1 {
		t.Errorf("the delivered commits did not wake confirmAtOnce")
	}
	// The first still running in the snapshot, the second done.
	running := &delta.Snapshot{Xmin: 0xFFFFFFF0, Xmax: 0xFFFFFFF2, Xip: []uint64{0xFFFFFFF0}}
	if !r.confirmWith(running) {
		t.Errorf("a snapshot that sees the second confirmed nothing")
	}
	if r.primary["fact_record"] != 0 || r.primary["dim_station"] != 1 || len(r.unconfirmed) != 1 {
		t.Errorf("after a snapshot seeing the second only: primary %v, %d unconfirmed; want dim_station 1, one unconfirmed", r.primary, len(r.unconfirmed))
	}
	if r.confirmWith(running) {
		t.Errorf("the same snapshot again confirmed something")
	}
	// Past the wrap of 32-bit ids: a snapshot of the next epoch sees the first.
	if !r.confirmWith(&delta.Snapshot{Xmin: 1<<32 + 5, Xmax: 1<<32 + 5}) || r.primary["fact_record"] != 1 || len(r.unconfirmed) != 0 {
		t.Errorf("a later snapshot: primary %v, %d unconfirmed; want fact_record 1, none", r.primary, len(r.unconfirmed))
	}
	if r.tables["fact_record"] != 1 || r.tables["dim_station"] != 1 {
		t.Errorf("delivered versions %v", r.tables)
	}
}
