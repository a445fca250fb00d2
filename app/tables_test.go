package app

import (
	"slices"
	"testing"

	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/app/gqllookups"
	"github.com/emsanalytics/emsquery/app/gqlpublic"
	"github.com/emsanalytics/emsquery/app/gqlserve"
	"github.com/emsanalytics/emsquery/platform/replication"
)

// Every root field of every endpoint's schema, query and subscription, declares the tables it
// reads (contract 6.13): a field without one would count as reading any table, and its answers
// would end with every load. Every declaration names a root field of its endpoint and only
// tables the change source follows.
func TestEveryRootFieldDeclaresItsTables(t *testing.T) {
	followed := append(slices.Clone(replication.Tables), replication.OptionalTables...)
	for route, es := range map[string]graphql.ExecutableSchema{
		"/graphql":         gqlpublic.NewExecutableSchema(gqlpublic.Config{}),
		"/serve/graphql":   gqlserve.NewExecutableSchema(gqlserve.Config{}),
		"/lookups/graphql": gqllookups.NewExecutableSchema(gqllookups.Config{}),
	} {
		declared := EndpointTables[route]
		schema := es.Schema()
		fields := map[string]bool{}
		for _, root := range []string{"Query", "Subscription"} {
			def := schema.Types[root]
			if def == nil {
				continue
			}
			for _, f := range def.Fields {
				if len(f.Name) > 1 && f.Name[:2] == "__" {
					continue
				}
				fields[f.Name] = true
				if _, ok := declared[f.Name]; !ok {
					t.Errorf("%s: %s.%s declares no tables (its module's FieldTables)", route, root, f.Name)
				}
			}
		}
		if len(fields) == 0 {
			t.Errorf("%s: no root fields found in the schema", route)
		}
		for name, tables := range declared {
			if !fields[name] {
				t.Errorf("%s: %s is declared but is no root field of the schema", route, name)
			}
			if tables == nil {
				t.Errorf("%s: %s declares nil (any table); give the tables, or an empty list for none", route, name)
			}
			for _, table := range tables {
				if !slices.Contains(followed, table) {
					t.Errorf("%s: %s declares %s, which is not a followed table (%v)", route, name, table, followed)
				}
			}
		}
	}
}
