package gqlexec

import (
	"context"
	"strings"
	"testing"
)

func TestCachesKeepOnlyDocumentsOfModestSize(t *testing.T) {
	ctx := context.Background()
	q := newQueryCache()
	small := `{ records_count { count } }`
	q.Add(ctx, small, parse(t, small))
	if _, ok := q.Get(ctx, small); !ok {
		t.Error("a small document is not cached")
	}
	intro := introspectionQuery(t)
	q.Add(ctx, intro, parse(t, intro))
	if _, ok := q.Get(ctx, intro); !ok {
		t.Error("the introspection query (GraphiQL's schema fetch) is not cached")
	}
	huge := "{ records_count { count } }" + strings.Repeat(" ", maxCachedQuery)
	q.Add(ctx, huge, parse(t, small))
	if _, ok := q.Get(ctx, huge); ok {
		t.Error("a document over maxCachedQuery is cached")
	}

	a := newAPQCache()
	a.Add(ctx, "h1", small)
	a.Add(ctx, "h2", huge)
	if _, ok := a.Get(ctx, "h1"); !ok {
		t.Error("a small persisted query is not kept")
	}
	if _, ok := a.Get(ctx, "h2"); ok {
		t.Error("a persisted query over maxCachedQuery is kept")
	}
}
