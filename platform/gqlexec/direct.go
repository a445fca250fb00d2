package gqlexec

import (
	"bytes"
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/emsanalytics/emsquery/platform/gqlfield"
)

// Direct resolution. A request that asks for one list root field alone, without arguments
// (`{ station_resources { ... } }`: a dashboard's usual question), is resolved without gqlgen's
// executor: its resolver is called through the operation's own root field and field middleware
// (rc.RootResolverMiddleware, rc.ResolverMiddleware: the direct JSON, the small-cell check),
// inside the same response interceptors (span, metrics, error bound), and its JSON goes into
// the answer as gqlgen's would. The executor's own work around one field (its field set, its
// contexts and closures, the marshaling of a placeholder) was about a third of what the service
// adds to a light question.
//
// Only the outcome gqlgen would have answered without a word of its own takes this way: the
// resolver returned its list and the list's JSON is in its place. Any other outcome (an error,
// a panic, a null, a value written by gqlgen, an error a middleware added) is answered by
// gqlgen's generated execution, to which the resolver's outcome is given back (replay) instead
// of calling it again: the answer, its errors and their paths are gqlgen's, byte for byte.

// DirectField calls a root Query field's resolver as gqlgen's generated code calls it for the
// field asked without arguments (each optional argument nil).
type DirectField func(ctx context.Context) (any, error)

// DirectFields are the root fields of an endpoint that may be resolved directly, by name: the
// lists whose resolvers answer with gqlfield.List.
type DirectFields map[string]DirectField

// DirectSchema is an executable schema that names its DirectFields: an endpoint's package
// builds it from its resolvers.
type DirectSchema interface {
	graphql.ExecutableSchema
	DirectFields() DirectFields
}

// checkDirect returns fields after checking each against schema: a Query field whose arguments
// are all optional without a default, so that calling its resolver without arguments is what
// gqlgen does for the field asked without them. Anything else is a programming error.
func checkDirect(fields DirectFields, schema *ast.Schema) DirectFields {
	for name := range fields {
		var def *ast.FieldDefinition
		if schema.Query != nil {
			def = schema.Query.Fields.ForName(name)
		}
		if def == nil {
			panic(fmt.Sprintf("gqlexec: direct field %q is not a Query field of the schema", name))
		}
		for _, arg := range def.Arguments {
			if arg.Type.NonNull || arg.DefaultValue != nil {
				panic(fmt.Sprintf("gqlexec: direct field %q has argument %q that gqlgen would fill", name, arg.Name))
			}
		}
	}
	return fields
}

// directField is the field of rc that may be resolved directly, and its resolver; nil when
// the request is not of that shape: a query whose one selection is a field of DirectFields,
// without arguments or directives (a live answer's runs keep gqlgen's way).
func (x *Executor) directField(r *Request, rc *graphql.OperationContext) (*ast.Field, DirectField) {
	if len(x.direct) == 0 || r.Live {
		return nil, nil
	}
	op := rc.Operation
	if op == nil || op.Operation != ast.Query || len(op.Directives) > 0 || len(op.SelectionSet) != 1 {
		return nil, nil
	}
	f, ok := op.SelectionSet[0].(*ast.Field)
	if !ok || len(f.Arguments) > 0 || len(f.Directives) > 0 || f.Definition == nil {
		return nil, nil
	}
	resolve := x.direct[f.Name]
	if resolve == nil {
		return nil, nil
	}
	return f, resolve
}

// executeDirect answers rc, whose one field is f, by f's resolver resolve (see above): as
// gqlgen's DispatchOperation and response handler would, interceptors included.
func (x *Executor) executeDirect(ctx context.Context, rc *graphql.OperationContext, f *ast.Field, resolve DirectField) *graphql.Response {
	ctx = graphql.WithOperationContext(ctx, rc)
	if ctx.Err() != nil {
		return nil // as gqlgen's response handler: nobody waits for the answer
	}
	ctx = graphql.WithResponseContext(ctx, x.presenter, x.recover)
	return x.intercept(ctx, func(ctx context.Context) *graphql.Response {
		resp, replay := x.resolveDirect(ctx, rc, f, resolve)
		if resp == nil {
			resp = x.replay(withReplay(ctx, replay))
			if resp == nil {
				return nil
			}
		}
		resp.Errors = append(resp.Errors, graphql.GetErrors(ctx)...)
		resp.Extensions = graphql.GetExtensions(ctx)
		return resp
	})
}

