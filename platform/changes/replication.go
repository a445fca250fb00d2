package changes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/emsanalytics/emsquery/platform/database"
	"github.com/emsanalytics/emsquery/platform/replication"
	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

// Mode is where the service learns that data changed (CACHE__CHANGES).
type Mode string

// The modes.
const (
	ModeAuto        Mode = "auto"        // replication when the server has what it needs, snapshot otherwise
	ModeReplication Mode = "replication" // the followed tables' committed changes; refuses to start without
	ModeSnapshot    Mode = "snapshot"    // the server's data version (Snapshot)
)

// Options choose and set up a change source.
type Options struct {
	Mode          Mode
	Publication   string        // CACHE__PUBLICATION
	NotifyChannel string        // CACHE__NOTIFY_CHANNEL; empty: no LISTEN
	MaxStaleness  time.Duration // CACHE__MAX_STALENESS: how often the catalog is compared
	PollInterval  time.Duration // how often each host is read (CACHE__MAX_STALENESS/2)
	Logger        *slog.Logger
	// Follower, when not nil, is handed every committed transaction of the replication source
	// (platform/follow keeps counting answers up to date with them).
	Follower Follower
}

// Follower keeps something up to date from the committed rows themselves. Its methods are
// called one at a time. A transaction is handed to Commit once the primary's statements see it:
// in commit order, except that one held hidden (synchronous replication waiting for a standby)
// comes after later ones already seen, which cannot have changed its rows (it holds their
// locks until it is seen).
type Follower interface {
	// Following: from now on every committed transaction is handed to Commit (true), or no
	// longer (false). Either way whatever was derived from the rows is dropped: a change may
	// have been missed (the stream lost or started again, a table's definition changed).
	Following(on bool)
	// Commit: a committed transaction the primary shows, before the versions of the tables it
	// changed move.
	Commit(tx *replication.Transaction)
}

// Source is a change source: Snapshot or Replication.
type Source interface {
	// Hosts is how many database hosts Watch reports on.
	Hosts() int
	// Watch reports to w until ctx ends.
	Watch(ctx context.Context, w Watcher)
	// Health is the source's state, for /v1/healthz and metrics.
	Health() Health
	// Close releases what the source holds (the replication slot).
	Close()
}

// Health is a change source's state.
type Health struct {
	Source string `json:"source"` // "replication" or "snapshot"
	// State: "streaming" or "lost" (replication), "polling" (snapshot).
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// Failures and Recoveries count the replication streams lost and started again.
	Failures   int64 `json:"failures,omitempty"`
	Recoveries int64 `json:"recoveries,omitempty"`
	// LagBytes is how far behind the primary's flushed WAL the stream was at the latest poll.
	LagBytes int64 `json:"lag_bytes,omitempty"`
	Err      error `json:"-"`
}

// Health of the snapshot source: it polls; its failures are the cache's to tell.
func (s *Snapshot) Health() Health { return Health{Source: string(ModeSnapshot), State: "polling"} }

// Close does nothing: Watch's connections end with its context.
func (s *Snapshot) Close() {}

// Open returns the change source o.Mode asks for. ModeAuto checks what replication needs and
// falls back to Snapshot, logging what was missing; ModeReplication refuses to start (a
// *replication.MissingError names what is missing). ctx bounds the start.
func Open(ctx context.Context, db *database.DB, o Options) (Source, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	snapshot := NewSnapshot(db, o.NotifyChannel, o.PollInterval)
	if o.Mode == ModeSnapshot {
		log.Info("cache: change source snapshot (CACHE__CHANGES=snapshot)")
		return snapshot, nil
	}
	r, err := openReplication(ctx, db, o, log)
	if err == nil {
		log.Info("cache: change source replication", "publication", o.Publication, "changes", string(o.Mode))
		return r, nil
	}
	if o.Mode == ModeReplication {
		return nil, fmt.Errorf("CACHE__CHANGES=replication: %w", err)
	}
	log.Info("cache: change source snapshot (CACHE__CHANGES=auto: replication is not in place)", "missing", err.Error())
	return snapshot, nil
}

