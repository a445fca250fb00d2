package gqlhttp

import (
	"context"
	"slices"

	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// FieldTables says which tables each root field's statements read (the modules declare them),
// so that with the replication change source an answer ends only when one of its tables
// changes (contract 6.13). A root field not listed may read any table.
type FieldTables map[string][]string

// questionTables remembers the tables of the questions asked, so that a question asked again
// (a dashboard's, every few seconds) is not parsed again to find them: with the answer cache on
// that parse was most of the work of an answer from memory. Bounded as gqlexec's parsed-query
// cache: at most tablesEntries questions, each of at most maxTablesQuery bytes (a larger one is
// parsed each time).
type questionTables struct {
	ft   FieldTables
	seen *lru.LRU[[]string]
}

const (
	tablesEntries  = 1000
	maxTablesQuery = 8 << 10
)

func newQuestionTables(ft FieldTables) *questionTables {
	return &questionTables{ft: ft, seen: lru.New[[]string](tablesEntries)}
}

// tablesOf is FieldTables.tablesOf, remembered; the slice is shared, never to be changed.
func (q *questionTables) tablesOf(query, operation string) []string {
	if len(q.ft) == 0 {
		return nil
	}
	if len(query) > maxTablesQuery {
		return q.ft.tablesOf(query, operation)
	}
	key := operation + "\x00" + query
	if t, ok := q.seen.Get(context.Background(), key); ok {
		return t
	}
	t := q.ft.tablesOf(query, operation)
	q.seen.Add(context.Background(), key, t)
	return t
}

// tablesOf is the tables the operation of query reads, nil when it may read any (a field not
// in ft, a document that does not parse: its answer has errors and is not kept anyway).
// Introspection reads none.
func (ft FieldTables) tablesOf(query, operation string) []string {
	if len(ft) == 0 {
		return nil
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		return nil
	}
	var op *ast.OperationDefinition
	for _, o := range doc.Operations {
		if o.Name == operation || operation == "" && len(doc.Operations) == 1 {
			op = o
		}
	}
	if op == nil {
		return nil
	}
	seen := map[string]bool{}
	tables := []string{}
	// Each fragment is walked once: a chain of fragments that spread the next twice would
	// otherwise cost 2^depth (the tables are a union, so once is enough).
	visiting, walked := map[string]bool{}, map[string]bool{}
	var walk func(ast.SelectionSet) bool
	walk = func(set ast.SelectionSet) bool {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				if sel.Name == "__typename" || sel.Name == "__schema" || sel.Name == "__type" {
					continue
				}
				ts, ok := ft[sel.Name]
				if !ok {
					return false
				}
				for _, t := range ts {
					if !seen[t] {
						seen[t] = true
						tables = append(tables, t)
					}
				}
			case *ast.InlineFragment:
				if !walk(sel.SelectionSet) {
					return false
				}
			case *ast.FragmentSpread:
				if walked[sel.Name] {
					continue
				}
				f := doc.Fragments.ForName(sel.Name)
				if f == nil || visiting[sel.Name] {
					return false
				}
				visiting[sel.Name] = true
				ok := walk(f.SelectionSet)
				visiting[sel.Name], walked[sel.Name] = false, true
				if !ok {
					return false
				}
			}
		}
		return true
	}
	if !walk(op.SelectionSet) {
		return nil
	}
	// In a fixed order: the same tables give the same version whatever the fields' order.
	slices.Sort(tables)
	return tables
}