// intercept runs next within the response interceptors, in the order gqlgen's executor runs
// them (the first used is the outermost).
func (x *Executor) intercept(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	for i := len(x.responders) - 1; i > 0; i-- {
		inner, ri := next, x.responders[i]
		next = func(ctx context.Context) *graphql.Response { return ri.InterceptResponse(ctx, inner) }
	}
	return x.responders[0].InterceptResponse(ctx, next)
}

// replay is gqlgen's generated execution of the operation in ctx (as DispatchOperation runs
// it), its root field's resolver outcome given back by replayed when ctx holds one.
func (x *Executor) replay(ctx context.Context) *graphql.Response {
	tmp := graphql.WithResponseContext(ctx, x.presenter, x.recover)
	responses := x.es.Exec(tmp)
	if errs := graphql.GetErrors(tmp); errs != nil {
		return &graphql.Response{Errors: errs}
	}
	return responses(ctx)
}

// outcome is what a root field's resolver did in a direct resolution that gqlgen then answers.
type outcome struct {
	field *ast.Field
	// called: the resolver ran, returning res and err, or panicking with p (panicked).
	called, panicked bool
	res              any
	err              error
	p                any
}

type replayKey struct{}

func withReplay(ctx context.Context, o *outcome) context.Context {
	if o == nil {
		return ctx
	}
	return context.WithValue(ctx, replayKey{}, o)
}

// replayed is the innermost field middleware: for the root field of a replayed direct
// resolution, it gives back the resolver's outcome (once) instead of calling it again.
func replayed(ctx context.Context, next graphql.Resolver) (any, error) {
	o, _ := ctx.Value(replayKey{}).(*outcome)
	if o == nil || !o.called {
		return next(ctx)
	}
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Object != "Query" || fc.Field.Field != o.field {
		return next(ctx)
	}
	o.called = false
	if o.panicked {
		panic(o.p)
	}
	return o.res, o.err
}

// resolveDirect calls f's resolver through the operation's root field and field middleware, as
// gqlgen's generated code does for a root field (its contexts, parent field context included).
// It returns the response when the resolver filled the field's place without any error, and
// otherwise what replay needs to give gqlgen (nil: nothing to give back, gqlgen calls the
// resolver itself).
func (x *Executor) resolveDirect(ctx context.Context, rc *graphql.OperationContext, f *ast.Field, resolve DirectField) (resp *graphql.Response, replay *outcome) {
	field := graphql.CollectedField{Field: f, Selections: f.SelectionSet}
	// Errors and extensions of this attempt are its own: when gqlgen answers after all, they
	// are not counted twice.
	attempt := graphql.WithResponseContext(ctx, x.presenter, x.recover)
	attempt = graphql.WithFieldContext(attempt, &graphql.FieldContext{Object: "Query"})
	attempt = graphql.WithRootFieldContext(attempt, &graphql.RootFieldContext{Object: f.Name, Field: field})
	o := &outcome{field: f}
	var (
		place    *gqlfield.Place
		resolved graphql.Marshaler
	)
	func() {
		inResolver := false
		defer func() {
			if p := recover(); p != nil {
				if inResolver {
					o.called, o.panicked, o.p = true, true, p
					replay = o
				}
				resolved = nil
			}
		}()
		resolved = rc.RootResolverMiddleware(attempt, func(ctx context.Context) graphql.Marshaler {
			place = gqlfield.PlaceOf(ctx)
			fc := &graphql.FieldContext{Object: "Query", Field: field, IsMethod: true, IsResolver: true}
			ctx = graphql.WithFieldContext(ctx, fc)
			o.res, o.err = rc.ResolverMiddleware(ctx, func(ctx context.Context) (any, error) {
				inResolver = true
				res, err := resolve(ctx)
				inResolver = false
				o.called = true
				return res, err
			})
			fc.Result = o.res
			return graphql.Null
		})
	}()
	if resolved == nil || o.panicked {
		return nil, replay
	}
	filled := place != nil && place.Filled()
	if !filled || o.err != nil || o.res == nil { // gqlgen's own test for a null
		return nil, o // gqlgen answers with what the resolver returned
	}
	if len(graphql.GetErrors(attempt)) > 0 || len(graphql.GetExtensions(attempt)) > 0 {
		return nil, nil // gqlgen answers, calling the resolver again
	}
	// The data as gqlgen's field set writes it; the root field middleware's marshaler notes
	// the field's JSON at its place in buf (answer.place).
	var buf bytes.Buffer
	buf.WriteByte('{')
	graphql.MarshalString(f.Alias).MarshalGQL(&buf)
	buf.WriteByte(':')
	resolved.MarshalGQL(&buf)
	buf.WriteByte('}')
	return &graphql.Response{Data: buf.Bytes()}, nil
}
