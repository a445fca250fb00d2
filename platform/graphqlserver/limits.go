package graphqlserver

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// Limits of a GraphQL document: LIMITS__MAX_QUERY_DEPTH, LIMITS__MAX_QUERY_COMPLEXITY and
// LIMITS__MAX_ROOT_FIELDS.
//
// They are checked in two steps. Before gqlgen parses and validates a document it has not seen
// yet (not in its parsed-query cache), queryLimits bounds the work that parsing and validating
// it would take: how deep its brackets nest, how many fields it selects and how often one field
// is repeated in one place. Validation compares every pair of fields that share a response name,
// so a body of 10,000 copies of one field would otherwise keep a CPU busy for minutes. After
// validation, for the operation a request runs, it checks the depth of its fields, gqlgen's
// complexity and the number of root fields it executes (each one a statement, all started at
// once by gqlgen: contract 6.10), before any of them runs. Every refusal is BAD_USER_INPUT
// naming the setting; like gqlgen's parse and validation errors it is a request error: no data,
// HTTP 422 (400 when the client accepts application/graphql-response+json).

const (
	// rootFieldComplexity is the complexity of a root field (one SQL statement) besides what it
	// selects; any other field costs 1 plus what it selects (gqlgen's default).
	rootFieldComplexity = 10
	// nestingAllowance is how much deeper than LIMITS__MAX_QUERY_DEPTH a document's brackets may
	// nest (inline fragments, argument lists and input objects add levels without fields).
	nestingAllowance = 16
	// maxRepeats bounds how often one field (one response name at one place, fragments
	// included) is selected: the validator compares each copy with every other.
	maxRepeats = 20
)

func init() {
	// A request refused before it runs answers like a document that fails validation.
	errcode.RegisterErrorType(string(apierr.BadUserInput), errcode.KindProtocol)
}

// queryLimits is the gqlgen extension that enforces the document limits (see above). Use it
// after AutomaticPersistedQuery, which turns a hash into the document.
type queryLimits struct {
	maxDepth      int
	maxComplexity int
	maxRootFields int
	// cache is gqlgen's parsed-query cache: a document in it passed the checks before parsing.
	cache      graphql.Cache[*ast.QueryDocument]
	schema     *ast.Schema
	complexity *extension.ComplexityLimit
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
	graphql.OperationContextMutator
} = &queryLimits{}

func newQueryLimits(maxDepth, maxComplexity, maxRootFields int, cache graphql.Cache[*ast.QueryDocument], schema *ast.Schema) *queryLimits {
	return &queryLimits{
		maxDepth:      maxDepth,
		maxComplexity: maxComplexity,
		maxRootFields: maxRootFields,
		cache:         cache,
		schema:        schema,
		complexity:    extension.FixedComplexityLimit(maxComplexity),
	}
}

func (q *queryLimits) ExtensionName() string { return "QueryLimits" }

func (q *queryLimits) Validate(es graphql.ExecutableSchema) error { return q.complexity.Validate(es) }

// MutateOperationParameters checks a document that gqlgen has not parsed yet, before it does.
// The document is parsed here, once: when it passes the checks and validates, it goes into
// gqlgen's parsed-query cache, where the executor finds it instead of parsing it again (as
// gqlgen itself keeps a document it validated). A document that does not parse or validate is
// left to gqlgen, which reports the errors with its own codes.
func (q *queryLimits) MutateOperationParameters(ctx context.Context, raw *graphql.RawParams) *gqlerror.Error {
	if raw.Query == "" {
		return nil
	}
	if _, ok := q.cache.Get(ctx, raw.Query); ok {
		return nil
	}
	if n := nesting(raw.Query); n > q.maxDepth+nestingAllowance {
		return refusal("query depth exceeds LIMITS__MAX_QUERY_DEPTH=%d: the query nests %d levels deep", q.maxDepth, n)
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: raw.Query})
	if err != nil {
		return nil
	}
	if err := checkSize(doc, q.maxComplexity); err != nil {
		return err
	}
	if len(doc.Operations) > 0 && len(validator.ValidateWithRules(q.schema, doc, validationRules())) == 0 {
		q.cache.Add(ctx, raw.Query, doc)
	}
	return nil
}

// validationRules are the rules gqlgen's executor validates with (its defaults, with
// suggestions).
func validationRules() *rules.Rules {
	r := rules.NewDefaultRules()
	r.RemoveRule("FieldsOnCorrectTypeWithoutSuggestions")
	rule := rules.FieldsOnCorrectTypeRule
	r.AddRule(rule.Name, rule.RuleFunc)
	return r
}

