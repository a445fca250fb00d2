package replication

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// slotTimeout bounds connecting and creating the slot. Creating a slot waits for the write
// transactions running on the whole server at that moment to end (the server needs a
// consistent starting point), so a long load elsewhere delays it.
const slotTimeout = time.Minute

// State is the stream's state, for health reports and metrics.
type State struct {
	// Streaming: changes are being followed; false between a failure and the recovery.
	Streaming bool
	// Since is when Streaming last changed (the start, a failure, a recovery).
	Since time.Time
	// Slot is the current temporary slot's name (in pg_replication_slots).
	Slot string
	// Err is the last failure (nil before any).
	Err error
	// Failures counts the streams lost, Recoveries the streams started again after one.
	Failures, Recoveries int64
	// Position is the WAL position processed (reported to the server as flushed, which lets it
	// recycle the WAL before it); LastCommit the last delivered transaction's End.
	Position, LastCommit LSN
}

// Source streams the changes of the followed tables to a Handler until Close.
type Source struct {
	opts Options
	h    Handler

	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	state State
}

// Start checks what replication needs (a *MissingError names what the server lacks), creates
// the temporary slot and starts streaming: every transaction that commits after Start returns
// reaches h.Commit. It then streams until Close, reconnecting with a growing pause when the
// stream fails (h.Lost, then h.Resumed). ctx bounds the start only.
func Start(ctx context.Context, opts Options, h Handler) (*Source, error) {
	opts = opts.withDefaults()
	if opts.Conn == nil {
		return nil, errors.New("replication: no connection settings")
	}
	s := &Source{opts: opts, h: h, done: make(chan struct{})}
	st, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.state = State{Streaming: true, Since: time.Now(), Slot: st.slot, Position: st.at}
	s.mu.Unlock()
	opts.Logger.Info("replication: following the tables' changes", "slot", st.slot, "publication", opts.Publication, "from", st.at.String())
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(runCtx, st)
	return s, nil
}

// Close stops streaming and closes the connection, which drops the temporary slot.
func (s *Source) Close() {
	s.cancel()
	<-s.done
}

// State is the stream's current state.
func (s *Source) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

func (s *Source) run(ctx context.Context, st *stream) {
	defer close(s.done)
	pause := s.opts.RetryFirst
	for {
		began := time.Now()
		err := st.run(ctx)
		st.close()
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.state.Streaming, s.state.Since, s.state.Err = false, time.Now(), err
		s.state.Failures++
		s.mu.Unlock()
		s.opts.Logger.Error("replication: stream lost", "err", err, "slot", st.slot)
		s.h.Lost(err)

		// A stream that failed soon after it started keeps the pause growing: each new slot
		// costs the server a wait, and the handler a drop of everything.
		if time.Since(began) > 2*s.opts.RetryLast {
			pause = s.opts.RetryFirst
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, s.opts.RetryLast)
			st, err = s.connect(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			s.mu.Lock()
			s.state.Err = err
			s.mu.Unlock()
			s.opts.Logger.Warn("replication: reconnecting failed", "err", err, "retry_in", pause.String())
		}
		s.mu.Lock()
		s.state.Streaming, s.state.Since, s.state.Slot, s.state.Position = true, time.Now(), st.slot, st.at
		s.state.Recoveries++
		s.mu.Unlock()
		s.opts.Logger.Info("replication: stream back on a new slot; changes since the loss were not seen", "slot", st.slot, "from", st.at.String())
		s.h.Resumed(st.at)
	}
}

// stream is one replication connection and what it has decoded.
type stream struct {
	s    *Source
	conn *pgconn.PgConn
	slot string
	at   LSN

	// names maps a followed table's schema and name to its index in tables.
	names  map[[2]string]int
	tables []string
	rels   map[uint32]*Relation // nil value: a relation that is not followed
	types  map[uint32]string
	typMap *pgtype.Map

	// The transaction being received.
	inTx    bool
	tx      *Transaction
	changed []bool
	bytes   int

	position LSN // processed: reported to the server
}

