package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// handWritten is a workload's first baseline: the SQL a DBA would type by hand for the same
// question, values written into the text, sent with the simple protocol as psql sends it (one
// message, every statement in it, every row read). Where one statement answers several columns
// at once (GROUPING SETS), it is written that way rather than one statement per column: the
// baseline is the database's best for the question, not a strawman.
//
// Before a data set is measured, the service's answer is compared with the answer built from
// this SQL's rows (compareJSON, compareCSV): same values, same order as the contract defines.
type handWritten struct {
	// SQL is the statements, separated by semicolons; for the export, the SELECT that its COPY
	// exports (handCopy).
	SQL string
	// answer builds the service's answer from SQL's results, in order: the root field's value,
	// or for a list each element in turn, passed to emit.
	answer func(r *resultRows, emit func(any))
}

// resultRows reads the results of a simple-protocol message statement by statement and row by
// row, and gives each value as the service's JSON carries it (json) or in its ::text form (text).
type resultRows struct {
	mrr   *pgconn.MultiResultReader
	rr    *pgconn.ResultReader
	names map[string]int
	oids  []uint32
	types *pgtype.Map
	err   error
}

// next moves to the next statement's rows; statements without rows are skipped.
func (r *resultRows) next() bool {
	if r.err != nil {
		return false
	}
	if r.rr != nil {
		if _, err := r.rr.Close(); err != nil {
			r.err = err
			return false
		}
		r.rr = nil
	}
	for r.mrr.NextResult() {
		rr := r.mrr.ResultReader()
		fields := rr.FieldDescriptions()
		if len(fields) == 0 {
			if _, err := rr.Close(); err != nil {
				r.err = err
				return false
			}
			continue
		}
		r.rr, r.names, r.oids = rr, map[string]int{}, make([]uint32, len(fields))
		for i, f := range fields {
			r.names[f.Name] = i
			r.oids[i] = f.DataTypeOID
		}
		return true
	}
	return false
}

// row moves to the next row of the current statement.
func (r *resultRows) row() bool { return r.err == nil && r.rr != nil && r.rr.NextRow() }

func (r *resultRows) col(name string) (raw []byte, oid uint32, ok bool) {
	i, found := r.names[name]
	if !found {
		if r.err == nil {
			r.err = fmt.Errorf("hand-written SQL: no column %q in its result", name)
		}
		return nil, 0, false
	}
	return r.rr.Values()[i], r.oids[i], true
}

// json is the value of the named column as the service's JSON carries it: numbers as float64
// (as encoding/json decodes them), booleans, text and float8 arrays as lists, the rest as its
// text.
func (r *resultRows) json(name string) any {
	raw, oid, ok := r.col(name)
	if !ok || raw == nil {
		return nil
	}
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.Float4OID, pgtype.Float8OID, pgtype.NumericOID:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("hand-written SQL: column %q: %w", name, err)
		}
		return f
	case pgtype.BoolOID:
		return string(raw) == "t"
	case pgtype.Float8ArrayOID:
		var a []pgtype.Float8
		if err := r.types.Scan(oid, pgtype.TextFormatCode, raw, &a); err != nil {
			if r.err == nil {
				r.err = fmt.Errorf("hand-written SQL: column %q: %w", name, err)
			}
			return nil
		}
		out := make([]any, len(a))
		for i, f := range a {
			if f.Valid {
				out[i] = f.Float64
			}
		}
		return out
	case pgtype.TextArrayOID, pgtype.VarcharArrayOID:
		var a []pgtype.Text
		if err := r.types.Scan(oid, pgtype.TextFormatCode, raw, &a); err != nil {
			if r.err == nil {
				r.err = fmt.Errorf("hand-written SQL: column %q: %w", name, err)
			}
			return nil
		}
		out := make([]any, len(a))
		for i, t := range a {
			if t.Valid {
				out[i] = t.String
			}
		}
		return out
	default:
		return string(raw)
	}
}

// text is the named column's value in its ::text form (the contract's `value`), nil for NULL.
// The only type whose output differs from its ::text is boolean (t, f).
func (r *resultRows) text(name string) any {
	raw, oid, ok := r.col(name)
	if !ok || raw == nil {
		return nil
	}
	if oid == pgtype.BoolOID {
		return strconv.FormatBool(string(raw) == "t")
	}
	return string(raw)
}

// int is the named column as an integer (GROUPING bits).
func (r *resultRows) int(name string) int {
	raw, _, ok := r.col(name)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("hand-written SQL: column %q: %w", name, err)
	}
	return n
}

