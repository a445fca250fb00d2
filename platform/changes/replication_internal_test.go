package changes

import (
	"maps"
	"slices"
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

// followed is a Follower that keeps the transactions it was handed.
type followed struct{ txs []uint32 }

func (f *followed) Following(bool)                     {}
func (f *followed) Commit(tx *replication.Transaction) { f.txs = append(f.txs, tx.Xid) }

// A delivered commit goes to the follower, and shows on the primary, once one of its snapshots
// sees it: while synchronous replication holds the committing session, the commit is delivered
// but not yet visible there, and neither an answer computed then nor the followed counts may
// count it. A later commit seen first goes first.
func TestCommitShowsOnThePrimaryOnceVisible(t *testing.T) {
	f := &followed{}
	r := &Replication{tables: map[string]uint64{}, hosts: make([]hostView, 1), base: map[string]uint64{},
		combined: map[string]uint64{}, primary: map[string]uint64{}, delivered: make(chan struct{}, 1), follower: f}
	r.Commit(&replication.Transaction{End: 100, Xid: 0xFFFFFFF0, Tables: []string{"fact_record"}})
	r.Commit(&replication.Transaction{End: 200, Xid: 0xFFFFFFF1, Tables: []string{"dim_station"}})
	r.Commit(&replication.Transaction{End: 300, Xid: 0xFFFFFFF2}) // changed no followed table
	if len(r.delivered) != 1 {
		t.Errorf("the delivered commits did not wake confirmAtOnce")
	}
	if len(f.txs) != 0 || r.primary["fact_record"] != 0 {
		t.Fatalf("before a snapshot: followed %x, primary %v; want nothing", f.txs, r.primary)
	}
	// The first still running in the snapshot, the second done.
	running := &delta.Snapshot{Xmin: 0xFFFFFFF0, Xmax: 0xFFFFFFF2, Xip: []uint64{0xFFFFFFF0}}
	if !r.confirm(running) {
		t.Errorf("the first commit is not seen, yet nothing is pending")
	}
	if r.primary["fact_record"] != 0 || r.primary["dim_station"] != 1 || len(r.unconfirmed) != 1 || !slices.Equal(f.txs, []uint32{0xFFFFFFF1}) {
		t.Errorf("after a snapshot seeing the second only: primary %v, %d unconfirmed, followed %x; want dim_station 1, one unconfirmed, the second followed",
			r.primary, len(r.unconfirmed), f.txs)
	}
	r.confirm(running)
	if len(f.txs) != 1 {
		t.Errorf("the same snapshot again handed the follower %x", f.txs)
	}
	// Past the wrap of 32-bit ids: a snapshot of the next epoch sees the first.
	if r.confirm(&delta.Snapshot{Xmin: 1<<32 + 5, Xmax: 1<<32 + 5}) || r.primary["fact_record"] != 1 || len(r.unconfirmed) != 0 ||
		!slices.Equal(f.txs, []uint32{0xFFFFFFF1, 0xFFFFFFF0}) || r.unconfirmedRows != 0 {
		t.Errorf("a later snapshot: primary %v, %d unconfirmed, followed %x; want fact_record 1, none, both", r.primary, len(r.unconfirmed), f.txs)
	}
	if r.tables["fact_record"] != 1 || r.tables["dim_station"] != 1 {
		t.Errorf("delivered versions %v", r.tables)
	}
}

// Commits waiting to be seen are bounded by their number and their rows: past either, the
// oldest is taken as seen.
func TestUnconfirmedBounded(t *testing.T) {
	f := &followed{}
	r := &Replication{tables: map[string]uint64{}, hosts: make([]hostView, 1), base: map[string]uint64{},
		combined: map[string]uint64{}, primary: map[string]uint64{}, delivered: make(chan struct{}, 1), follower: f}
	rows := make([]replication.Row, maxUnconfirmedRows/2+1)
	for i := range 3 {
		r.Commit(&replication.Transaction{Xid: uint32(10 + i), Tables: []string{"fact_record"}, Rows: rows})
	}
	if len(r.unconfirmed) != 1 || r.unconfirmedRows > maxUnconfirmedRows || !slices.Equal(f.txs, []uint32{10, 11}) || r.primary["fact_record"] != 2 {
		t.Errorf("%d unconfirmed of %d rows, followed %v, primary %v; want the two oldest taken as seen", len(r.unconfirmed), r.unconfirmedRows, f.txs, r.primary)
	}
}
