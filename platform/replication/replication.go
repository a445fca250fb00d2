// Package replication follows the committed changes of the analytics tables through
// PostgreSQL's logical replication (contract section 6.13), so that kept answers end only when
// the tables they read change.
//
// The service creates a temporary slot of the pgoutput plugin on the primary when it starts; the
// slot goes away with its connection, so nothing is left on the server when the service stops
// or dies. Changes arrive per committed transaction: which tables changed, and the changed rows
// as text (old and new values when the table's REPLICA IDENTITY gives them). A lost connection
// is replaced with a growing pause; as a temporary slot dies with its connection, commits made
// while it was down are not delivered, and the Handler is told so (Lost, then Resumed).
//
// pgoutput describes a table's columns only with its next row change, so a definition change
// (ALTER TABLE, a table renamed or replaced, the publication's tables changing) is found by
// polling Fingerprint. Check says what the server lacks for all this, precisely, so that the
// caller can fall back to polling the data version or refuse to start.
//
// The package opens its own connections (a replication connection cannot be pooled) from the
// caller's connection settings, and imports no other package of the service.
package replication

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Tables are the tables followed by default (contract section 1), named as in the connection's
// search_path.
var Tables = []string{"dim_station", "dim_resource", "dim_patient", "fact_record", "fact_oxygen"}

// OptionalTables are followed when they exist (fact_unit_shift, contract section 6.12.6).
var OptionalTables = []string{"fact_unit_shift"}

// DefaultPublication is the publication's name when Options.Publication is empty.
const DefaultPublication = "emsquery"

// Defaults of Options' durations and bounds.
const (
	DefaultStatusInterval      = 10 * time.Second
	DefaultSilenceTimeout      = 30 * time.Second
	DefaultRetryFirst          = 250 * time.Millisecond
	DefaultRetryLast           = 15 * time.Second
	DefaultMaxTransactionRows  = 100_000
	DefaultMaxTransactionBytes = 64 << 20
)

// Options is what Start and Check need. Only Conn is required.
type Options struct {
	// Conn reaches the primary as the service's role (the pool's settings: host, credentials,
	// TLS, runtime parameters), directly: a replication connection cannot pass a pooler such as
	// PgBouncer. It is copied, never changed. With several hosts (Fallbacks) the slot is made on
	// the one that is the primary (target_session_attrs=primary), on each reconnection again,
	// so it follows a failover. Its runtime parameters hold for the replication session too,
	// and the values' text depends on some of them as on the pool's (DateStyle for dates and
	// timestamps, extra_float_digits for floats): give the pool's.
	Conn *pgx.ConnConfig
	// Schema, when not empty, is the search_path the tables are looked up in (DATABASE__SCHEMA);
	// otherwise Conn's search_path.
	Schema string
	// Publication is the publication to follow (CACHE__PUBLICATION); DefaultPublication when empty.
	Publication string
	// Tables to follow (Tables when nil) and OptionalTables (when nil: OptionalTables), as the
	// connection's search_path resolves them. A missing optional table is not followed.
	Tables, OptionalTables []string
	// StatusInterval is how often the position processed is reported to the server, which
	// also keeps wal_sender_timeout (60 s by default) from ending a quiet stream.
	StatusInterval time.Duration
	// SilenceTimeout: a stream that has received nothing for this long, although every status
	// update asks the server for a reply, is taken for dead (a server or network gone silent
	// without closing the connection) and replaced. A busy server (decoding a large
	// transaction on a loaded machine) may be slow to reply, so it is generous.
	SilenceTimeout time.Duration
	// RetryFirst and RetryLast bound the pause before reconnecting, doubled after each failure.
	RetryFirst, RetryLast time.Duration
	// MaxTransactionRows and MaxTransactionBytes bound the rows (and their values' bytes) kept
	// for one transaction: past either, the transaction is delivered with Overflow set and
	// without rows, so one huge load costs no more memory than this.
	MaxTransactionRows, MaxTransactionBytes int
	// Logger receives the failures and recoveries (slog.Default() when nil).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Publication == "" {
		o.Publication = DefaultPublication
	}
	if o.Tables == nil {
		o.Tables = Tables
	}
	if o.OptionalTables == nil {
		o.OptionalTables = OptionalTables
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = DefaultStatusInterval
	}
	if o.SilenceTimeout <= 0 {
		o.SilenceTimeout = DefaultSilenceTimeout
	}
	if o.RetryFirst <= 0 {
		o.RetryFirst = DefaultRetryFirst
	}
	if o.RetryLast < o.RetryFirst {
		o.RetryLast = max(DefaultRetryLast, o.RetryFirst)
	}
	if o.MaxTransactionRows <= 0 {
		o.MaxTransactionRows = DefaultMaxTransactionRows
	}
	if o.MaxTransactionBytes <= 0 {
		o.MaxTransactionBytes = DefaultMaxTransactionBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// LSN is a position in the server's write-ahead log.
type LSN uint64

// String is PostgreSQL's notation, e.g. "16/B374D848".
func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l)) }

