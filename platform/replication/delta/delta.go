// Package delta keeps counts of a table's rows up to date from the rows a transaction changed
// (replication.Row), so that a counting answer (records_count, record_series, distinct_values,
// unique_counts) follows a load without reading the table again (contract section 6.13).
//
// A Counter holds, per group key, how many of the table's rows a Selector picks: the number of
// records (the total), the distinct values of a column (the keys with a count), their counts
// (unique counts), counts per time bucket (a key made from a timestamp). It starts from counts
// read from the database together with that statement's snapshot (pg_current_snapshot()), and
// then applies exactly the transactions that the snapshot did not see: so no change is counted
// twice or missed, whatever ran while the first counts were read.
//
// What cannot be followed exactly is refused with an error, and the caller computes the answer
// again: an UPDATE or DELETE without the old row (a table without REPLICA IDENTITY FULL), a
// transaction larger than the stream keeps (replication.Transaction.Overflow), a value the
// server did not send, a column that is gone. Comparisons are on the values' text as PostgreSQL
// writes it: exact for equality of text, integers, dates and timestamps, booleans and numerics
// of a fixed scale; a filter that needs more (ordering of text by collation, numeric ranges)
// belongs to the caller, which knows whether it can evaluate it exactly.
package delta

import (
	"errors"
	"fmt"
	"strings"

	"github.com/emsanalytics/emsquery/platform/replication"
)

// ErrCannotFollow is wrapped by every refusal to apply a change: the counts are then unknown
// and the answer must be computed again.
var ErrCannotFollow = errors.New("cannot follow the change")

// Key is the values of the grouping columns of a row, NULLs included, in one comparable string.
type Key string

// MakeKey builds a key from values in order; nil is NULL. (PostgreSQL's text holds no NUL
// byte, so the encoding is unambiguous.)
func MakeKey(values ...*string) Key {
	n := 0
	for _, v := range values {
		n += 2
		if v != nil {
			n += len(*v)
		}
	}
	var b strings.Builder
	b.Grow(n) // one allocation, which the key is: a key is made per row and question followed
	for _, v := range values {
		if v == nil {
			b.WriteString("n\x00")
			continue
		}
		b.WriteByte('t')
		b.WriteString(*v)
		b.WriteByte(0)
	}
	return Key(b.String())
}

// Values decodes a key into its values; nil is NULL.
func (k Key) Values() []*string {
	var vals []*string
	s := string(k)
	for s != "" {
		v, rest, _ := strings.Cut(s, "\x00")
		s = rest
		if v == "n" {
			vals = append(vals, nil)
			continue
		}
		text := v[1:]
		vals = append(vals, &text)
	}
	return vals
}

// Row reads a changed row's values by column name.
type Row struct {
	rel  *replication.Relation
	vals []replication.Value
}

// Get is the column's value (nil for NULL), or an error wrapping ErrCannotFollow when the
// table has no such column or the value was not sent.
func (r Row) Get(column string) (*string, error) {
	_, v, err := r.ColumnValue(column)
	return v, err
}

// ColumnValue is the named column's description and its value (nil for NULL), errors as Get's,
// in one look at the table's columns. The value points into the row, which no one changes: a
// row is read by every question that follows its table, and a copy per read was most of the
// cost of following a load.
func (r Row) ColumnValue(column string) (replication.Column, *string, error) {
	i := r.rel.Index(column)
	if i < 0 || i >= len(r.vals) {
		return replication.Column{}, nil, fmt.Errorf("%w: %s has no column %s", ErrCannotFollow, r.rel.Table, column)
	}
	switch v := &r.vals[i]; v.Kind {
	case replication.Text:
		return r.rel.Columns[i], &v.Text, nil
	case replication.Null:
		return r.rel.Columns[i], nil, nil
	default:
		return replication.Column{}, nil, fmt.Errorf("%w: the value of %s.%s was not sent", ErrCannotFollow, r.rel.Table, column)
	}
}

// Selector says which rows a count takes and under which key.
type Selector struct {
	// Table is the counted table (a followed table's name).
	Table string
	// Where picks the rows counted; nil takes every row.
	Where func(Row) (bool, error)
	// Key groups the rows; nil puts every row under the empty key (a plain count).
	Key func(Row) (Key, error)
}

// Columns is a Selector.Key of the named columns' values.
func Columns(columns ...string) func(Row) (Key, error) {
	return func(r Row) (Key, error) {
		vals := make([]*string, len(columns))
		for i, c := range columns {
			v, err := r.Get(c)
			if err != nil {
				return "", err
			}
			vals[i] = v
		}
		return MakeKey(vals...), nil
	}
}

// In is a Selector.Where: the column's value is one of values (nil: NULL), compared as text.
func In(column string, values ...*string) func(Row) (bool, error) {
	return func(r Row) (bool, error) {
		v, err := r.Get(column)
		if err != nil {
			return false, err
		}
		for _, w := range values {
			if (v == nil) == (w == nil) && (v == nil || *v == *w) {
				return true, nil
			}
		}
		return false, nil
	}
}