// connect checks the requirements, resolves the tables, opens a replication connection, creates
// a temporary slot and starts streaming from its consistent point.
func (s *Source) connect(ctx context.Context) (*stream, error) {
	ctx, cancel := context.WithTimeout(ctx, slotTimeout)
	defer cancel()
	conn, err := connect(ctx, connConfig(s.opts))
	if errors.Is(err, pgconn.ErrStandbyConnection) {
		return nil, &MissingError{Missing: []string{errNoPrimary}}
	}
	if err != nil {
		return nil, fmt.Errorf("replication check: %w", err)
	}
	report, err := check(ctx, conn, s.opts)
	var current string
	if err == nil {
		err = conn.QueryRow(ctx, "SELECT current_schema()::text").Scan(&current)
	}
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("replication check: %w", err)
	}
	if len(report.Missing) > 0 {
		return nil, &MissingError{Missing: report.Missing}
	}
	st := &stream{s: s, names: map[[2]string]int{}, rels: map[uint32]*Relation{}, types: map[uint32]string{}, typMap: pgtype.NewMap()}
	names, _ := tableList(s.opts)
	st.tables = names
	for i, name := range names {
		// A table made later (an optional one) is followed where CREATE TABLE would put it.
		schema := current
		if t := report.Table(name); t != nil {
			schema = t.Schema
		}
		st.names[[2]string{schema, name}] = i
	}
	st.changed = make([]bool, len(names))

	cfg := connConfig(s.opts).Config.Copy()
	cfg.ValidateConnect, cfg.AfterConnect = pgconn.ValidateConnectTargetSessionAttrsPrimary, nil
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "emsquery replication"
	// The stream is one command that lasts as long as the service: the pool's statement
	// timeout must not end it (PostgreSQL 15 does not apply it to replication commands; no
	// version shall).
	cfg.RuntimeParams["statement_timeout"] = "0"
	// Receiving waits with a deadline; the default handler turns it into a read deadline on
	// the socket, which leaves the connection usable (a cancel request would not).
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	st.conn, err = pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("replication connect: %w", err)
	}
	st.slot = slotName()
	res, err := pglogrepl.CreateReplicationSlot(ctx, st.conn, st.slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Temporary: true, SnapshotAction: "NOEXPORT_SNAPSHOT", Mode: pglogrepl.LogicalReplication})
	if err != nil {
		st.close()
		return nil, fmt.Errorf("create replication slot: %w", err)
	}
	if st.at, err = ParseLSN(res.ConsistentPoint); err != nil {
		st.close()
		return nil, fmt.Errorf("create replication slot: %w", err)
	}
	st.position = st.at
	// publication_names is a list of identifiers inside a string literal.
	pubs := strings.ReplaceAll(pgx.Identifier{s.opts.Publication}.Sanitize(), "'", "''")
	err = pglogrepl.StartReplication(ctx, st.conn, st.slot, pglogrepl.LSN(st.at), pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names '" + pubs + "'"},
	})
	if err != nil {
		st.close()
		return nil, fmt.Errorf("start replication: %w", err)
	}
	return st, nil
}

// slotName is unique per process and start: several instances of the service may follow one
// server, each with its own slot.
func slotName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "emsquery_" + hex.EncodeToString(b)
}

func (st *stream) close() {
	if st.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = st.conn.Close(ctx)
}

// run receives until the stream fails or ctx ends.
func (st *stream) run(ctx context.Context) error {
	interval := st.s.opts.StatusInterval
	nextStatus := time.Now()
	lastReceived := time.Now()
	for {
		if now := time.Now(); !now.Before(nextStatus) {
			if err := st.sendStatus(ctx); err != nil {
				return err
			}
			nextStatus = now.Add(interval)
		}
		if silent := time.Since(lastReceived); silent > st.s.opts.SilenceTimeout {
			return fmt.Errorf("no message from the server for %v", silent.Round(time.Second))
		}
		deadline := nextStatus
		if d := lastReceived.Add(st.s.opts.SilenceTimeout + time.Millisecond); d.Before(deadline) {
			deadline = d
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		msg, err := st.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		lastReceived = time.Now()
		switch msg := msg.(type) {
		case *pgproto3.ErrorResponse:
			return pgconn.ErrorResponseToPgError(msg)
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("keepalive: %w", err)
				}
				// Between transactions every change up to the server's end was sent, and
				// handled: the WAL before it may go.
				if !st.inTx && LSN(ka.ServerWALEnd) > st.position {
					st.position = LSN(ka.ServerWALEnd)
				}
				if ka.ReplyRequested {
					nextStatus = time.Now()
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("xlog data: %w", err)
				}
				if err := st.decode(xld.WALData); err != nil {
					return err
				}
			}
		}
	}
}

// sendStatus reports the position processed and asks for a reply, which shows the connection
// is alive.
func (st *stream) sendStatus(ctx context.Context) error {
	st.s.mu.Lock()
	st.s.state.Position = st.position
	st.s.mu.Unlock()
	err := pglogrepl.SendStandbyStatusUpdate(ctx, st.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pglogrepl.LSN(st.position), ReplyRequested: true,
	})
	if err != nil {
		return fmt.Errorf("send status: %w", err)
	}
	return nil
}

