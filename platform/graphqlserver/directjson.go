package graphqlserver

import (
	"runtime"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"

	"github.com/emsanalytics/emsquery/platform/gqljson"
)

// DirectJSON names what platform/gqljson writes to JSON itself instead of gqlgen's per-field
// marshalers (see gqljson.New): the server lists its endpoints' types, which this package does
// not know.
type DirectJSON struct {
	// Types are the object types whose values gqljson writes: plain structs bound field by
	// field with json tags, with built-in scalars, lists and each other.
	Types []string
	// BulkFields are root fields that answer whole tables (hundreds of thousands of rows): see
	// gqljson.LimitBulk.
	BulkFields []string
}

// directJSONTransport wraps a gqlgen transport so that the JSON platform/gqljson writes goes to
// the client without being copied and re-validated (see gqljson.Transport).
func directJSONTransport(t graphql.Transport, d *DirectJSON) graphql.Transport {
	if d == nil {
		return t
	}
	return gqljson.Transport{Transport: t}
}

// useDirectJSON installs platform/gqljson's middlewares on srv.
func useDirectJSON(srv *handler.Server, es graphql.ExecutableSchema, d *DirectJSON) {
	if d == nil {
		return
	}
	w := gqljson.New(es.Schema(), d.Types...)
	// Whole tables: a few at a time, as many as there are processors to write them.
	w.LimitBulk(runtime.GOMAXPROCS(0), d.BulkFields...)
	srv.AroundRootFields(w.RootFields)
	srv.AroundFields(w.Fields)
}
