package entrypoint_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestNoCopiesOfTheWireTypes: berth-init reads and writes the gateway's
// JSON through package api's types, never a struct of its own with the
// same fields, so a field renamed on one side is renamed on the other. A
// struct here whose JSON fields (two or more) are all fields of one api
// type is such a copy.
func TestNoCopiesOfTheWireTypes(t *testing.T) {
	wire := map[string][]string{} // api type → its JSON fields
	for name, fields := range structs(t, filepath.Join("..", "api", "api.go")) {
		wire[name] = fields
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for name, fields := range structs(t, f) {
			if len(fields) < 2 {
				continue
			}
			for apiName, apiFields := range wire {
				if !slices.ContainsFunc(fields, func(f string) bool { return !slices.Contains(apiFields, f) }) {
					t.Errorf("%s: %s has the JSON fields %v of api.%s: use api.%s", f, name, fields, apiName, apiName)
				}
			}
		}
	}
}

// structs returns the JSON field names of every struct type in a file,
// named and anonymous, by where it is: a field's tag names it, an
// untagged one is its name as encoding/json matches it (any case).
func structs(t *testing.T, path string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		st, ok := n.(*ast.StructType)
		if !ok {
			return true
		}
		var fields []string
		for _, field := range st.Fields.List {
			tag := ""
			if field.Tag != nil {
				v, _ := strconv.Unquote(field.Tag.Value)
				tag, _, _ = strings.Cut(reflect.StructTag(v).Get("json"), ",")
			}
			for _, id := range field.Names {
				switch {
				case tag == "-":
				case tag != "":
					fields = append(fields, tag)
				default:
					fields = append(fields, strings.ToLower(id.Name))
				}
			}
		}
		out[fset.Position(st.Pos()).String()] = fields
		return true
	})
	// Name the api file's types by their type names.
	named := map[string][]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range g.Specs {
			if ts, ok := spec.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					named[ts.Name.Name] = out[fset.Position(st.Pos()).String()]
					delete(out, fset.Position(st.Pos()).String())
				}
			}
		}
	}
	for k, v := range out {
		named[k] = v
	}
	return named
}