func (r *resultRows) close() error {
	if r.rr != nil {
		if _, err := r.rr.Close(); err != nil && r.err == nil {
			r.err = err
		}
	}
	if err := r.mrr.Close(); err != nil && r.err == nil {
		r.err = err
	}
	return r.err
}

// handRequest is the hand-written baseline of a GraphQL workload: its SQL in one simple-protocol
// message on a connection of the pool, every row of every statement read (the text values' bytes
// counted, nothing decoded).
func handRequest(pool *pgxpool.Pool, sql string) request {
	return func(ctx context.Context, _ int) (int64, error) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return 0, err
		}
		defer conn.Release()
		var n int64
		mrr := conn.Conn().PgConn().Exec(ctx, sql)
		for mrr.NextResult() {
			rr := mrr.ResultReader()
			for rr.NextRow() {
				for _, v := range rr.Values() {
					n += int64(len(v))
				}
			}
			if _, err := rr.Close(); err != nil {
				_ = mrr.Close()
				return n, err
			}
		}
		return n, mrr.Close()
	}
}

// handCopy is the export's hand-written SQL as the COPY statement a DBA would run, the one
// psql's \copy sends.
func handCopy(sel string) string {
	return "COPY (" + strings.Join(strings.Fields(sel), " ") + ") TO STDOUT WITH (FORMAT csv, HEADER)"
}

// handConn connects for the answer check, as a DBA's psql session would, with statement logging
// off for the session so that the capture (log_statement=all on the database) sees only the
// service's statements.
func handConn(ctx context.Context, db dbTarget) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.Database, cfg.User, cfg.Password = db.Host, uint16(db.Port), db.Name, db.User, db.Password
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	cfg.RuntimeParams = map[string]string{"application_name": "bench-hand-check", "log_statement": "none"}
	return pgx.ConnectConfig(ctx, cfg)
}

// compareJSON reads the service's GraphQL answer from body and compares it, element by element
// for a list, with the answer built from the workload's hand-written SQL, read at the same time.
// Neither side is held in memory whole, so the largest answers (patients at 10,000,000
// records) are checked as well as the small ones.
func compareJSON(ctx context.Context, db dbTarget, w workload, body io.Reader) error {
	got, err := openAnswer(body)
	if err != nil {
		return fmt.Errorf("%s: service: %w", w.Name, err)
	}
	conn, err := handConn(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows := &resultRows{mrr: conn.PgConn().Exec(ctx, w.Hand.SQL), types: conn.TypeMap()}
	var (
		n        int
		mismatch error
	)
	w.Hand.answer(rows, func(want any) {
		if mismatch != nil {
			return
		}
		have, ok, err := got.next()
		switch {
		case err != nil:
			mismatch = fmt.Errorf("service: %w", err)
		case !ok:
			mismatch = fmt.Errorf("the service's answer ends after %d elements; hand-written SQL gives more, next %s", n, short(want))
		case !same(have, want):
			mismatch = fmt.Errorf("element %d: service %s, hand-written SQL %s", n, short(have), short(want))
		}
		n++
	})
	if err := rows.close(); err != nil {
		return fmt.Errorf("%s: hand-written SQL: %w", w.Name, err)
	}
	if mismatch != nil {
		return fmt.Errorf("%s: the service's answer differs from the hand-written SQL's: %w", w.Name, mismatch)
	}
	if have, ok, err := got.next(); err != nil || ok {
		if err != nil {
			return fmt.Errorf("%s: service: %w", w.Name, err)
		}
		return fmt.Errorf("%s: the service's answer has more than the hand-written SQL's %d elements, next %s", w.Name, n, short(have))
	}
	if err := got.finish(); err != nil {
		return fmt.Errorf("%s: service: %w", w.Name, err)
	}
	if n == 0 || (!got.list && got.whole == nil) {
		return fmt.Errorf("%s: empty answer on both sides: the workload asks nothing of the data", w.Name)
	}
	return nil
}

// answerStream reads a GraphQL response {"data": {"<field>": <value>}} without holding it: a
// list value element by element, any other value whole.
type answerStream struct {
	dec   *json.Decoder
	list  bool
	whole any
	taken bool
}

func openAnswer(body io.Reader) (*answerStream, error) {
	a := &answerStream{dec: json.NewDecoder(body)}
	if err := a.delim('{'); err != nil {
		return nil, err
	}
	for a.dec.More() {
		key, err := a.key()
		if err != nil {
			return nil, err
		}
		if key != "data" {
			var v any
			if err := a.dec.Decode(&v); err != nil {
				return nil, err
			}
			if key == "errors" {
				return nil, fmt.Errorf("errors: %s", short(v))
			}
			continue
		}
		if err := a.delim('{'); err != nil {
			return nil, err
		}
		if _, err := a.key(); err != nil {
			return nil, err
		}
		tok, err := a.dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok {
		case json.Delim('['):
			a.list = true
		case json.Delim('{'):
			a.whole, err = a.objectRest()
		default:
			a.whole = tok
		}
		return a, err
	}
	return nil, errors.New("no data in the answer")
}

// next returns the next element of a list, or a whole value once.
func (a *answerStream) next() (any, bool, error) {
	if !a.list {
		if a.taken {
			return nil, false, nil
		}
		a.taken = true
		return a.whole, true, nil
	}
	if !a.dec.More() {
		return nil, false, nil
	}
	var v any
	if err := a.dec.Decode(&v); err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// finish reads the rest of the response: no errors may follow the data.
func (a *answerStream) finish() error {
	if a.list {
		if err := a.delim(']'); err != nil {
			return err
		}
	}
	if err := a.delim('}'); err != nil {
		return err
	}
	for a.dec.More() {
		key, err := a.key()
		if err != nil {
			return err
		}
		var v any
		if err := a.dec.Decode(&v); err != nil {
			return err
		}
		if key == "errors" {
			return fmt.Errorf("errors: %s", short(v))
		}
	}
	return a.delim('}')
}

// objectRest reads the members of an object whose '{' was read.
func (a *answerStream) objectRest() (map[string]any, error) {
	m := map[string]any{}
	for a.dec.More() {
		key, err := a.key()
		if err != nil {
			return nil, err
		}
		var v any
		if err := a.dec.Decode(&v); err != nil {
			return nil, err
		}
		m[key] = v
	}
	return m, a.delim('}')
}

func (a *answerStream) delim(d json.Delim) error {
	tok, err := a.dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("expected %v, read %v", d, tok)
	}
	return nil
}

func (a *answerStream) key() (string, error) {
	tok, err := a.dec.Token()
	if err != nil {
		return "", err
	}
	k, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("expected a key, read %v", tok)
	}
	return k, nil
}

