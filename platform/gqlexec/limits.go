package gqlexec

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/emsanalytics/emsquery/platform/apierr"
)

// Limits of a GraphQL document: LIMITS__MAX_QUERY_DEPTH, LIMITS__MAX_QUERY_COMPLEXITY and
// LIMITS__MAX_ROOT_FIELDS, and the fixed bounds maxTokens, maxArguments and maxErrors.
//
// They are checked in two steps. Before gqlgen parses and validates a document it has not seen
// yet (not in its parsed-query cache), queryLimits bounds the work that parsing and validating
// it would take: how deep its brackets nest, how many tokens it has (gqlparser's token limit),
// how many arguments a field takes, how many fields and fragment spreads it selects with each
// fragment counted at each spread, and how often one field is repeated in one place. Each of
// these costs time linear in the document's length: a fragment's cost is computed once and kept,
// never walked again at each spread, so a chain of fragments that doubles at each level is
// refused after one walk of its text. Validation compares every pair of fields that share a
// response name (and their arguments pairwise), so a body of 10,000 copies of one field, or two
// copies with thousands of arguments, would otherwise keep a CPU busy for seconds or minutes.
//
// queryLimits parses and validates the document itself, once: gqlgen takes the result from its
// query cache (see checked), so no document is parsed or validated twice, and a document that
// does not parse or validate is answered with all of its errors, with gqlgen's codes. After
// validation, for the operation a request runs, it checks the depth of its fields, gqlgen's
// complexity and the number of root fields it executes (each one a statement, all started at
// once by gqlgen: contract 6.10), before any of them runs. Every refusal is BAD_USER_INPUT
// naming the limit; like gqlgen's parse and validation errors it is a request error: no data,
// HTTP 422 (400 when the client accepts application/graphql-response+json). An answer lists at
// most maxErrors errors (errorLimit).

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
	// maxTokens bounds a document's tokens as gqlparser counts them (names, values, punctuators
	// and comments): whatever a document holds, parsing and validating it stays short. The
	// standard introspection query has 182.
	maxTokens = 10000
	// maxArguments bounds the arguments of one field (or directive): the validator compares two
	// copies of a field argument by argument, each with every other.
	maxArguments = 100
	// maxErrors bounds the errors an answer lists; the rest are counted in one more error.
	maxErrors = 100
	// maxSuggestingDocument is the largest document whose validation errors suggest names
	// (validationRules).
	maxSuggestingDocument = 32 << 10
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
	// cache is gqlgen's parsed-query cache: a document in it passed the checks and validated,
	// and keeps its operations' measures.
	cache  queryCache
	schema *ast.Schema
	// es computes gqlgen's complexity (rootFieldCost); set by Validate.
	es graphql.ExecutableSchema
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
	graphql.OperationContextMutator
} = &queryLimits{}

func newQueryLimits(maxDepth, maxComplexity, maxRootFields int, cache queryCache, schema *ast.Schema) *queryLimits {
	return &queryLimits{
		maxDepth:      maxDepth,
		maxComplexity: maxComplexity,
		maxRootFields: maxRootFields,
		cache:         cache,
		schema:        schema,
	}
}

func (q *queryLimits) ExtensionName() string { return queryLimitsName }

func (q *queryLimits) Validate(es graphql.ExecutableSchema) error {
	q.es = es
	return nil
}

// MutateOperationParameters checks a document that gqlgen has not parsed yet, before it does,
// and parses and validates it, once: gqlgen finds the result on the operation context (checked),
// and a document that validates goes into gqlgen's parsed-query cache as well, as gqlgen itself
// keeps a document it validated.
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
	doc, errs := parseDocument(raw.Query)
	if errs == nil {
		if err := checkSize(doc, q.maxComplexity); err != nil {
			if err.Extensions["code"] != errcode.ValidationFailed {
				return err
			}
			errs = gqlerror.List{err}
		}
	}
	if errs == nil {
		errs = validator.ValidateWithRules(q.schema, doc, validationRules(raw.Query))
		for _, err := range errs {
			errcode.Set(err, errcode.ValidationFailed)
		}
	}
	if errs != nil {
		keep(ctx, &checked{query: raw.Query, errs: errs})
		return errs[0]
	}
	q.cache.Add(ctx, raw.Query, doc)
	keep(ctx, &checked{query: raw.Query, doc: doc})
	return nil
}

