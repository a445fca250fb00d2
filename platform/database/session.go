package database

import (
	"time"

	"github.com/jackc/pgx/v5"
)

// sessionSettings carries the session settings into every transaction, for a pool whose
// connections lead to a transaction pooler (DATABASE__TRANSACTION_POOLING: PgBouncer with
// pool_mode=transaction).
//
// Such a pooler hands its server connections from client to client between transactions, so a
// setting made for the session would apply to whichever client gets the server connection next,
// and one made by another client would apply to ours. PgBouncer also refuses startup parameters
// it does not keep for each client itself (it keeps DateStyle and application_name, not
// search_path, statement_timeout or default_transaction_read_only). So the service sends those
// three as SET LOCAL at the start of every transaction: each statement runs in a transaction of
// its own (BEGIN READ ONLY, the settings, the statement, COMMIT), and SET LOCAL ends with it
// whatever happens. That costs two round trips more per statement than a direct connection.
//
// Whether a host is such a pooler cannot be told reliably from the client: PgBouncer in
// session mode, or configured to ignore startup parameters, accepts the connection and then
// behaves differently. Hence a setting; a PgBouncer that refuses the startup parameters is
// named in the error (see poolerHint).
type sessionSettings struct {
	// begin starts a statement's transaction: one simple-protocol message, one round trip.
	begin string
	// copyPrefix goes before a COPY in the same simple-protocol message, which PostgreSQL runs
	// as one implicit transaction; the COPY's own statement_timeout follows it.
	copyPrefix string
	// snapshot starts a batch's transaction (see RunBatch) as begin starts a statement's, in a
	// round trip of its own before the pipeline: pgx describes a pipeline's statements it has not
	// seen on the connection before sending it, and that description must already run with the
	// schema. Without a pooler the pipeline begins its transaction itself (beginSnapshot).
	snapshot string
}

// beginSnapshot starts the one transaction of a batch: a single snapshot for all of its
// statements, and read-only as every transaction of the service.
const beginSnapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

func newSessionSettings(schema string, statementTimeout time.Duration) sessionSettings {
	searchPath := "SET LOCAL search_path TO " + pgx.Identifier{schema}.Sanitize()
	timeout := "SET LOCAL statement_timeout = " + milliseconds(statementTimeout)
	return sessionSettings{
		begin:      "BEGIN READ ONLY; " + searchPath + "; " + timeout,
		copyPrefix: "SET TRANSACTION READ ONLY; " + searchPath + "; ",
		snapshot:   beginSnapshot + "; " + searchPath + "; " + timeout,
	}
}

// perTransaction says whether the settings must start every transaction.
func (s sessionSettings) perTransaction() bool { return s.begin != "" }