func openReplication(ctx context.Context, db *database.DB, o Options, log *slog.Logger) (*Replication, error) {
	ccs := db.HostConnConfigs()
	ropts := replication.Options{
		Conn:        primaryConnConfig(ccs),
		Publication: o.Publication,
		// Each poll waits for the stream to report a position past the primary's flushed WAL
		// (see Replication.version), which takes up to one status interval.
		StatusInterval: max(o.PollInterval/4, 10*time.Millisecond),
		Logger:         log,
	}
	report, err := replication.Check(ctx, ropts)
	if err != nil {
		return nil, err
	}
	if len(report.Missing) > 0 {
		return nil, &replication.MissingError{Missing: report.Missing}
	}
	r := &Replication{
		ropts: ropts, staleness: o.MaxStaleness, streaming: true, resumed: make(chan struct{}),
		tables: map[string]uint64{}, since: time.Now(), hosts: make([]hostView, len(ccs)),
		base: map[string]uint64{}, combined: map[string]uint64{}, follower: o.Follower,
		primary: map[string]uint64{}, delivered: make(chan struct{}, 1), db: db,
	}
	r.snapshot = NewSnapshot(db, o.NotifyChannel, o.PollInterval)
	r.snapshot.version = r.version
	r.src, err = replication.Start(ctx, ropts, r)
	if err != nil {
		return nil, err
	}
	// Every commit after Start returned is delivered.
	r.follow(true)
	return r, nil
}

// primaryConnConfig reaches whichever of the hosts is the primary (the replication package
// connects with target_session_attrs=primary, on each reconnection again, so the slot follows a
// failover): the first host's settings with the others as fallbacks.
func primaryConnConfig(ccs []*pgx.ConnConfig) *pgx.ConnConfig {
	cc := ccs[0].Copy()
	if len(ccs) < 2 {
		return cc
	}
	cc.Fallbacks = nil
	for _, h := range ccs[1:] {
		cc.Fallbacks = append(cc.Fallbacks, &pgconn.FallbackConfig{Host: h.Host, Port: h.Port, TLSConfig: h.TLSConfig})
	}
	return cc
}