// All is a Selector.Where that holds when every one of conds does.
func All(conds ...func(Row) (bool, error)) func(Row) (bool, error) {
	return func(r Row) (bool, error) {
		for _, c := range conds {
			ok, err := c(r)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	}
}

// Counter is the count of a table's rows per key, for one Selector. It is not safe for
// concurrent use.
type Counter struct {
	sel    Selector
	snap   *Snapshot
	counts map[Key]int64
	total  int64
	broken error
}

// NewCounter starts from counts read from the database (keys built as sel.Key builds them)
// under snap, the snapshot of the statement that read them, read after replication.Start
// returned: Apply then skips the transactions snap saw. A nil snap applies every transaction
// (right only for counts read when nothing could have committed since the stream started).
func NewCounter(sel Selector, counts map[Key]int64, snap *Snapshot) *Counter {
	c := &Counter{sel: sel, snap: snap, counts: make(map[Key]int64, len(counts))}
	for k, n := range counts {
		if n > 0 {
			c.counts[k] = n
			c.total += n
		}
	}
	return c
}

// Total is the number of rows counted (records_count).
func (c *Counter) Total() int64 { return c.total }

// Count is the number of rows under k.
func (c *Counter) Count(k Key) int64 { return c.counts[k] }

// Len is the number of keys with rows (a distinct count).
func (c *Counter) Len() int { return len(c.counts) }

// Counts is a copy of the counts per key, keys without rows left out.
func (c *Counter) Counts() map[Key]int64 {
	m := make(map[Key]int64, len(c.counts))
	for k, n := range c.counts {
		m[k] = n
	}
	return m
}

// Apply brings the counts up to date with a committed transaction. It returns whether the
// counts changed; an error (wrapping ErrCannotFollow) means the counts are lost: the Counter
// refuses every later transaction too, and the answer must be computed again.
func (c *Counter) Apply(tx *replication.Transaction) (changed bool, err error) {
	if c.broken != nil {
		return false, c.broken
	}
	if !tx.Changed(c.sel.Table) || c.snap != nil && c.snap.Sees(tx.Xid) {
		return false, nil
	}
	if tx.Overflow {
		return false, c.fail(fmt.Errorf("%w: a transaction of more rows than are kept changed %s", ErrCannotFollow, c.sel.Table))
	}
	for i := range tx.Rows {
		r := &tx.Rows[i]
		if r.Relation.Table != c.sel.Table {
			continue
		}
		ch, err := c.apply(r)
		if err != nil {
			return false, c.fail(err)
		}
		changed = changed || ch
	}
	return changed, nil
}

func (c *Counter) fail(err error) error {
	c.broken = err
	c.counts = nil
	return err
}

func (c *Counter) apply(r *replication.Row) (bool, error) {
	switch r.Op {
	case replication.Truncate:
		changed := c.total > 0
		clear(c.counts)
		c.total = 0
		return changed, nil
	case replication.Insert:
		return c.add(Row{r.Relation, r.New}, 1)
	case replication.Update, replication.Delete:
		if !r.OldComplete {
			return false, fmt.Errorf("%w: an %s of %s without the old row (REPLICA IDENTITY FULL is not set)", ErrCannotFollow, r.Op, c.sel.Table)
		}
		removed, err := c.add(Row{r.Relation, r.Old}, -1)
		if err != nil || r.Op == replication.Delete {
			return removed, err
		}
		added, err := c.add(Row{r.Relation, r.New}, 1)
		return removed || added, err
	}
	return false, fmt.Errorf("%w: unknown operation %v", ErrCannotFollow, r.Op)
}

// add counts (n = 1) or uncounts (n = -1) a row, if the selector takes it.
func (c *Counter) add(row Row, n int64) (bool, error) {
	if c.sel.Where != nil {
		ok, err := c.sel.Where(row)
		if err != nil || !ok {
			return false, err
		}
	}
	var k Key
	if c.sel.Key != nil {
		var err error
		if k, err = c.sel.Key(row); err != nil {
			return false, err
		}
	}
	v := c.counts[k] + n
	if v < 0 {
		return false, fmt.Errorf("%w: %s lost a row it did not count", ErrCannotFollow, c.sel.Table)
	}
	if v == 0 {
		delete(c.counts, k)
	} else {
		c.counts[k] = v
	}
	c.total += n
	return true, nil
}

// Column is the description of the named column of the changed row's table, false when the
// table has no such column: a follower checks the type before it reads a value's text.
func (r Row) Column(name string) (replication.Column, bool) {
	i := r.rel.Index(name)
	if i < 0 {
		return replication.Column{}, false
	}
	return r.rel.Columns[i], true
}
