package database

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/trace"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// CopyTo runs copySQL, a COPY ... TO STDOUT, as operation op on a pooled connection of its own
// (acquired as the other helpers do) and writes what it sends to w: one Write per CopyData
// message (for COPY, one per row). It runs with LIMITS__EXPORT_TIMEOUT as its statement_timeout
// instead of the session's LIMITS__STATEMENT_TIMEOUT: an export streams for as long as its
// client reads.
//
// The COPY's text is sent as it is (COPY takes no parameters, so its values are literals in it):
// before sending it, CopyTo checks that the session's client_encoding is UTF8, which the literals
// need, and that its DateStyle is ISO, which the CSV's timestamps need. Both are settings the
// server reports at connect time, so the check costs no round trip.
//
// The longer timeout is a SET LOCAL sent in the same simple-protocol message as the COPY, so the
// two run in one implicit transaction (PostgreSQL 13 and later time each statement of such a
// message on its own, the COPY with the new value; older servers would hold the whole message
// to the session's timeout). SET LOCAL ends with that transaction whether the COPY
// succeeds, fails or is cancelled: the connection goes back to the pool with the session's
// statement_timeout, never with the export's.
//
// Its errors are not wrapped with op. An error of w comes back as it is. A statement timeout is
// TIMEOUT naming LIMITS__EXPORT_TIMEOUT; when ctx is done the error says so instead
// (ClassifyContext). A failed write to w ends the COPY: pgconn closes the connection, which
// cancels the query on the server, and the pool drops the connection on release.
func (db *DB) CopyTo(ctx context.Context, op string, w io.Writer, copySQL string) (tag pgconn.CommandTag, err error) {
	// The span names the operation but not the statement: its text holds the export's values.
	spanCtx, span := db.spans.start(ctx, op, "")
	defer func() { end(ctx, span, err) }()
	for attempt := 1; ; attempt++ {
		var retry bool
		tag, retry, err = db.copyOnce(spanCtx, span, op, w, copySQL, attempt < maxAttempts)
		if !retry {
			return tag, err
		}
	}
}

// copyOnce is one attempt of CopyTo. retry says that the connection was found dead before
// anything reached w (see run), so the COPY may run again on another connection.
func (db *DB) copyOnce(ctx context.Context, span trace.Span, op string, w io.Writer, copySQL string, mayRetry bool) (pgconn.CommandTag, bool, error) {
	conn, err := db.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, false, err
	}
	defer conn.Release()
	connected(span, conn.conn)
	pg := conn.conn.Conn().PgConn()
	if enc, ds := pg.ParameterStatus("client_encoding"), pg.ParameterStatus("DateStyle"); enc != "UTF8" || !strings.HasPrefix(ds, "ISO") {
		return pgconn.CommandTag{}, false, fmt.Errorf("the connection has client_encoding %q and DateStyle %q; it needs UTF8 and ISO", enc, ds)
	}
	// Behind a transaction pooler the session's settings come first, in the same transaction.
	sql := db.session.copyPrefix + "SET LOCAL statement_timeout = " + milliseconds(db.exportTimeout) + "; " + copySQL
	start := time.Now()
	cw := &copyWriter{w: w}
	tag, err := pg.CopyTo(ctx, cw, sql)
	if err != nil && mayRetry && !cw.wrote && cw.err == nil && ctx.Err() == nil && connectionLost(err) {
		addr := remoteAddr(conn.conn)
		conn.Release()
		db.dropIdle(ctx, addr)
		return tag, true, err
	}
	db.metrics.operation(ctx, op, start, err)
	if err == nil {
		return tag, false, nil
	}
	if cw.err != nil {
		return tag, false, cw.err // the writer's own error, as it was
	}
	var pgErr *pgconn.PgError
	if ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == "57014" {
		return tag, false, apierr.ExportTimedOut(db.exportTimeout, err)
	}
	return tag, false, db.classify(ctx, err)
}

// copyWriter remembers the error of the writer a COPY writes to, so that it is not mistaken for
// the database's.
type copyWriter struct {
	w     io.Writer
	err   error
	wrote bool
}

func (c *copyWriter) Write(p []byte) (int, error) {
	c.wrote = true
	n, err := c.w.Write(p)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}