// Replication is the change source that follows the committed changes of the followed tables
// (platform/replication): each table has a version that every committed transaction touching
// it advances, so an answer whose tables did not change outlives writes elsewhere on the server.
//
// It shares Snapshot's watch connections (one per host, their LISTEN and their reconnection):
// each poll reads the host's position at the time the poll is sent and reports only once the
// stream has processed past it, so every commit made before the poll was handed to Commit before
// the poll's version is reported: Version(sent) keeps 6.5's meaning. On the primary that
// position is its flushed WAL, and the poll's statement also reads the primary's snapshot: a
// delivered commit shows there once a snapshot sees it (unconfirmed), and with the primary as
// the only host as soon as one does (confirmAtOnce). On a hot standby it is the replay position
// (pg_last_wal_replay_lsn): a commit is visible there once the standby replayed it, that is
// once its End is at or before that position, so the poll counts only those. What a host shows of each table is its view (hostView); a table's version
// as the cache sees it moves whenever any host's view of it moves, so an answer a lagging
// standby computed after the primary showed a change is kept under a version that ends when the
// standby shows it too (the snapshot source's rule for several hosts, per table).
//
// Every CACHE__MAX_STALENESS the poll also reads the host's catalog fingerprint (a definition
// change that pgoutput would announce only with the next row change; a standby shows it once
// replayed). While the stream is lost no version is reported (the cache's bound runs out, as for
// a lost poll), and the stream's Lost is the watcher's Lost, so the first version after the
// recovery starts a new epoch.
type Replication struct {
	snapshot  *Snapshot
	src       *replication.Source
	ropts     replication.Options
	staleness time.Duration

	mu        sync.Mutex
	w         Watcher
	tables    map[string]uint64 // each followed table's version: the commits delivered that changed it
	resumes   uint64            // the recoveries after a loss
	streaming bool
	since     time.Time
	resumed   chan struct{} // closed when streaming again after a loss
	lag       int64

	// hosts are what each configured host showed at its latest poll.
	hosts []hostView
	// pending are the commits (in commit order) that some standby may not have replayed yet,
	// base the tables' versions before the first of them: a standby at replay position p shows
	// base plus the pending commits whose End is at or before p. Kept with several hosts only.
	pending []pendingCommit
	base    map[string]uint64
	// combined are the tables' versions the cache sees: a table's moves each time a host's view
	// of it moves.
	combined map[string]uint64

	// unconfirmed are the commits delivered that no snapshot of the primary was seen to show
	// yet, in commit order (unconfirmedRows their rows), and primary the tables' versions of
	// those that one did: what the primary shows. A commit reaches the flushed WAL, and so the
	// stream, before it is visible to the primary's statements, the more so while synchronous
	// replication holds it (the committing session waits for its standbys before the
	// transaction becomes visible): an answer computed then would miss it, and be kept under
	// versions that already count it; counts followed from it would show it before the
	// database does. So it goes to the follower, and moves the versions, once seen there.
	unconfirmed     []*replication.Transaction
	unconfirmedRows int
	primary         map[string]uint64
	// delivered wakes confirmAtOnce (a commit was delivered), db is where it reads the
	// primary's snapshot.
	delivered chan struct{}
	db        *database.DB

	// follower (may be nil) is handed the committed transactions; followMu orders its calls,
	// and is taken before mu.
	follower Follower
	followMu sync.Mutex
}

// hostView is what one host showed at its latest poll.
type hostView struct {
	tables      map[string]uint64 // the versions of the commits visible there
	standby     bool
	replayed    replication.LSN // a standby's replay position
	fingerprint string
	fpRead      time.Time
}

// follow tells the follower whether it is handed every commit from now on.
func (r *Replication) follow(on bool) {
	if r.follower == nil {
		return
	}
	r.followMu.Lock()
	defer r.followMu.Unlock()
	r.follower.Following(on)
}

// pendingCommit is a commit some standby may not show yet: where it ended, and the tables it
// changed.
type pendingCommit struct {
	end    replication.LSN
	tables []string
}

// maxPending bounds the commits kept for standbys that lag (or whose polls fail): past it the
// oldest is merged into the next, which makes a standby show both only once it replayed the
// later one, so its answers end a little later than they could, never too early. It also bounds
// the commits waiting to be seen on the primary, and maxUnconfirmedRows their rows: past either
// the oldest is taken as seen (only while the primary's snapshot cannot be read, when nothing is
// served from memory anyway).
const (
	maxPending         = 100_000
	maxUnconfirmedRows = 1_000_000
)

// Hosts is how many database hosts are configured: each is polled, the slot is on the primary.
func (r *Replication) Hosts() int { return len(r.hosts) }

// Watch polls and listens as Snapshot does, with replication's version.
func (r *Replication) Watch(ctx context.Context, w Watcher) {
	r.mu.Lock()
	r.w = w
	r.mu.Unlock()
	if len(r.hosts) == 1 {
		go r.confirmAtOnce(ctx)
	}
	r.snapshot.Watch(ctx, w)
}

// Close ends the stream, which drops the slot.
func (r *Replication) Close() {
	r.src.Close()
	r.follow(false)
}