// same compares decoded JSON values. Numbers may differ in their last bits: the service
// computes an average in float8 or a share in Go, the hand-written SQL in numeric.
func same(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !same(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !same(x[i], y[i]) {
				return false
			}
		}
		return true
	case float64:
		y, ok := b.(float64)
		return ok && math.Abs(x-y) <= 1e-9*max(1, math.Abs(x), math.Abs(y))
	default:
		return a == b
	}
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// compareCSV compares the service's CSV export, read from body, record by record with what the
// hand-written COPY writes, read at the same time from a session of its own.
func compareCSV(ctx context.Context, db dbTarget, w workload, body io.Reader) error {
	conn, err := handConn(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	pr, pw := io.Pipe()
	copied := make(chan error, 1)
	go func() {
		_, err := conn.PgConn().CopyTo(ctx, pw, handCopy(w.Hand.SQL))
		pw.CloseWithError(err) // nil: EOF
		copied <- err
	}()
	ended := false
	defer func() {
		if !ended { // stop the COPY: its next write fails
			pr.CloseWithError(errors.New("comparison ended"))
			<-copied
		}
	}()
	svc, hand := csv.NewReader(body), csv.NewReader(pr)
	svc.ReuseRecord, hand.ReuseRecord = true, true
	n := 0
	for ; ; n++ {
		a, errA := svc.Read()
		b, errB := hand.Read()
		if errA == io.EOF && errB == io.EOF {
			break
		}
		if errA != nil && errA != io.EOF {
			return fmt.Errorf("export: service CSV line %d: %w", n+1, errA)
		}
		if errB != nil && errB != io.EOF {
			return fmt.Errorf("export: hand-written COPY line %d: %w", n+1, errB)
		}
		if errA == io.EOF || errB == io.EOF {
			return fmt.Errorf("export: the service's CSV and the hand-written COPY's differ in length: one ends at line %d", n+1)
		}
		if strings.Join(a, "\x00") != strings.Join(b, "\x00") {
			return fmt.Errorf("export: line %d differs: service %q, hand-written COPY %q", n+1, a, b)
		}
	}
	ended = true
	if err := <-copied; err != nil {
		return fmt.Errorf("export: hand-written COPY: %w", err)
	}
	if n < 2 {
		return fmt.Errorf("export: fewer than two lines on both sides")
	}
	return nil
}
