package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// dataTables are functions that are long only because they hold a table
// of data (module-relative file, function name).
var dataTables = map[string]bool{
	"pkgbase/demobase/packages.go packages": true,
}

// TestFunctionSize: no function (or function literal) is longer than 120
// lines, data tables aside, and none takes more than 8 parameters: past
// that, a type with a name says more.
func TestFunctionSize(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range goList(t) {
		from := rel(p.ImportPath)
		if from == "internal/xzdec" {
			continue // xz-utils' C sources and their cgo glue
		}
		for _, name := range append(append([]string{}, p.GoFiles...), p.CgoFiles...) {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var typ *ast.FuncType
				var body *ast.BlockStmt
				fn := "func literal"
				switch x := n.(type) {
				case *ast.FuncDecl:
					typ, body, fn = x.Type, x.Body, x.Name.Name
				case *ast.FuncLit:
					typ, body = x.Type, x.Body
				default:
					return true
				}
				params := 0
				for _, fl := range typ.Params.List {
					params += max(len(fl.Names), 1)
				}
				pos := fset.Position(n.Pos())
				if params > 8 {
					t.Errorf("%s: %s takes %d parameters (at most 8)", pos, fn, params)
				}
				if body != nil {
					lines := fset.Position(body.End()).Line - pos.Line + 1
					if lines > 120 && !dataTables[filepath.ToSlash(filepath.Join(from, name))+" "+fn] {
						t.Errorf("%s: %s is %d lines long (at most 120)", pos, fn, lines)
					}
				}
				return true
			})
		}
	}
}