// Commit advances the versions the stream delivered of the tables tx changed, and keeps tx
// until a snapshot of the primary sees it (confirm): then it goes to the follower, and the
// primary's versions move, so that an answer computed after its version moved finds the change
// in the database and in the followed counts alike.
func (r *Replication) Commit(tx *replication.Transaction) {
	if len(tx.Tables) == 0 {
		return
	}
	r.followMu.Lock()
	defer r.followMu.Unlock()
	r.mu.Lock()
	for _, t := range tx.Tables {
		r.tables[t]++
	}
	r.addPending(tx.End, tx.Tables)
	r.unconfirmed = append(r.unconfirmed, tx)
	r.unconfirmedRows += len(tx.Rows)
	var over []*replication.Transaction
	for len(r.unconfirmed) > 1 && (len(r.unconfirmed) > maxPending || r.unconfirmedRows > maxUnconfirmedRows) {
		over = append(over, r.unconfirmed[0])
		r.unconfirmedRows -= len(r.unconfirmed[0].Rows)
		r.unconfirmed[0] = nil
		r.unconfirmed = r.unconfirmed[1:]
	}
	r.mu.Unlock()
	r.reveal(over)
	select {
	case r.delivered <- struct{}{}:
	default:
	}
}

// confirm hands the follower the delivered commits that snap (a snapshot of the primary) sees,
// and moves the primary's versions of their tables; it says whether some delivered commit is
// still not seen.
func (r *Replication) confirm(snap *delta.Snapshot) (pending bool) {
	r.followMu.Lock()
	defer r.followMu.Unlock()
	r.mu.Lock()
	var seen []*replication.Transaction
	n := 0
	for _, tx := range r.unconfirmed {
		if snap.Sees(tx.Xid) {
			seen = append(seen, tx)
			r.unconfirmedRows -= len(tx.Rows)
			continue
		}
		r.unconfirmed[n] = tx
		n++
	}
	clear(r.unconfirmed[n:])
	r.unconfirmed = r.unconfirmed[:n]
	r.mu.Unlock()
	r.reveal(seen)
	return n > 0
}

// reveal hands txs, which the primary shows, to the follower, then moves the primary's versions
// of their tables (at once for the cache when the primary is the only host). followMu is held.
func (r *Replication) reveal(txs []*replication.Transaction) {
	if len(txs) == 0 {
		return
	}
	if r.follower != nil {
		for _, tx := range txs {
			r.follower.Commit(tx)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tx := range txs {
		for _, t := range tx.Tables {
			r.primary[t]++
		}
	}
	if len(r.hosts) == 1 && r.hosts[0].tables != nil && !r.hosts[0].standby {
		if tw, ok := r.w.(TableWatcher); ok {
			r.show(0, maps.Clone(r.primary))
			tw.Tables(maps.Clone(r.combined))
		}
	}
}

// confirmAtOnce, with the primary as the only host, shows each delivered commit as soon as a
// snapshot of the primary sees it, rather than at the next poll (up to half of
// CACHE__MAX_STALENESS later): live answers of its tables are computed again right after the
// commit. A commit not visible yet (synchronous replication holding it) is looked for again,
// less and less often, until the next poll, which looks too.
func (r *Replication) confirmAtOnce(ctx context.Context) {
	const first = 2 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.delivered:
		}
		for wait := first; ; wait *= 2 {
			if !r.confirmNow(ctx) || wait > r.snapshot.interval {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-r.delivered:
				wait = first / 2
			case <-time.After(wait):
			}
		}
	}
}

// opConfirm is confirmAtOnce's statement (db.client.operation.duration).
const opConfirm = "cache commits visible"

// confirmNow reads the primary's snapshot, shows the commits it sees, and says whether some
// delivered commit is still not visible.
func (r *Replication) confirmNow(ctx context.Context) (pending bool) {
	const q = `SELECT pg_current_snapshot()::text WHERE NOT pg_is_in_recovery()`
	qctx, cancel := context.WithTimeout(ctx, r.snapshot.interval)
	defer cancel()
	var text string
	if err := r.db.QueryRow(qctx, opConfirm, q, nil, &text); err != nil {
		return false // the poll shows what this could not
	}
	snap, err := delta.ParseSnapshot(text)
	if err != nil {
		return false
	}
	return r.confirm(snap)
}