// parseDocument parses a document as gqlgen's executor would, with its error codes, but
// refuses one of more than maxTokens tokens as a limit (BAD_USER_INPUT), not a syntax error.
func parseDocument(query string) (*ast.QueryDocument, gqlerror.List) {
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, maxTokens)
	if err != nil {
		var gqlErr *gqlerror.Error
		if !errors.As(err, &gqlErr) {
			gqlErr = gqlerror.Wrap(err)
		}
		// gqlparser reports its token limit by this message alone (no place in the document);
		// TestParseDocument would see it change.
		if strings.HasPrefix(gqlErr.Message, "exceeded token limit") {
			return nil, gqlerror.List{refusal("the document has more than %d tokens, the most a document may have (each name, value, punctuator and comment is one); split the query",
				maxTokens)}
		}
		errcode.Set(gqlErr, errcode.ParseFailed)
		return nil, gqlerror.List{gqlErr}
	}
	if len(doc.Operations) == 0 {
		err := gqlerror.Errorf("no operation provided")
		errcode.Set(err, errcode.ValidationFailed)
		return nil, gqlerror.List{err}
	}
	return doc, nil
}

// checked is what queryLimits made of a request's document, kept on the request's operation
// context (as its extension's statistics) for the rest of the request: the document parsed and
// validated, which the query cache hands gqlgen's executor in place of parsing and validating
// it again (even when it is too large to be kept in the cache), or all the errors of a document
// that does not parse or validate, where gqlgen's extension interface returns only the first
// (documentErrors).
type checked struct {
	query string
	doc   *ast.QueryDocument
	errs  gqlerror.List
}

// queryLimitsName is queryLimits' extension name, under which checked is kept.
const queryLimitsName = "QueryLimits"

// keep records c on the operation context of ctx's request.
func keep(ctx context.Context, c *checked) {
	if graphql.HasOperationContext(ctx) {
		graphql.GetOperationContext(ctx).Stats.SetExtension(queryLimitsName, c)
	}
}

// checkedOf is the document of ctx's request that queryLimits parsed and validated, if any.
func checkedOf(ctx context.Context, query string) *ast.QueryDocument {
	if !graphql.HasOperationContext(ctx) {
		return nil
	}
	if c, ok := graphql.GetOperationContext(ctx).Stats.GetExtension(queryLimitsName).(*checked); ok && c.doc != nil && c.query == query {
		return c.doc
	}
	return nil
}

// documentErrors are the errors to answer a request refused before it ran (errs, as gqlgen's
// executor returned them, and rc its operation context): all of them when queryLimits found
// that its document does not parse or validate.
func documentErrors(rc *graphql.OperationContext, errs gqlerror.List) gqlerror.List {
	if rc == nil || len(errs) != 1 {
		return errs
	}
	if c, ok := rc.Stats.GetExtension(queryLimitsName).(*checked); ok && len(c.errs) > 1 && c.errs[0] == errs[0] {
		return c.errs
	}
	return errs
}

// validationRules are the rules gqlgen's executor validates with: its defaults, with
// suggestions ("Did you mean ...?") for a document of up to maxSuggestingDocument bytes, and
// without for a larger one. A suggestion compares an unknown name with every name it could have
// meant (every type of the schema, for a fragment's type), at a cost of the product of their
// lengths: a megabyte of long unknown names took seconds, where a dashboard's query is a few
// kilobytes.
func validationRules(query string) *rules.Rules {
	r := rules.NewDefaultRules()
	if len(query) <= maxSuggestingDocument {
		r.RemoveRule(rules.FieldsOnCorrectTypeRuleWithoutSuggestions.Name)
		r.AddRule(rules.FieldsOnCorrectTypeRule.Name, rules.FieldsOnCorrectTypeRule.RuleFunc)
		return r
	}
	for _, swap := range [][2]core.Rule{
		{rules.FieldsOnCorrectTypeRule, rules.FieldsOnCorrectTypeRuleWithoutSuggestions},
		{rules.KnownArgumentNamesRule, rules.KnownArgumentNamesRuleWithoutSuggestions},
		{rules.KnownTypeNamesRule, rules.KnownTypeNamesRuleWithoutSuggestions},
		{rules.ValuesOfCorrectTypeRule, rules.ValuesOfCorrectTypeRuleWithoutSuggestions},
	} {
		r.RemoveRule(swap[0].Name)
		r.AddRule(swap[1].Name, swap[1].RuleFunc)
	}
	return r
}

