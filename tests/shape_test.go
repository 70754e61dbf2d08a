package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// workflowFiles parses every non-test Go file under workflows/.
func workflowFiles(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir("../workflows", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		files[path] = f
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fset, files
}

// A run asks its market, never which market it is on: every question
// that depends on the market is a method of the market interface, and
// no code outside a market's own methods asserts, switches on or
// compares a market's type. (A market is a type with the interface's
// admit, next and watch methods.)
func TestNoCodeAsksWhichMarketARunIsOn(t *testing.T) {
	fset, files := workflowFiles(t)
	methods := map[string]map[string]bool{} // receiver type → method names
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			recv := typeName(fn.Recv.List[0].Type)
			if methods[recv] == nil {
				methods[recv] = map[string]bool{}
			}
			methods[recv][fn.Name.Name] = true
		}
	}
	markets := map[string]bool{}
	for typ, m := range methods {
		if m["admit"] && m["next"] && m["watch"] {
			markets[typ] = true
		}
	}
	if len(markets) < 3 {
		t.Fatalf("found markets %v; want the wall clock, the pool's grant and the market clock at least", markets)
	}
	for _, f := range files {
		inMethod := func(n ast.Node) bool {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if ok && fn.Recv != nil && markets[typeName(fn.Recv.List[0].Type)] && fn.Pos() <= n.Pos() && n.End() <= fn.End() {
					return true
				}
			}
			return false
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var asked string
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				if n.Type != nil && (markets[typeName(n.Type)] || isMarketField(n.X)) {
					asked = "asserts a market's type"
				}
			case *ast.TypeSwitchStmt:
				ast.Inspect(n.Assign, func(m ast.Node) bool {
					if ta, ok := m.(*ast.TypeAssertExpr); ok && isMarketField(ta.X) {
						asked = "switches on a market's type"
					}
					return true
				})
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (isMarketField(n.X) || isMarketField(n.Y)) {
					if !isNil(n.X) && !isNil(n.Y) {
						asked = "compares markets"
					}
				}
			}
			if asked != "" && !inMethod(n) {
				t.Errorf("%s %s: ask the market instead (a method of the market interface)", fset.Position(n.Pos()), asked)
			}
			return true
		})
	}
}

// typeName is the name of a type expression, without a pointer.
func typeName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// isMarketField reports whether e is a field named market (r.market).
func isMarketField(e ast.Expr) bool {
	s, ok := e.(*ast.SelectorExpr)
	return ok && s.Sel.Name == "market"
}

func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "nil"
}

// A recovery is written once: only its own methods open, name and close
// it (Holding.Recovery, Record.LastRecovery). Decoding a state carried by
// an older run (an UnmarshalJSON) is not a write of the run's.
func TestOnlyTheRecoveryWritesRecoveries(t *testing.T) {
	fset, files := workflowFiles(t)
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name == "UnmarshalJSON" || fn.Recv != nil && typeName(fn.Recv.List[0].Type) == "recovery" {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				a, ok := n.(*ast.AssignStmt)
				if !ok {
					return true
				}
				for _, lhs := range a.Lhs {
					if s, ok := lhs.(*ast.SelectorExpr); ok && (s.Sel.Name == "Recovery" || s.Sel.Name == "LastRecovery") {
						t.Errorf("%s: %s writes %s; only the recovery's methods do (recovery.go)", fset.Position(a.Pos()), fn.Name.Name, s.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