// addPending notes a commit that ended at end and changed tables, for the standbys' views;
// r.mu is held.
func (r *Replication) addPending(end replication.LSN, tables []string) {
	if len(r.hosts) < 2 || len(tables) == 0 {
		return
	}
	r.pending = append(r.pending, pendingCommit{end: end, tables: slices.Clone(tables)})
	if len(r.pending) > maxPending {
		first, next := r.pending[0], &r.pending[1]
		for _, t := range first.tables {
			if !slices.Contains(next.tables, t) {
				next.tables = append(next.tables, t)
			}
		}
		r.pending = r.pending[1:]
	}
}

// visibleAt is the tables' versions a standby that replayed up to pos shows; r.mu is held.
func (r *Replication) visibleAt(pos replication.LSN) map[string]uint64 {
	v := maps.Clone(r.base)
	for _, c := range r.pending {
		if c.end > pos {
			break
		}
		for _, t := range c.tables {
			v[t]++
		}
	}
	return v
}

// prune folds into base the pending commits that every host shows (a host not polled yet
// shows none); r.mu is held.
func (r *Replication) prune() {
	var upTo replication.LSN = math.MaxUint64
	for _, h := range r.hosts {
		switch {
		case h.tables == nil:
			return
		case h.standby:
			upTo = min(upTo, h.replayed)
		}
	}
	n := 0
	for n < len(r.pending) && r.pending[n].end <= upTo {
		for _, t := range r.pending[n].tables {
			r.base[t]++
		}
		n++
	}
	r.pending = slices.Delete(r.pending, 0, n)
}

// show records what host shows now (tables), and moves the combined version of each table
// whose version there moved; r.mu is held.
func (r *Replication) show(host int, tables map[string]uint64) {
	old := r.hosts[host].tables
	for t, n := range tables {
		if old[t] != n {
			r.combined[t]++
		}
	}
	for t := range old {
		if _, ok := tables[t]; !ok {
			r.combined[t]++
		}
	}
	r.hosts[host].tables = tables
}

// Lost: until Resumed no version is reported; the watcher is told at once.
func (r *Replication) Lost(err error) {
	r.follow(false)
	r.mu.Lock()
	r.streaming, r.since = false, time.Now()
	if r.resumed == nil {
		r.resumed = make(chan struct{})
	}
	w := r.w
	r.mu.Unlock()
	if w != nil {
		w.Lost(0, fmt.Errorf("replication: %w", err))
	}
}

// Resumed: changes between the loss and at were not seen, so every version moves.
func (r *Replication) Resumed(at replication.LSN) {
	r.follow(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streaming, r.since = true, time.Now()
	r.resumes++
	changed := slices.Sorted(maps.Keys(r.tables))
	for _, t := range changed {
		r.tables[t]++
		// The commits missed were made before the new stream's start, which waits for the
		// transactions running then: the primary shows them.
		r.primary[t]++
	}
	// The commits missed ended before at: a standby shows them once it replayed that far.
	r.addPending(at, changed)
	if r.resumed != nil {
		close(r.resumed)
		r.resumed = nil
	}
}

// TableVersions is each followed table's version now (a table never changed is absent, at 0).
func (r *Replication) TableVersions() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.tables)
}

// Health is the stream's state.
func (r *Replication) Health() Health {
	st := r.src.State()
	r.mu.Lock()
	defer r.mu.Unlock()
	h := Health{Source: string(ModeReplication), State: "streaming", Since: st.Since,
		Failures: st.Failures, Recoveries: st.Recoveries, LagBytes: r.lag, Err: st.Err}
	if !st.Streaming {
		h.State = "lost"
	}
	return h
}