// MutateOperationContext checks the validated operation a request runs. The depth of its
// fields, gqlgen's complexity (a walk of the whole selection, about 10 µs for a light question)
// and its root fields are measured once for an operation without variables (whose @skip and
// @include can only hold literals), and kept with its document.
func (q *queryLimits) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	op := opCtx.Operation
	m, keep, ok := q.cache.measured(ctx, opCtx.RawQuery, opCtx.Doc, op)
	if !ok {
		m.depth = queryDepth(opCtx.Doc, op.SelectionSet)
		if m.depth <= q.maxDepth {
			m.complexity = complexity.Calculate(ctx, q.es, op, opCtx.Variables)
		}
		if q.maxRootFields > 0 {
			m.rootFields = q.rootFields(opCtx)
		}
		keep(m)
	}
	if m.depth > q.maxDepth {
		return refusal("query depth %d exceeds LIMITS__MAX_QUERY_DEPTH=%d", m.depth, q.maxDepth)
	}
	if m.complexity > q.maxComplexity {
		return refusal("query complexity %d exceeds LIMITS__MAX_QUERY_COMPLEXITY=%d (a root field costs %d, any other field 1, each plus what it selects); split the query",
			m.complexity, q.maxComplexity, rootFieldComplexity)
	}
	if q.maxRootFields > 0 {
		if n := m.rootFields; n > q.maxRootFields {
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

// checkSize refuses a document whose parsing and validation could take long. Its operations
// together may select at most maxCost fields and fragment spreads, a fragment counted at each
// spread with all it selects, a repeated field each time (an unused fragment is counted as if
// spread once); a field or directive takes at most maxArguments arguments; and one field may be
// selected at most maxRepeats times in one place. A spread of a fragment that does not exist, or
// of one within itself, is the validation error that gqlgen's validator would report, and stops
// the check there.
//
// Each fragment is measured once (costWalker), its cost saturated just past maxCost, so the
// measure is linear in the document's length however the fragments multiply; the repeated
// fields are counted with the fragments expanded (repeatWalker), which takes at most about
// maxCost steps once the measure has passed.
func checkSize(doc *ast.QueryDocument, maxCost int) *gqlerror.Error {
	c := newCostWalker(doc, maxCost)
	total := 0
	for _, op := range doc.Operations {
		if err := checkDirectives(op.Directives); err != nil {
			return err
		}
		for _, v := range op.VariableDefinitions {
			if err := checkDirectives(v.Directives); err != nil {
				return err
			}
		}
		n, err := c.set(op.SelectionSet)
		if err != nil {
			return err
		}
		total = c.add(total, n)
	}
	for _, f := range doc.Fragments {
		var n int
		var err *gqlerror.Error
		switch _, measured := c.cost[f.Name]; {
		case c.defs[f.Name] != f: // another of the name, which validation refuses: walked all the same
			n, err = c.set(f.SelectionSet)
		case !measured:
			n, err = c.fragment(f)
		default:
			continue // spread by what was counted before
		}
		if err != nil {
			return err
		}
		total = c.add(total, n)
	}
	if total > maxCost {
		return refusal("query complexity exceeds LIMITS__MAX_QUERY_COMPLEXITY=%d: the query selects more than %[1]d fields and fragment spreads (a fragment counts at each spread, with all it selects; a repeated field each time); split the query",
			maxCost)
	}
	r := repeatWalker{defs: c.defs, used: map[string]bool{}}
	for _, op := range doc.Operations {
		if err := r.walk(op.SelectionSet, &pathNode{}); err != nil {
			return err
		}
	}
	for _, f := range doc.Fragments {
		if !r.used[f.Name] {
			r.used[f.Name] = true
			if err := r.walk(f.SelectionSet, &pathNode{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// costWalker measures selections: a field costs 1 plus what it selects, a fragment spread 1
// plus what the fragment selects, an inline fragment what it selects. Costs are saturated at
// max+1: past max the exact figure does not matter, and it cannot overflow.
type costWalker struct {
	max  int
	defs map[string]*ast.FragmentDefinition
	// cost holds each fragment measured; a fragment being measured is on stack (at the index
	// that onStack gives), not in cost.
	cost    map[string]int
	stack   []string
	onStack map[string]int
}

func newCostWalker(doc *ast.QueryDocument, max int) *costWalker {
	c := &costWalker{max: max, defs: make(map[string]*ast.FragmentDefinition, len(doc.Fragments)), cost: map[string]int{}, onStack: map[string]int{}}
	for _, f := range doc.Fragments {
		if c.defs[f.Name] == nil { // as gqlparser's ForName: the first of a name
			c.defs[f.Name] = f
		}
	}
	return c
}

func (c *costWalker) add(a, b int) int { return min(a+b, c.max+1) }

func (c *costWalker) set(set ast.SelectionSet) (int, *gqlerror.Error) {
	total := 0
	for _, sel := range set {
		var (
			n   int
			err *gqlerror.Error
		)
		switch s := sel.(type) {
		case *ast.Field:
			if len(s.Arguments) > maxArguments {
				name := s.Alias
				if name == "" {
					name = s.Name
				}
				return 0, refusal("field %q has %d arguments; a field takes at most %d arguments", name, len(s.Arguments), maxArguments)
			}
			if err = checkDirectives(s.Directives); err == nil {
				n, err = c.set(s.SelectionSet)
				n = c.add(n, 1)
			}
		case *ast.InlineFragment:
			if err = checkDirectives(s.Directives); err == nil {
				n, err = c.set(s.SelectionSet)
			}
		case *ast.FragmentSpread:
			if err = checkDirectives(s.Directives); err == nil {
				n, err = c.spread(s)
				n = c.add(n, 1)
			}
		}
		if err != nil {
			return 0, err
		}
		if total = c.add(total, n); total > c.max {
			return total, nil
		}
	}
	return total, nil
}

// spread is the cost of what a spread fragment selects: measured at its first spread, kept for
// the others.
func (c *costWalker) spread(s *ast.FragmentSpread) (int, *gqlerror.Error) {
	if n, ok := c.cost[s.Name]; ok {
		return n, nil
	}
	def := c.defs[s.Name]
	if def == nil {
		return 0, validationError(s.Position, `Unknown fragment "%s".`, s.Name)
	}
	if i, ok := c.onStack[s.Name]; ok {
		var via string
		if i+1 < len(c.stack) {
			via = ` via "` + strings.Join(c.stack[i+1:], `", "`) + `"`
		}
		return 0, validationError(s.Position, `Cannot spread fragment "%s" within itself%s.`, s.Name, via)
	}
	return c.fragment(def)
}

func (c *costWalker) fragment(def *ast.FragmentDefinition) (int, *gqlerror.Error) {
	if err := checkDirectives(def.Directives); err != nil {
		return 0, err
	}
	c.onStack[def.Name] = len(c.stack)
	c.stack = append(c.stack, def.Name)
	n, err := c.set(def.SelectionSet)
	c.stack = c.stack[:len(c.stack)-1]
	delete(c.onStack, def.Name)
	if err != nil {
		return 0, err
	}
	c.cost[def.Name] = n
	return n, nil
}

func checkDirectives(list ast.DirectiveList) *gqlerror.Error {
	for _, d := range list {
		if len(d.Arguments) > maxArguments {
			return refusal("directive @%s has %d arguments; a directive takes at most %d arguments", d.Name, len(d.Arguments), maxArguments)
		}
	}
	return nil
}

// validationError is an error of the document as gqlgen's validator reports it.
func validationError(pos *ast.Position, format string, args ...any) *gqlerror.Error {
	err := gqlerror.ErrorPosf(pos, format, args...)
	errcode.Set(err, errcode.ValidationFailed)
	return err
}

// repeatWalker counts how often each field is selected at each response path, fragments
// expanded at each spread. It runs on a document costWalker passed: every fragment exists, none
// spreads itself, and the expansion has at most max fields and spreads.
type repeatWalker struct {
	defs map[string]*ast.FragmentDefinition
	used map[string]bool // fragments spread so far
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

func (w *repeatWalker) walk(set ast.SelectionSet, at *pathNode) *gqlerror.Error {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
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
			w.used[s.Name] = true
			if err := w.walk(w.defs[s.Name].SelectionSet, at); err != nil {
				return err
			}
		}
	}
	return nil
}

// errorLimit is the gqlgen extension that bounds an answer's errors: every response passes
// through it, request errors (parse, validation, limits) and execution errors alike, on every
// endpoint. A document with a thousand unknown fields, or a field with thousands of unknown
// arguments, would otherwise be answered with an error each: megabytes for a small request.
type errorLimit struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.ResponseInterceptor
} = errorLimit{}

func (errorLimit) ExtensionName() string                   { return "ErrorLimit" }
func (errorLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (errorLimit) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp != nil {
		resp.Errors = limitErrors(resp.Errors)
	}
	return resp
}

// limitErrors keeps the first maxErrors errors of errs and replaces the rest with one that
// says how many there were, with the code of the first one left out.
func limitErrors(errs gqlerror.List) gqlerror.List {
	if len(errs) <= maxErrors {
		return errs
	}
	more := &gqlerror.Error{Message: fmt.Sprintf("%d more errors are not listed: an answer lists the first %d", len(errs)-maxErrors, maxErrors)}
	if code, ok := errs[maxErrors].Extensions["code"]; ok {
		more.Extensions = map[string]any{"code": code}
	}
	return append(errs[:maxErrors:maxErrors], more)
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