// decode handles one pgoutput message.
func (st *stream) decode(data []byte) (err error) {
	// The parser trusts its input's lengths; a malformed message fails the stream, not the
	// process.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decode pgoutput message: %v", r)
		}
	}()
	m, err := pglogrepl.Parse(data)
	if err != nil {
		return fmt.Errorf("decode pgoutput message: %w", err)
	}
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		st.relation(m)
	case *pglogrepl.TypeMessage:
		st.types[m.DataType] = m.Namespace + "." + m.Name
	case *pglogrepl.BeginMessage:
		st.inTx, st.tx, st.bytes = true, &Transaction{Xid: m.Xid}, 0
		clear(st.changed)
	case *pglogrepl.InsertMessage:
		if rel := st.rels[m.RelationID]; rel != nil {
			st.add(m.RelationID, Row{Op: Insert, Relation: rel, New: st.values(rel, m.Tuple, false)})
		}
	case *pglogrepl.UpdateMessage:
		if rel := st.rels[m.RelationID]; rel != nil {
			row := Row{Op: Update, Relation: rel}
			if m.OldTuple != nil {
				row.OldComplete = m.OldTupleType == pglogrepl.UpdateMessageTupleTypeOld
				row.Old = st.values(rel, m.OldTuple, !row.OldComplete)
			}
			row.New = st.values(rel, m.NewTuple, false)
			if row.OldComplete {
				// An unchanged out-of-line value is not sent again; the old row has it.
				for i := range row.New {
					if row.New[i].Kind == Unchanged && i < len(row.Old) {
						row.New[i] = row.Old[i]
					}
				}
			}
			st.add(m.RelationID, row)
		}
	case *pglogrepl.DeleteMessage:
		if rel := st.rels[m.RelationID]; rel != nil {
			row := Row{Op: Delete, Relation: rel, OldComplete: m.OldTupleType == pglogrepl.DeleteMessageTupleTypeOld}
			row.Old = st.values(rel, m.OldTuple, !row.OldComplete)
			st.add(m.RelationID, row)
		}
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if rel := st.rels[id]; rel != nil {
				st.add(id, Row{Op: Truncate, Relation: rel})
			}
		}
	case *pglogrepl.CommitMessage:
		tx := st.tx
		st.inTx, st.tx = false, nil
		if tx == nil {
			return errors.New("decode pgoutput message: commit without begin")
		}
		for i, c := range st.changed {
			if c {
				tx.Tables = append(tx.Tables, st.tables[i])
			}
		}
		tx.LSN, tx.End, tx.Time = LSN(m.CommitLSN), LSN(m.TransactionEndLSN), m.CommitTime
		if len(tx.Tables) > 0 {
			st.s.h.Commit(tx)
			st.s.mu.Lock()
			st.s.state.LastCommit = tx.End
			st.s.mu.Unlock()
		}
		if tx.End > st.position {
			st.position = tx.End
		}
	}
	return nil
}

// relation records a table's description: sent before the table's first change on this
// connection and again after its definition changed.
func (st *stream) relation(m *pglogrepl.RelationMessage) {
	i, ok := st.names[[2]string{m.Namespace, m.RelationName}]
	if !ok {
		st.rels[m.RelationID] = nil
		return
	}
	rel := &Relation{Table: st.tables[i], Schema: m.Namespace, ReplicaIdentity: m.ReplicaIdentity}
	for _, c := range m.Columns {
		col := Column{Name: c.Name, Type: c.DataType, TypeMod: c.TypeModifier, Key: c.Flags&1 != 0}
		if t, ok := st.typMap.TypeForOID(c.DataType); ok {
			col.TypeName = t.Name
		} else {
			col.TypeName = st.types[c.DataType]
		}
		rel.Columns = append(rel.Columns, col)
	}
	st.rels[m.RelationID] = rel
}

// values converts a tuple; keyOnly marks an old row of key columns only (the others Absent).
func (st *stream) values(rel *Relation, t *pglogrepl.TupleData, keyOnly bool) []Value {
	if t == nil {
		return nil
	}
	vals := make([]Value, len(t.Columns))
	for i, c := range t.Columns {
		switch {
		case keyOnly && i < len(rel.Columns) && !rel.Columns[i].Key:
			vals[i].Kind = Absent
		case c.DataType == pglogrepl.TupleDataTypeNull:
			vals[i].Kind = Null
		case c.DataType == pglogrepl.TupleDataTypeToast:
			vals[i].Kind = Unchanged
		default:
			vals[i] = Value{Kind: Text, Text: string(c.Data)}
		}
	}
	return vals
}

// add appends a row change to the transaction, within the bounds.
func (st *stream) add(relID uint32, row Row) {
	tx := st.tx
	if tx == nil {
		return
	}
	st.changed[st.index(relID)] = true
	if tx.Overflow {
		return
	}
	st.bytes += rowBytes(row)
	if len(tx.Rows) >= st.s.opts.MaxTransactionRows || st.bytes > st.s.opts.MaxTransactionBytes {
		tx.Overflow, tx.Rows = true, nil
		return
	}
	tx.Rows = append(tx.Rows, row)
}

func (st *stream) index(relID uint32) int {
	rel := st.rels[relID]
	return st.names[[2]string{rel.Schema, rel.Table}]
}

// rowBytes estimates what a row change keeps in memory.
func rowBytes(r Row) int {
	n := 64
	for _, v := range r.Old {
		n += 24 + len(v.Text)
	}
	for _, v := range r.New {
		n += 24 + len(v.Text)
	}
	return n
}