// waitStreaming returns once the stream is up, or ctx's error.
func (r *Replication) waitStreaming(ctx context.Context) error {
	r.mu.Lock()
	ch := r.resumed
	if r.streaming {
		ch = nil
	}
	r.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// positionPoll is how often the stream's position is looked at while a poll waits for it.
const positionPoll = 5 * time.Millisecond

// positionQuery reads where a host stands: a standby's replay position, or the primary's
// flushed WAL.
const positionQuery = `SELECT pg_is_in_recovery(),
	(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_flush_lsn() END)::text,
	pg_current_snapshot()::text`

// version is the poll of the replication source on host (see Replication): it reads where the
// host stands, waits for the stream to pass that position, then names the versions.
func (r *Replication) version(ctx context.Context, host int, conn *pgx.Conn, timeout time.Duration) (string, error) {
	if err := r.waitStreaming(ctx); err != nil {
		return "", err
	}
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		standby  bool
		pos      *string
		snapText string
	)
	start := time.Now()
	err := conn.QueryRow(qctx, positionQuery).Scan(&standby, &pos, &snapText)
	r.snapshot.db.Measure(ctx, opDataVersion, start, err)
	if err != nil {
		return "", fmt.Errorf("%s: %w", opDataVersion, database.ClassifyContext(qctx, err))
	}
	if pos == nil {
		// A standby that replays from an archive only, before its first record.
		return "", fmt.Errorf("%s: the server has replayed no WAL yet", opDataVersion)
	}
	target, err := replication.ParseLSN(*pos)
	if err != nil {
		return "", fmt.Errorf("%s: %w", opDataVersion, err)
	}
	// The statement's snapshot is taken before the flushed position is read: a commit it sees
	// is at or before target, so delivered once the stream passes target.
	snap, err := delta.ParseSnapshot(snapText)
	if err != nil {
		return "", fmt.Errorf("%s: %w", opDataVersion, err)
	}
	r.mu.Lock()
	fp, fpRead := r.hosts[host].fingerprint, r.hosts[host].fpRead
	r.mu.Unlock()
	if time.Since(fpRead) >= r.staleness {
		old := fp
		if fp, err = replication.Fingerprint(qctx, conn, r.ropts); err != nil {
			return "", fmt.Errorf("%s: %w", opDataVersion, database.ClassifyContext(qctx, err))
		}
		fpRead = start
		if old != "" && fp != old {
			// A definition changed: what was followed under the old one is dropped.
			r.follow(true)
		}
	}
	// The stream reports its position at each status interval; a commit before target is
	// handed to Commit before the position passes it (a standby's replay position is never
	// past the primary's flushed WAL, which the stream reaches).
	lag := int64(-1)
	for {
		st := r.src.State()
		if lag < 0 {
			lag = max(int64(target)-int64(st.Position), 0)
		}
		if !st.Streaming {
			return "", errors.New("replication stream lost")
		}
		if st.Position >= target {
			break
		}
		select {
		case <-qctx.Done():
			// Not reported: the cache's bound runs out, answers are computed meanwhile.
			return "", fmt.Errorf("%s: the replication stream did not reach %s within %s", opDataVersion, target, timeout)
		case <-time.After(positionPoll):
		}
	}
	if !standby {
		r.confirm(snap)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &r.hosts[host]
	h.fingerprint, h.fpRead, h.standby = fp, fpRead, standby
	var shows map[string]uint64
	if standby {
		h.replayed = target
		shows = r.visibleAt(target)
	} else {
		r.lag = lag
		shows = maps.Clone(r.primary)
	}
	r.show(host, shows)
	r.prune()
	v := "replication " + strconv.FormatUint(r.resumes, 10) + " " + fp
	// The tables' versions go with the poll's version, which says they hold every commit
	// visible on the host before it was sent; the epoch (v) moves with a recovery or a
	// definition change only. Told under r.mu: the hosts' polls report in the order they
	// recorded.
	if tw, ok := r.w.(TableWatcher); ok {
		tw.Tables(maps.Clone(r.combined))
	}
	return v, nil
}

// TableWatcher is a Watcher that follows each table's version (the replication source's): its
// Tables is called with them before each Version.
type TableWatcher interface {
	Tables(versions map[string]uint64)
}
