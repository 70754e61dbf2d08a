package tests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
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
// compares a value of the market interface. (The market interface is the
// one with admit, next and watch methods; a market is a type that
// implements it.)
func TestNoCodeAsksWhichMarketARunIsOn(t *testing.T) {
	pkgs, err := packages.Load(&packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir: ".."}, "./workflows/...")
	if err != nil {
		t.Fatal(err)
	}
	var market *types.Interface
	var named []*types.Named // every named type of workflows/
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("loading %s: %v", p.PkgPath, e)
		}
		scope := p.Types.Scope()
		for _, n := range scope.Names() {
			tn, ok := scope.Lookup(n).(*types.TypeName)
			if !ok {
				continue
			}
			nt, ok := tn.Type().(*types.Named)
			if !ok {
				continue
			}
			named = append(named, nt)
			if it, ok := nt.Underlying().(*types.Interface); ok && hasMethods(it, "admit", "next", "watch") {
				market = it
			}
		}
	}
	if market == nil {
		t.Fatal("found no market interface (one with admit, next and watch) under workflows/")
	}
	markets := map[*types.TypeName]bool{}
	for _, nt := range named {
		if _, isIface := nt.Underlying().(*types.Interface); !isIface && (types.Implements(nt, market) || types.Implements(types.NewPointer(nt), market)) {
			markets[nt.Obj()] = true
		}
	}
	if len(markets) < 3 {
		t.Fatalf("found %d markets; want the wall clock, the pool's grant and the market clock at least", len(markets))
	}
	isMarket := func(info *types.Info, e ast.Expr) bool {
		tv, ok := info.Types[e]
		return ok && !tv.IsNil() && types.Identical(tv.Type.Underlying(), market)
	}
	for _, p := range pkgs {
		for _, f := range p.Syntax {
			inMethod := func(n ast.Node) bool {
				for _, d := range f.Decls {
					fn, ok := d.(*ast.FuncDecl)
					if !ok || fn.Recv == nil || fn.Pos() > n.Pos() || n.End() > fn.End() {
						continue
					}
					if obj, ok := p.TypesInfo.Defs[fn.Name].(*types.Func); ok {
						recv := obj.Type().(*types.Signature).Recv().Type()
						if ptr, isPtr := recv.(*types.Pointer); isPtr {
							recv = ptr.Elem()
						}
						if nt, isNamed := recv.(*types.Named); isNamed && markets[nt.Obj()] {
							return true
						}
					}
				}
				return false
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var asked string
				switch n := n.(type) {
				case *ast.TypeAssertExpr:
					if isMarket(p.TypesInfo, n.X) {
						asked = "asserts a market's type"
					}
				case *ast.BinaryExpr:
					if (n.Op == token.EQL || n.Op == token.NEQ) && (isMarket(p.TypesInfo, n.X) && !isNil(n.Y) || isMarket(p.TypesInfo, n.Y) && !isNil(n.X)) {
						asked = "compares markets"
					}
				}
				if asked != "" && !inMethod(n) {
					t.Errorf("%s %s: ask the market instead (a method of the market interface)", p.Fset.Position(n.Pos()), asked)
				}
				return true
			})
		}
	}
}

// hasMethods reports whether it has methods of every name given, in any
// case (a method is exported once its type is shared by packages).
func hasMethods(it *types.Interface, names ...string) bool {
	for _, n := range names {
		found := false
		for i := 0; i < it.NumMethods(); i++ {
			found = found || strings.EqualFold(it.Method(i).Name(), n)
		}
		if !found {
			return false
		}
	}
	return true
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
			if !ok || fn.Name.Name == "UnmarshalJSON" || fn.Recv != nil && strings.EqualFold(typeName(fn.Recv.List[0].Type), "recovery") {
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