// MutateOperationContext checks the validated operation a request runs.
func (q *queryLimits) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if d := queryDepth(opCtx.Doc, opCtx.Operation.SelectionSet); d > q.maxDepth {
		return refusal("query depth %d exceeds LIMITS__MAX_QUERY_DEPTH=%d", d, q.maxDepth)
	}
	if err := q.complexity.MutateOperationContext(ctx, opCtx); err != nil {
		c := q.maxComplexity + 1
		if st, ok := opCtx.Stats.GetExtension(q.complexity.ExtensionName()).(*extension.ComplexityStats); ok {
			c = st.Complexity
		}
		return refusal("query complexity %d exceeds LIMITS__MAX_QUERY_COMPLEXITY=%d (a root field costs %d, any other field 1, each plus what it selects); split the query",
			c, q.maxComplexity, rootFieldComplexity)
	}
	if q.maxRootFields > 0 {
		if n := q.rootFields(opCtx); n > q.maxRootFields {
			return refusal("the operation has %d root fields; LIMITS__MAX_ROOT_FIELDS=%d allows at most that many per request (an alias or a fragment's field counts as one); split the query",
				n, q.maxRootFields)
		}
	}
	return nil
}

// rootFields is how many root fields the operation executes: its selection collected as
// gqlgen's executor collects it (graphql.CollectFields, which caches the result for the
// executor), so that aliases and fragments' fields count, fields merged under one response name
// count once, and a field left out by @skip or @include with the request's variables does not
// count.
func (q *queryLimits) rootFields(opCtx *graphql.OperationContext) int {
	var root *ast.Definition
	switch opCtx.Operation.Operation {
	case ast.Mutation:
		root = q.schema.Mutation
	case ast.Subscription:
		root = q.schema.Subscription
	default:
		root = q.schema.Query
	}
	if root == nil {
		return 0 // validation refuses an operation its schema has no type for
	}
	return len(graphql.CollectFields(opCtx, opCtx.Operation.SelectionSet, []string{root.Name}))
}

func refusal(format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	errcode.Set(err, string(apierr.BadUserInput))
	return err
}

// nesting returns how deep brackets ({, [ and () nest in a GraphQL document, outside strings,
// block strings and comments. It reads the text only, so a document nested too deep for the
// parser's recursion is refused before it is parsed.
func nesting(q string) int {
	depth, max := 0, 0
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case '#':
			for i < len(q) && q[i] != '\n' && q[i] != '\r' {
				i++
			}
		case '"':
			if strings.HasPrefix(q[i:], `"""`) {
				j := i + 3
				for j < len(q) && !strings.HasPrefix(q[j:], `"""`) {
					if q[j] == '\\' && strings.HasPrefix(q[j+1:], `"""`) {
						j += 3
					}
					j++
				}
				i = j + 2
				continue
			}
			j := i + 1
			for j < len(q) && q[j] != '"' && q[j] != '\n' && q[j] != '\r' {
				if q[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		case '{', '[', '(':
			depth++
			if depth > max {
				max = depth
			}
		case '}', ']', ')':
			if depth > 0 {
				depth--
			}
		}
	}
	return max
}

// queryDepth is the depth of the deepest field under set (a root field has depth 1), through
// inline fragments and fragment spreads. Each fragment is measured once; a fragment that
// spreads itself (which validation refuses) ends the walk there.
func queryDepth(doc *ast.QueryDocument, set ast.SelectionSet) int {
	w := depthWalker{doc: doc, memo: map[string]int{}, active: map[string]bool{}}
	return w.set(set)
}

type depthWalker struct {
	doc    *ast.QueryDocument
	memo   map[string]int
	active map[string]bool
}

func (w *depthWalker) set(set ast.SelectionSet) int {
	deepest := 0
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			d = 1 + w.set(s.SelectionSet)
		case *ast.InlineFragment:
			d = w.set(s.SelectionSet)
		case *ast.FragmentSpread:
			d = w.fragment(s.Name)
		}
		deepest = max(deepest, d)
	}
	return deepest
}

func (w *depthWalker) fragment(name string) int {
	if d, ok := w.memo[name]; ok {
		return d
	}
	def := w.doc.Fragments.ForName(name)
	if def == nil || w.active[name] {
		return 0
	}
	w.active[name] = true
	d := w.set(def.SelectionSet)
	delete(w.active, name)
	w.memo[name] = d
	return d
}

