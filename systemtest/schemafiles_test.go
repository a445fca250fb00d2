package systemtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// schemaFiles are the SDL files of make generate (cmd/graphqlschema), by endpoint.
var schemaFiles = []struct{ path, file string }{
	{"/graphql", "public.graphql"},
	{"/serve/graphql", "serve.graphql"},
	{"/lookups/graphql", "lookups.graphql"},
}

// TestSchemaFilesMatchIntrospection: each file under schema/graphql/ describes exactly what its
// endpoint's introspection gives over HTTP from the real binary: the root types, every type
// with its kind and description, every field with its type, arguments (types and defaults) and
// deprecation, every enum value and input field, interfaces, union members and the directives
// the schema declares. A client generated from the file asks nothing the endpoint refuses.
func TestSchemaFilesMatchIntrospection(t *testing.T) {
	t.Parallel()
	query, err := os.ReadFile("../platform/gqlexec/testdata/introspection.graphql") // graphql-js 16's introspection query, kept once
	if err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Start(t, servicetest.NewDB(t), nil)
	for _, f := range schemaFiles {
		name := filepath.Join("..", "schema", "graphql", f.file)
		sdl, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v (run make generate)", f.path, err)
		}
		parsed, gerr := gqlparser.LoadSchema(&ast.Source{Name: name, Input: string(sdl)})
		if gerr != nil {
			t.Fatalf("%s: %v", name, gerr)
		}
		var d struct {
			Schema introspected `json:"__schema"`
		}
		svc.GraphQL(t, f.path, string(query), nil).DataInto(t, &d)
		fromFile, fromEndpoint := describeSDL(parsed), describeIntrospection(d.Schema, builtinDirectives(parsed))
		// An answer that decodes to nothing would match an empty file.
		if !slices.ContainsFunc(fromEndpoint, func(l string) bool { return strings.HasPrefix(l, "field Query.") }) {
			t.Fatalf("%s: the introspection has no Query field:\n%s", f.path, strings.Join(fromEndpoint, "\n"))
		}
		missing, extra := difference(fromEndpoint, fromFile), difference(fromFile, fromEndpoint)
		if len(missing) > 0 || len(extra) > 0 {
			t.Errorf("%s differs from %s's introspection (run make generate)\nonly in the introspection:\n  %s\nonly in the file:\n  %s",
				name, f.path, strings.Join(missing, "\n  "), strings.Join(extra, "\n  "))
		}
	}
}

// introspected is the part of an introspection answer the comparison reads.
type introspected struct {
	QueryType        *struct{ Name string } `json:"queryType"`
	MutationType     *struct{ Name string } `json:"mutationType"`
	SubscriptionType *struct{ Name string } `json:"subscriptionType"`
	Types            []struct {
		Kind        string
		Name        string
		Description *string
		Fields      []struct {
			Name              string
			Description       *string
			Args              []introspectedInput
			Type              introspectedRef
			IsDeprecated      bool
			DeprecationReason *string
		}
		InputFields []introspectedInput
		Interfaces  []introspectedRef
		EnumValues  []struct {
			Name              string
			Description       *string
			IsDeprecated      bool
			DeprecationReason *string
		}
		PossibleTypes []introspectedRef
	}
	Directives []struct {
		Name         string
		Description  *string
		IsRepeatable bool
		Locations    []string
		Args         []introspectedInput
	}
}

type introspectedInput struct {
	Name              string
	Description       *string
	Type              introspectedRef
	DefaultValue      *string
	IsDeprecated      bool
	DeprecationReason *string
}

type introspectedRef struct {
	Kind   string
	Name   *string
	OfType *introspectedRef
}

// String is the reference in SDL form: [String!]!.
func (r introspectedRef) String() string {
	switch {
	case r.Kind == "NON_NULL" && r.OfType != nil:
		return r.OfType.String() + "!"
	case r.Kind == "LIST" && r.OfType != nil:
		return "[" + r.OfType.String() + "]"
	case r.Name != nil:
		return *r.Name
	}
	return "?"
}

