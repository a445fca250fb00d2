package gqlhttp

import (
	"slices"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// FieldTables says which tables each root field's statements read (the modules declare them),
// so that with the replication change source an answer ends only when one of its tables
// changes (contract 6.13). A root field not listed may read any table.
type FieldTables map[string][]string

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