// ParseLSN reads PostgreSQL's notation.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if ok {
		h, err1 := strconv.ParseUint(hi, 16, 32)
		l, err2 := strconv.ParseUint(lo, 16, 32)
		if err1 == nil && err2 == nil {
			return LSN(h<<32 | l), nil
		}
	}
	return 0, fmt.Errorf("parse lsn %q: not of the form XXX/XXX", s)
}

// Op is what a row change did.
type Op uint8

// The row changes.
const (
	Insert Op = iota + 1
	Update
	Delete
	// Truncate: every row of the table is gone (Old and New are nil).
	Truncate
)

func (o Op) String() string {
	switch o {
	case Insert:
		return "INSERT"
	case Update:
		return "UPDATE"
	case Delete:
		return "DELETE"
	case Truncate:
		return "TRUNCATE"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Kind says what a Value holds.
type Kind uint8

// The kinds of values.
const (
	// Text: Value.Text is the value in PostgreSQL's text output.
	Text Kind = iota
	// Null: SQL NULL.
	Null
	// Unchanged: an UPDATE left this out-of-line (TOASTed) value as it was, and the server
	// did not send it; without a complete old row it is not known here.
	Unchanged
	// Absent: an old row holds only the replica identity's key columns; this is another one.
	Absent
)

// Value is one column's value in a row.
type Value struct {
	Kind Kind
	Text string
}

// Column is one column of a table, as the server described it with the first change of the
// table on this connection.
type Column struct {
	Name string
	// Type is the type's oid, TypeName its name (empty when neither built in nor described by
	// the server), TypeMod its modifier (atttypmod: e.g. numeric's precision and scale).
	Type     uint32
	TypeName string
	TypeMod  int32
	// Key: the column belongs to the replica identity (its old value comes with UPDATE and
	// DELETE even without REPLICA IDENTITY FULL).
	Key bool
}

// Relation describes a followed table.
type Relation struct {
	// Table is the name as given in Options.Tables; Schema where it was found.
	Table, Schema string
	Columns       []Column
	// ReplicaIdentity: 'd' default (primary key), 'f' full, 'i' index, 'n' nothing.
	ReplicaIdentity byte
}

// Index is the position of the named column, or -1.
func (r *Relation) Index(column string) int {
	for i, c := range r.Columns {
		if c.Name == column {
			return i
		}
	}
	return -1
}

// Row is one changed row.
type Row struct {
	Op       Op
	Relation *Relation
	// Old is the row before an UPDATE or DELETE (nil for INSERT, and for an UPDATE that kept
	// the key when the table is not REPLICA IDENTITY FULL). New is the row after an INSERT or
	// UPDATE (nil for DELETE). Both are in Relation.Columns' order.
	Old, New []Value
	// OldComplete: Old is the whole row (REPLICA IDENTITY FULL). Otherwise an UPDATE or DELETE
	// lacks the old values (Old nil, or only the key columns with the others Absent), and a
	// count kept from the rows cannot follow it.
	OldComplete bool
}

// Transaction is one committed transaction that changed followed tables.
type Transaction struct {
	// LSN is the commit record's position, End the position just past it: a hot standby whose
	// replay position (ReplayPosition) reached End shows the transaction.
	LSN, End LSN
	// Time is the commit's time on the server.
	Time time.Time
	// Xid is the transaction's id (its low 32 bits): a snapshot taken on the primary or a
	// standby says whether it saw the transaction (delta.Snapshot.Sees), which lets a count
	// read from the database be followed from exactly the transactions it did not include.
	Xid uint32
	// Tables are the followed tables the transaction changed (TRUNCATE included), each once,
	// in the order of Options.Tables then OptionalTables.
	Tables []string
	// Rows are the row changes in the order they were made, a TRUNCATE as one Row; nil when
	// Overflow.
	Rows []Row
	// Overflow: the transaction changed more rows (or bytes) than Options' bounds; Rows are
	// dropped, Tables is still complete.
	Overflow bool
}

// Changed says whether the transaction changed table.
func (t *Transaction) Changed(table string) bool {
	for _, x := range t.Tables {
		if x == table {
			return true
		}
	}
	return false
}

// Handler receives what the stream sees. Its methods are called one at a time, from the
// stream's goroutine, in the server's commit order; a slow handler holds the stream (the
// server keeps the WAL meanwhile).
type Handler interface {
	// Commit: a transaction that changed followed tables committed.
	Commit(tx *Transaction)
	// Lost: the stream failed. Until Resumed, changes are not seen: serve nothing that a change
	// could have made stale.
	Lost(err error)
	// Resumed: a new slot streams again from at. Transactions that committed between Lost and
	// at are never delivered, so everything derived from the data before this call must be
	// dropped (answers computed before it included); every commit after at is delivered.
	Resumed(at LSN)
}
