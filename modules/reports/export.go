package reports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/emsanalytics/emsquery/platform/database"
)

// Exporter streams the main report as CSV straight from the database: PostgreSQL formats the
// CSV (COPY ... TO STDOUT WITH (FORMAT csv, HEADER)) and the service only relays its rows to the
// client, turning each row's LF into CRLF (RFC 4180). Memory stays flat: one row at a time
// passes from the database connection into the response's buffered writer, and a client that
// reads slowly slows the database down through TCP back-pressure. COPY takes no bind
// parameters, so the validated values are written into the statement as literals (see inline).
type Exporter struct {
	db     *database.DB
	log    *slog.Logger
	limits Limits
	// shutdown is cancelled when the service stops, after requests in flight had their grace
	// period: exports still running are cancelled so that the pool can close.
	shutdown context.Context
}

// NewExporter returns the exporter and the cleanup that cancels exports still running.
func NewExporter(db *database.DB, log *slog.Logger, limits Limits) (*Exporter, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	return &Exporter{db: db, log: log, limits: limits, shutdown: ctx}, cancel
}

// Export is a started export. Its statement has run far enough to produce its first row (or it
// finished), so a failure to start is reported before any byte of the response: Start's error
// becomes an error status, and from here on the response is a CSV.
type Export struct {
	ctx      context.Context // the COPY's; done when the export is cancelled
	relay    *relay
	done     chan copyResult // receives the COPY's end once
	finished *copyResult     // the COPY ended in Start (no data row)
	cancel   context.CancelFunc
}

type copyResult struct {
	tag pgconn.CommandTag
	err error
}

// ExportResult tells what Stream sent.
type ExportResult struct {
	Rows  int64 // data rows, without the header
	Bytes int64
}

// Start validates a (an apierr BAD_USER_INPUT names the problem), starts the COPY and waits until
// its first data row arrives or it ends (as it does when no connection can be had). ctx gives
// the export its values (request id); the export is cancelled by ctx only until its first row (a
// client that leaves while it waits), then by Close, by a failed write, or at shutdown.
func (e *Exporter) Start(ctx context.Context, a Args) (*Export, error) {
	if err := e.limits.Records.CheckRecords(a.Records); err != nil {
		return nil, err
	}
	q, args, err := exportSQL(a)
	if err != nil {
		return nil, err
	}
	sql, err := inline(q, args)
	if err != nil {
		return nil, fmt.Errorf("export statement: %w", err)
	}
	// The COPY's context keeps ctx's values but not its end (see above).
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopOnShutdown := context.AfterFunc(e.shutdown, cancel)
	x := &Export{
		ctx:    cctx,
		relay:  &relay{ready: make(chan struct{}), dst: make(chan io.Writer), abort: cctx.Done()},
		done:   make(chan copyResult, 1),
		cancel: func() { stopOnShutdown(); cancel() },
	}
	go func() {
		// On a connection of its own, with LIMITS__EXPORT_TIMEOUT as its statement_timeout, and
		// checked for the session settings the literals and the CSV need (see
		// database.DB.CopyTo). A failed write closes the connection (pgconn cancels the query),
		// and the pool discards it.
		tag, err := e.db.CopyTo(cctx, opExport, x.relay, sql)
		x.done <- copyResult{tag: tag, err: err}
	}()
	select {
	case <-x.relay.ready:
		return x, nil
	case res := <-x.done:
		if res.err == nil && x.relay.head == nil {
			res.err = errors.New("COPY sent no header row")
		}
		if res.err != nil {
			x.cancel()
			return nil, fmt.Errorf("export: %w", database.Classify(res.err))
		}
		x.finished = &res
		return x, nil
	case <-ctx.Done():
		// The request ended before the first row (its client went away while the database
		// was still sorting or waiting for a lock): stop the COPY now rather than at the first
		// write, which may be minutes away.
		x.cancel()
		return nil, fmt.Errorf("export: %w", database.ClassifyContext(ctx, ctx.Err()))
	}
}

// FileName is the export's attachment name: main-report_<start_date>_<end_date>.csv. Call it
// with validated arguments only (the dates are then plain YYYY-MM-DD).
func FileName(a Args) string {
	return "main-report_" + a.Records.StartDate + "_" + a.Records.EndDate + ".csv"
}

// Validate checks a as Start does, without touching the database.
func Validate(a Args) error {
	_, _, err := exportSQL(a)
	return err
}

// Stream sends the CSV, header row first, to w, which should be buffered. It returns when the
// COPY ended; an error means the CSV in w is incomplete (a write failed, the database failed, or
// the service is stopping), and the query was cancelled.
//
// When the export is cancelled (the service stops) while a write to w may be blocked by a client
// that does not read, abort is called from another goroutine: it must make that write fail, for
// example by closing the client's connection. Cancelling the query alone would not unblock it.
func (x *Export) Stream(w io.Writer, abort func()) (ExportResult, error) {
	defer x.cancel()
	if abort != nil {
		defer context.AfterFunc(x.ctx, abort)()
	}
	if x.finished != nil {
		err := x.relay.writeRow(w, x.relay.head)
		return ExportResult{Bytes: x.relay.bytes}, err
	}
	var res copyResult
	select {
	case x.relay.dst <- w:
		res = <-x.done
	case res = <-x.done: // cancelled while waiting for Stream
	}
	if res.err == nil && x.relay.werr != nil {
		res.err = x.relay.werr
	}
	if res.err != nil {
		return ExportResult{Bytes: x.relay.bytes}, database.Classify(res.err)
	}
	return ExportResult{Rows: res.tag.RowsAffected(), Bytes: x.relay.bytes}, nil
}

// Close cancels an export that will not be written (Stream also closes).
func (x *Export) Close() { x.cancel() }

// relay is the io.Writer COPY writes to: one call per CopyData message, and PostgreSQL sends
// exactly one message per row (the header row first). It holds the header until the first data
// row arrives, then waits for the response's writer and writes through to it from then on.
type relay struct {
	ready chan struct{}   // closed when the first data row arrived
	dst   chan io.Writer  // the response's writer, handed over by Stream
	abort <-chan struct{} // the export was cancelled
	w     io.Writer
	head  []byte // the header row
	bytes int64
	werr  error // the first write error
}

var errExportCancelled = errors.New("export cancelled before the response started")

func (r *relay) Write(p []byte) (int, error) {
	if r.w == nil {
		if r.head == nil {
			r.head = append([]byte(nil), p...)
			return len(p), nil
		}
		close(r.ready)
		select {
		case r.w = <-r.dst:
		case <-r.abort:
			return 0, errExportCancelled
		}
		if err := r.writeRow(r.w, r.head); err != nil {
			return 0, err
		}
	}
	if err := r.writeRow(r.w, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

var crlf = []byte("\r\n")

// writeRow writes one CSV row, its final LF as CRLF. Line breaks inside quoted values are data
// and stay as they are.
func (r *relay) writeRow(w io.Writer, p []byte) error {
	n := len(p)
	if n > 0 && p[n-1] == '\n' {
		p = p[:n-1]
	}
	k, err := w.Write(p)
	r.bytes += int64(k)
	if err == nil && n > 0 && len(p) < n {
		k, err = w.Write(crlf)
		r.bytes += int64(k)
	}
	if err != nil && r.werr == nil {
		r.werr = err
	}
	return err
}
