package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// workflowsFiles lists the Go files under workflows/ whose base name
// matches pattern.
func workflowsFiles(t *testing.T, pattern string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir("../workflows", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ok, _ := filepath.Match(pattern, d.Name()); ok {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changeIDs reads every versions.go under workflows/: each change ID's
// constant name, its value and its doc comment.
func changeIDs(t *testing.T) map[string]struct{ id, doc string } {
	t.Helper()
	out := map[string]struct{ id, doc string }{}
	for _, path := range workflowsFiles(t, "versions.go") {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		changeIDsOf(t, f, out)
	}
	if len(out) == 0 {
		t.Fatal("no versions.go under workflows/ declares a change ID")
	}
	return out
}

func changeIDsOf(t *testing.T, f *ast.File, out map[string]struct{ id, doc string }) {
	t.Helper()
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Fatalf("versions.go: %s is not a string literal", vs.Names[0].Name)
			}
			id, _ := strconv.Unquote(lit.Value)
			out[vs.Names[0].Name] = struct{ id, doc string }{id, vs.Doc.Text()}
		}
	}
}

// markers lists the change IDs of a recorded history's version markers.
func markers(t *testing.T, path string) map[string]bool {
	t.Helper()
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, e := range h.GetEvents() {
		if e.GetEventType() != enums.EVENT_TYPE_MARKER_RECORDED {
			continue
		}
		m := e.GetMarkerRecordedEventAttributes()
		if m.GetMarkerName() != "Version" {
			continue
		}
		var id string
		if err := converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &id); err != nil {
			t.Fatalf("%s: a version marker's change ID: %v", path, err)
		}
		ids[id] = true
	}
	return ids
}

// Every change ID names, in its comment in a versions.go under workflows/, the
// recorded histories that guard it, and each of them holds its marker;
// one no recorded history reaches names a unit test of workflows/ that
// exists.
func TestChangeIDsNameTheHistoriesThatGuardThem(t *testing.T) {
	histories := regexp.MustCompile(`[a-z0-9-]+\.json`)
	unitTest := regexp.MustCompile(`\bTest[A-Za-z0-9_]+`)
	unitTests := ""
	for _, f := range workflowsFiles(t, "*_test.go") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		unitTests += string(b)
	}
	for name, c := range changeIDs(t) {
		hs := histories.FindAllString(c.doc, -1)
		tests := unitTest.FindAllString(c.doc, -1)
		if len(hs) == 0 && len(tests) == 0 {
			t.Errorf("%s (%q) names no recorded history and no unit test that guards it", name, c.id)
		}
		for _, h := range hs {
			if !markers(t, filepath.Join("testdata/histories", h))[c.id] {
				t.Errorf("%s: %s holds no marker of change ID %q", name, h, c.id)
			}
		}
		for _, fn := range tests {
			if !strings.Contains(unitTests, "func "+fn+"(") {
				t.Errorf("%s: no unit test %s in workflows/", name, fn)
			}
		}
	}
}

// Every workflow.GetVersion call in workflows/ passes a constant declared
// in versions.go, and every constant there is used.
func TestEveryGetVersionTakesAListedChangeID(t *testing.T) {
	listed := changeIDs(t)
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range workflowsFiles(t, "*.go") {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "GetVersion" {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "workflow" || len(call.Args) < 2 {
				return true
			}
			id, ok := call.Args[1].(*ast.Ident)
			if sel, isSel := call.Args[1].(*ast.SelectorExpr); isSel {
				id, ok = sel.Sel, true // a change ID of another package of workflows/
			}
			if !ok || listed[id.Name].id == "" {
				t.Errorf("%s: workflow.GetVersion takes %s; want a change ID declared in a versions.go under workflows/", fset.Position(call.Pos()), exprString(call.Args[1]))
				return true
			}
			used[id.Name] = true
			return true
		})
	}
	for name := range listed {
		if !used[name] {
			t.Errorf("versions.go: %s is passed to no workflow.GetVersion", name)
		}
	}
}

func exprString(e ast.Expr) string {
	if lit, ok := e.(*ast.BasicLit); ok {
		return lit.Value
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "an expression"
}
