package gqlexec

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
)

// The parsed-query and persisted-query caches are gqlgen's LRU. It bounds the number of entries
// only, and a document may be as large as APP__MAX_BODY_BYTES: 1,000 one-off megabyte documents
// and their syntax trees would take gigabytes. So only documents up to maxCachedQuery bytes are
// kept; dashboards' queries are far smaller, and a larger one is simply parsed again each time.
const (
	queryCacheEntries = 1000
	apqCacheEntries   = 1000
	maxCachedQuery    = 8 << 10
)

// sizeGated is a graphql.Cache that keeps only entries whose query text fits maxCachedQuery.
type sizeGated[T any] struct {
	*lru.LRU[T]
	queryText func(key string, value T) string
}

var _ graphql.Cache[string] = sizeGated[string]{}

func (c sizeGated[T]) Add(ctx context.Context, key string, value T) {
	if len(c.queryText(key, value)) <= maxCachedQuery {
		c.LRU.Add(ctx, key, value)
	}
}

// queryCache is gqlgen's parsed-query cache: documents parsed and validated, by their query
// text, each with its operations' measures (depth and complexity) once taken (measure). It also
// hands gqlgen's executor the document that queryLimits parsed and validated for the request at
// hand (checked), kept or not, so that the executor does neither again.
type queryCache struct {
	lru *lru.LRU[*cachedDoc]
}

// cachedDoc is a document kept, and the measures of its operations that take no variables
// (with variables, @skip, @include and arguments may change them from one request to the next).
type cachedDoc struct {
	doc      *ast.QueryDocument
	measures sync.Map // *ast.OperationDefinition -> measure
}

// measure is what queryLimits measured of an operation: the depth of its fields, gqlgen's
// complexity and how many root fields it executes (when LIMITS__MAX_ROOT_FIELDS is set).
type measure struct{ depth, complexity, rootFields int }

var _ graphql.Cache[*ast.QueryDocument] = queryCache{}

func (c queryCache) Get(ctx context.Context, query string) (*ast.QueryDocument, bool) {
	if doc := checkedOf(ctx, query); doc != nil {
		return doc, true
	}
	if e, ok := c.lru.Get(ctx, query); ok {
		return e.doc, true
	}
	return nil, false
}

// Add keeps doc, when its query text fits maxCachedQuery.
func (c queryCache) Add(ctx context.Context, query string, doc *ast.QueryDocument) {
	if len(query) <= maxCachedQuery {
		c.lru.Add(ctx, query, &cachedDoc{doc: doc})
	}
}

// measured is the measure of op, an operation of doc (whose query text is query), taken before;
// ok false when it was not, or may not be kept (take, then keep).
func (c queryCache) measured(ctx context.Context, query string, doc *ast.QueryDocument, op *ast.OperationDefinition) (m measure, keep func(measure), ok bool) {
	keep = func(measure) {}
	if len(op.VariableDefinitions) > 0 || len(query) > maxCachedQuery {
		return measure{}, keep, false
	}
	e, found := c.lru.Get(ctx, query)
	if !found || e.doc != doc {
		return measure{}, keep, false
	}
	if v, found := e.measures.Load(op); found {
		return v.(measure), keep, true
	}
	return measure{}, func(m measure) { e.measures.Store(op, m) }, false
}

// newQueryCache caches parsed documents by their query text.
func newQueryCache() queryCache {
	return queryCache{lru: lru.New[*cachedDoc](queryCacheEntries)}
}

// newAPQCache maps persisted-query hashes to their query text.
func newAPQCache() graphql.Cache[string] {
	return sizeGated[string]{
		LRU:       lru.New[string](apqCacheEntries),
		queryText: func(_ string, query string) string { return query },
	}
}