// standardScalars are the scalars every schema has; neither side lists them.
var standardScalars = []string{"String", "Int", "Float", "Boolean", "ID"}

func skipType(name string) bool {
	return strings.HasPrefix(name, "__") || slices.Contains(standardScalars, name)
}

// builtinDirectives are the directives gqlparser's prelude declares (deprecated, include, ...),
// which the introspection lists and the file, like any SDL, leaves implied.
func builtinDirectives(s *ast.Schema) map[string]bool {
	out := map[string]bool{}
	for name, d := range s.Directives {
		if d.Position != nil && d.Position.Src != nil && d.Position.Src.BuiltIn {
			out[name] = true
		}
	}
	return out
}

func desc(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func deprecation(is bool, reason *string) string {
	if !is {
		return "not deprecated"
	}
	return fmt.Sprintf("deprecated %q", desc(reason))
}

func inputLine(prefix string, v introspectedInput) string {
	def := "no default"
	if v.DefaultValue != nil {
		def = "default " + *v.DefaultValue
	}
	return fmt.Sprintf("%s: %s, %s, %s, %q", prefix, v.Type, def, deprecation(v.IsDeprecated, v.DeprecationReason), desc(v.Description))
}

// describeIntrospection is the introspection as sorted lines, one per type, field, argument,
// input field, enum value, interface, union member and declared directive.
func describeIntrospection(s introspected, builtin map[string]bool) []string {
	var out []string
	root := func(op string, ref *struct{ Name string }) {
		if ref != nil {
			out = append(out, fmt.Sprintf("schema %s: %s", op, ref.Name))
		}
	}
	root("query", s.QueryType)
	root("mutation", s.MutationType)
	root("subscription", s.SubscriptionType)
	for _, ty := range s.Types {
		if skipType(ty.Name) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %q", ty.Kind, ty.Name, desc(ty.Description)))
		for _, f := range ty.Fields {
			out = append(out, fmt.Sprintf("field %s.%s: %s, %s, %q", ty.Name, f.Name, f.Type, deprecation(f.IsDeprecated, f.DeprecationReason), desc(f.Description)))
			for _, a := range f.Args {
				out = append(out, inputLine(fmt.Sprintf("argument %s.%s(%s)", ty.Name, f.Name, a.Name), a))
			}
		}
		for _, f := range ty.InputFields {
			out = append(out, inputLine(fmt.Sprintf("input field %s.%s", ty.Name, f.Name), f))
		}
		for _, v := range ty.EnumValues {
			out = append(out, fmt.Sprintf("enum value %s.%s, %s, %q", ty.Name, v.Name, deprecation(v.IsDeprecated, v.DeprecationReason), desc(v.Description)))
		}
		for _, i := range ty.Interfaces {
			out = append(out, fmt.Sprintf("%s implements %s", ty.Name, i))
		}
		for _, p := range ty.PossibleTypes {
			out = append(out, fmt.Sprintf("%s has possible type %s", ty.Name, p))
		}
	}
	for _, d := range s.Directives {
		if builtin[d.Name] {
			continue
		}
		out = append(out, fmt.Sprintf("directive @%s on %s, repeatable %t, %q", d.Name, strings.Join(d.Locations, "|"), d.IsRepeatable, desc(d.Description)))
		for _, a := range d.Args {
			out = append(out, inputLine(fmt.Sprintf("argument @%s(%s)", d.Name, a.Name), a))
		}
	}
	slices.Sort(out)
	return out
}

// describeSDL is describeIntrospection's lines for a schema parsed from SDL, written as
// introspection would give them.
func describeSDL(s *ast.Schema) []string {
	var out []string
	for op, def := range map[string]*ast.Definition{"query": s.Query, "mutation": s.Mutation, "subscription": s.Subscription} {
		if def != nil {
			out = append(out, fmt.Sprintf("schema %s: %s", op, def.Name))
		}
	}
	deprecated := func(dirs ast.DirectiveList) (bool, *string) {
		d := dirs.ForName("deprecated")
		if d == nil {
			return false, nil
		}
		reason := "No longer supported" // the default of @deprecated(reason:)
		if a := d.Arguments.ForName("reason"); a != nil {
			reason = a.Value.Raw
		}
		return true, &reason
	}
	input := func(prefix string, a *ast.ArgumentDefinition) string {
		v := introspectedInput{Name: a.Name, Description: &a.Description, Type: refOf(a.Type)}
		if a.DefaultValue != nil {
			def := a.DefaultValue.String()
			v.DefaultValue = &def
		}
		v.IsDeprecated, v.DeprecationReason = deprecated(a.Directives)
		return inputLine(prefix, v)
	}
	for _, ty := range s.Types {
		if skipType(ty.Name) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %q", ty.Kind, ty.Name, ty.Description))
		for _, f := range ty.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue // __typename and the introspection fields, which no type lists
			}
			switch ty.Kind {
			case ast.InputObject:
				out = append(out, input(fmt.Sprintf("input field %s.%s", ty.Name, f.Name),
					&ast.ArgumentDefinition{Name: f.Name, Description: f.Description, Type: f.Type, DefaultValue: f.DefaultValue, Directives: f.Directives}))
				continue
			}
			is, reason := deprecated(f.Directives)
			out = append(out, fmt.Sprintf("field %s.%s: %s, %s, %q", ty.Name, f.Name, f.Type, deprecation(is, reason), f.Description))
			for _, a := range f.Arguments {
				out = append(out, input(fmt.Sprintf("argument %s.%s(%s)", ty.Name, f.Name, a.Name), a))
			}
		}
		for _, v := range ty.EnumValues {
			is, reason := deprecated(v.Directives)
			out = append(out, fmt.Sprintf("enum value %s.%s, %s, %q", ty.Name, v.Name, deprecation(is, reason), v.Description))
		}
		for _, i := range ty.Interfaces {
			out = append(out, fmt.Sprintf("%s implements %s", ty.Name, i))
		}
		if ty.Kind == ast.Union || ty.Kind == ast.Interface {
			for _, p := range s.GetPossibleTypes(ty) {
				out = append(out, fmt.Sprintf("%s has possible type %s", ty.Name, p.Name))
			}
		}
	}
	for name, d := range s.Directives {
		if d.Position != nil && d.Position.Src != nil && d.Position.Src.BuiltIn {
			continue
		}
		locs := make([]string, len(d.Locations))
		for i, l := range d.Locations {
			locs[i] = string(l)
		}
		out = append(out, fmt.Sprintf("directive @%s on %s, repeatable %t, %q", name, strings.Join(locs, "|"), d.IsRepeatable, d.Description))
		for _, a := range d.Arguments {
			out = append(out, input(fmt.Sprintf("argument @%s(%s)", name, a.Name), a))
		}
	}
	slices.Sort(out)
	return out
}

// refOf is an SDL type as an introspection reference.
func refOf(t *ast.Type) introspectedRef {
	switch {
	case t.NonNull:
		inner := *t
		inner.NonNull = false
		r := refOf(&inner)
		return introspectedRef{Kind: "NON_NULL", OfType: &r}
	case t.Elem != nil:
		r := refOf(t.Elem)
		return introspectedRef{Kind: "LIST", OfType: &r}
	}
	name := t.NamedType
	return introspectedRef{Name: &name}
}

// difference is the lines of a that b lacks, both sorted.
func difference(a, b []string) []string {
	var out []string
	for _, l := range a {
		if _, found := slices.BinarySearch(b, l); !found {
			out = append(out, l)
		}
	}
	return out
}
