package graphqlserver

import (
	"context"

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
// text. It also hands gqlgen's executor the document that queryLimits parsed and validated for
// the request at hand (checked), kept or not, so that the executor does neither again.
type queryCache struct {
	sizeGated[*ast.QueryDocument]
}

func (c queryCache) Get(ctx context.Context, query string) (*ast.QueryDocument, bool) {
	if doc := checkedOf(ctx, query); doc != nil {
		return doc, true
	}
	return c.sizeGated.Get(ctx, query)
}

// newQueryCache caches parsed documents by their query text.
func newQueryCache() graphql.Cache[*ast.QueryDocument] {
	return queryCache{sizeGated[*ast.QueryDocument]{
		LRU:       lru.New[*ast.QueryDocument](queryCacheEntries),
		queryText: func(query string, _ *ast.QueryDocument) string { return query },
	}}
}

// newAPQCache maps persisted-query hashes to their query text.
func newAPQCache() graphql.Cache[string] {
	return sizeGated[string]{
		LRU:       lru.New[string](apqCacheEntries),
		queryText: func(_ string, query string) string { return query },
	}
}
