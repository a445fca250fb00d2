package records

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/emsanalytics/emsquery/platform/database"
)

// Collator orders values as the database orders a column's values, for answers made from
// followed counts (contract 6.13): numbers, booleans and times here, text by the column's
// collation, which only the database knows. Text values are sorted by a small statement that
// reads no table; the order found is remembered, so that values already seen need no statement.
// Everything remembered is dropped when gen moves (the definition of a table may have changed).
type Collator struct {
	db  *database.DB
	gen func() uint64

	mu    sync.Mutex
	at    uint64
	texts map[string]*textOrder // by column
}

// textOrder is what is known of a text column: its collation, and a rank for each value seen.
type textOrder struct {
	collation     string // sanitized, schema-qualified
	deterministic bool
	rank          map[string]int
}

// maxRanked bounds the text values remembered per column.
const maxRanked = 100_000

// NewCollator returns a collator that asks db, and forgets when gen moves.
func NewCollator(db *database.DB, gen func() uint64) *Collator {
	return &Collator{db: db, gen: gen, texts: map[string]*textOrder{}}
}

// The operations of the collator's statements, as db.client.operation.duration names them.
const (
	opCollation = "column collation"
	opSortTexts = "sort texts"
)

// order is what is known of text column c, its collation read the first time.
func (o *Collator) order(ctx context.Context, c Column) (*textOrder, error) {
	o.mu.Lock()
	if g := o.gen(); g != o.at {
		o.at = g
		clear(o.texts)
	}
	t := o.texts[c.Name]
	o.mu.Unlock()
	if t != nil {
		return t, nil
	}
	// The table is named by a parameter: this statement reads the catalog, not the table.
	const q = `SELECT n.nspname, l.collname, l.collisdeterministic
FROM pg_attribute AS a JOIN pg_collation AS l ON l.oid = a.attcollation JOIN pg_namespace AS n ON n.oid = l.collnamespace
WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND NOT a.attisdropped`
	var nsp, name string
	t = &textOrder{rank: map[string]int{}}
	if err := o.db.QueryRow(ctx, opCollation, q, []any{RecordTable, c.field}, &nsp, &name, &t.deterministic); err != nil {
		return nil, fmt.Errorf("%s: %w", opCollation, err)
	}
	t.collation = pgx.Identifier{nsp, name}.Sanitize()
	o.mu.Lock()
	o.texts[c.Name] = t
	o.mu.Unlock()
	return t, nil
}

// Deterministic says whether text column c's collation is deterministic: two values are equal
// only when their bytes are, so grouping and comparing by the text is exact.
func (o *Collator) Deterministic(ctx context.Context, c Column) (bool, error) {
	t, err := o.order(ctx, c)
	if err != nil {
		return false, err
	}
	return t.deterministic, nil
}

// Sort orders values (the text of c's values, as ValueText writes them; nil is NULL) ascending
// as the database orders the column, NULL last: ORDER BY c ASC NULLS LAST.
func (o *Collator) Sort(ctx context.Context, c Column, values []*string) error {
	if c.Type != TypeText {
		var err error
		slices.SortFunc(values, func(a, b *string) int {
			if a == nil || b == nil {
				return nullsLast(a, b)
			}
			n, e := CompareText(c, *a, *b)
			if e != nil && err == nil {
				err = e
			}
			return n
		})
		return err
	}
	t, err := o.order(ctx, c)
	if err != nil {
		return err
	}
	o.mu.Lock()
	var unknown []string
	for _, v := range values {
		if v != nil {
			if _, ok := t.rank[*v]; !ok {
				unknown = append(unknown, *v)
			}
		}
	}
	var all []string
	if len(unknown) > 0 {
		// The known values and the new ones, sorted together: each gets its rank.
		if len(t.rank)+len(unknown) <= maxRanked {
			all = append(slices.Collect(maps.Keys(t.rank)), unknown...)
		} else {
			for _, v := range values {
				if v != nil {
					all = append(all, *v)
				}
			}
		}
	}
	rank := t.rank // never changed: replaced whole
	o.mu.Unlock()
	if len(all) > 0 {
		sorted, err := o.sortTexts(ctx, t.collation, all)
		if err != nil {
			return err
		}
		rank = make(map[string]int, len(sorted))
		for i, v := range sorted {
			rank[v] = i
		}
		o.mu.Lock()
		t.rank = rank
		o.mu.Unlock()
	}
	slices.SortFunc(values, func(a, b *string) int {
		if a == nil || b == nil {
			return nullsLast(a, b)
		}
		return rank[*a] - rank[*b]
	})
	return nil
}

// sortTexts sorts texts by a collation with a statement that reads no table.
func (o *Collator) sortTexts(ctx context.Context, collation string, texts []string) ([]string, error) {
	// collation is an identifier read from the catalog, sanitized: the one non-parameter.
	q := `SELECT v FROM unnest($1::text[]) AS v ORDER BY v COLLATE ` + collation
	out, err := database.Collect(ctx, o.db, opSortTexts, q, []any{texts}, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opSortTexts, err)
	}
	if len(out) != len(texts) {
		return nil, fmt.Errorf("%s: %d values sorted, %d sent", opSortTexts, len(out), len(texts))
	}
	return out, nil
}

// nullsLast orders NULL after every value (one of a and b is nil).
func nullsLast(a, b *string) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	}
	return -1
}