// checkSize refuses a document whose operations select more than maxFields fields in all,
// counting a fragment at each spread and a repeated field each time (unused fragments are
// counted as if spread once), or that selects one field more than maxRepeats times in one place.
// It stops as soon as the count is over, so it costs at most maxFields steps however the
// fragments multiply.
func checkSize(doc *ast.QueryDocument, maxFields int) *gqlerror.Error {
	w := sizeWalker{doc: doc, max: maxFields, active: map[string]bool{}, used: map[string]bool{}}
	for _, op := range doc.Operations {
		if err := w.walk(op.SelectionSet, &pathNode{}); err != nil {
			return err
		}
	}
	for _, f := range doc.Fragments {
		if !w.used[f.Name] {
			w.used[f.Name] = true
			w.active[f.Name] = true
			err := w.walk(f.SelectionSet, &pathNode{})
			delete(w.active, f.Name)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

type sizeWalker struct {
	doc    *ast.QueryDocument
	max    int
	fields int
	active map[string]bool // fragments being walked (a cycle ends there)
	used   map[string]bool // fragments spread so far
}

// pathNode is one response path of an operation: fields that merge into one result field.
type pathNode struct {
	name     string
	parent   *pathNode
	count    int
	children map[string]*pathNode
}

func (n *pathNode) child(name string) *pathNode {
	if n.children == nil {
		n.children = map[string]*pathNode{}
	}
	c := n.children[name]
	if c == nil {
		c = &pathNode{name: name, parent: n}
		n.children[name] = c
	}
	return c
}

func (n *pathNode) path() string {
	var parts []string
	for p := n; p.parent != nil; p = p.parent {
		parts = append(parts, p.name)
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".")
}

func (w *sizeWalker) walk(set ast.SelectionSet, at *pathNode) *gqlerror.Error {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			w.fields++
			if w.fields > w.max {
				return refusal("query complexity exceeds LIMITS__MAX_QUERY_COMPLEXITY=%d: the query selects more than %[1]d fields (a fragment counts at each use, a repeated field each time); split the query",
					w.max)
			}
			name := s.Alias
			if name == "" {
				name = s.Name
			}
			c := at.child(name)
			c.count++
			if c.count > maxRepeats {
				return refusal("query complexity: field %q is selected more than %d times at %s; select it once (or give each copy its own alias)",
					name, maxRepeats, c.path())
			}
			if err := w.walk(s.SelectionSet, c); err != nil {
				return err
			}
		case *ast.InlineFragment:
			if err := w.walk(s.SelectionSet, at); err != nil {
				return err
			}
		case *ast.FragmentSpread:
			def := w.doc.Fragments.ForName(s.Name)
			if def == nil || w.active[s.Name] {
				continue
			}
			w.used[s.Name] = true
			w.active[s.Name] = true
			err := w.walk(def.SelectionSet, at)
			delete(w.active, s.Name)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// rootFieldCost gives gqlgen's complexity its costs: a root field (other than introspection's)
// costs rootFieldComplexity plus what it selects; other fields keep the schema's own costs
// (gqlgen's default, 1 plus what they select).
type rootFieldCost struct{ graphql.ExecutableSchema }

func (s rootFieldCost) Complexity(ctx context.Context, typeName, field string, childComplexity int, args map[string]any) (int, bool) {
	if q := s.Schema().Query; q != nil && typeName == q.Name && !strings.HasPrefix(field, "__") {
		return rootFieldComplexity + childComplexity, true
	}
	return s.ExecutableSchema.Complexity(ctx, typeName, field, childComplexity, args)
}

// persistedQueries is gqlgen's automatic persisted queries with a client error code on its
// refusals (a hash that does not match the query, a bad extension), which it leaves without one.
// PERSISTED_QUERY_NOT_FOUND keeps its code: clients answer it by sending the query again.
type persistedQueries struct {
	extension.AutomaticPersistedQuery
}

func (p persistedQueries) MutateOperationParameters(ctx context.Context, raw *graphql.RawParams) *gqlerror.Error {
	err := p.AutomaticPersistedQuery.MutateOperationParameters(ctx, raw)
	if err != nil && err.Extensions["code"] == nil {
		err.Message = "persistedQuery: " + err.Message
		errcode.Set(err, string(apierr.BadUserInput))
	}
	return err
}
