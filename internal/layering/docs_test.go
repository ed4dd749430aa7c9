package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// architecture is docs/architecture.md, which these tests hold to the code.
func architecture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goNames is every name a package declares (in its test files too):
// "Name" for what is declared at the top, "Type.Name" for the fields and
// methods of a type.
type goNames map[string]bool

// moduleNames parses every package of the module, by module-relative path.
func moduleNames(t *testing.T) map[string]goNames {
	t.Helper()
	out := map[string]goNames{}
	fset := token.NewFileSet()
	for _, p := range goList(t) {
		names := goNames{}
		files, err := filepath.Glob(filepath.Join(p.Dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			addNames(names, f)
		}
		out[rel(p.ImportPath)] = names
	}
	return out
}

func addNames(names goNames, f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names[d.Name.Name] = true
				continue
			}
			recv := d.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			if ix, ok := recv.(*ast.IndexExpr); ok {
				recv = ix.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				names[id.Name+"."+d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
					addMembers(names, s.Name.Name, s.Type)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
}

// addMembers adds the fields of a struct type (embedded ones by their
// type's name) and the methods of an interface type.
func addMembers(names goNames, typ string, x ast.Expr) {
	var fields *ast.FieldList
	switch x := x.(type) {
	case *ast.StructType:
		fields = x.Fields
	case *ast.InterfaceType:
		fields = x.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			names[typ+"."+n.Name] = true
		}
		if len(f.Names) == 0 {
			e := f.Type
			if s, ok := e.(*ast.StarExpr); ok {
				e = s.X
			}
			if sel, ok := e.(*ast.SelectorExpr); ok {
				names[typ+"."+sel.Sel.Name] = true
			} else if id, ok := e.(*ast.Ident); ok {
				names[typ+"."+id.Name] = true
			}
		}
	}
}

// externalPackages are the packages of other modules (and of Go) that
// architecture.md cites by name: their identifiers are not ours to check.
var externalPackages = []string{"v1", "in_toto", "os", "fmt", "log", "http", "json", "sha256", "io", "exec", "time", "tls", "zstd", "xz", "gzip", "remote", "crypto", "rand", "debug", "cobra", "protojson", "openpgp", "crypto11", "errgroup", "mutate", "layout", "tarball", "empty", "partial", "static", "types", "name", "authn", "cosign", "tar", "sync", "filepath", "context", "runtime", "bufio", "bytes", "strings", "sort", "slices", "maps", "testing", "flag", "errors", "lzma", "x509", "pkcs7", "packet", "httputil"}

// goIdent is what architecture.md writes for a Go identifier of ours, in
// backticks: pkg.Name or pkg.Type.Member, pkg being a package's name or
// its module-relative path (attest/signing.Statement).
var goIdent = regexp.MustCompile("`((?:[a-z][a-z0-9]*/)*[a-z_][a-z0-9_]*)\\.([A-Z][A-Za-z0-9_]*(?:\\.[A-Z][A-Za-z0-9_]*)?)(?:\\(\\))?`")

// TestArchitectureIdentifiers: every Go identifier docs/architecture.md
// cites in backticks is declared in the package it names, so that the
// text cannot go on naming what was renamed or removed.
func TestArchitectureIdentifiers(t *testing.T) {
	doc := architecture(t)
	names := moduleNames(t)
	byName := map[string][]string{} // package name -> paths (commands aside)
	for _, p := range goList(t) {
		if p.Name != "main" {
			byName[p.Name] = append(byName[p.Name], rel(p.ImportPath))
		}
	}
	checked := 0
	for _, m := range goIdent.FindAllStringSubmatch(doc, -1) {
		pkgRef, ident := m[1], m[2]
		candidates := byName[pkgRef]
		if strings.Contains(pkgRef, "/") {
			candidates = nil
			if _, ok := names[pkgRef]; ok {
				candidates = []string{pkgRef}
			}
		}
		if len(candidates) == 0 {
			if !strings.Contains(pkgRef, "/") && slices.Contains(externalPackages, pkgRef) {
				continue
			}
			t.Errorf("architecture.md cites %s.%s: no package %q in the module (nor a listed outside package)", pkgRef, ident, pkgRef)
			continue
		}
		checked++
		if !slices.ContainsFunc(candidates, func(p string) bool { return names[p][ident] }) {
			t.Errorf("architecture.md cites %s.%s: %s declares no %s", pkgRef, ident, strings.Join(candidates, ", "), ident)
		}
	}
	if checked < 50 {
		t.Errorf("only %d identifiers checked: is the pattern still architecture.md's?", checked)
	}
}

// section is the text of the markdown section titled title, up to the
// next heading of the same or a higher level.
func section(t *testing.T, doc, title string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(#+) ` + regexp.QuoteMeta(title) + `\n`)
	loc := re.FindStringSubmatchIndex(doc)
	if loc == nil {
		t.Fatalf("architecture.md has no section %q", title)
	}
	level := doc[loc[2]:loc[3]]
	rest := doc[loc[1]:]
	end := regexp.MustCompile(`(?m)^#{1,` + string(rune('0'+len(level))) + `} `).FindStringIndex(rest)
	if end != nil {
		rest = rest[:end[0]]
	}
	return rest
}

// TestArchitecturePackageTable: the table of "Packages" lists every
// package of the module and no other.
func TestArchitecturePackageTable(t *testing.T) {
	text := section(t, architecture(t), "Packages")
	listed := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[2], -1) {
			listed[m[1]] = true
		}
	}
	for _, p := range goList(t) {
		r := rel(p.ImportPath)
		if !listed[r] {
			t.Errorf("the package table of architecture.md does not list %s", r)
		}
		delete(listed, r)
	}
	for _, p := range slices.Sorted(maps.Keys(listed)) {
		t.Errorf("the package table of architecture.md lists %s, which is no package", p)
	}
}

// TestArchitectureFuzzTargets: "Fuzzing" names every fuzz target of the
// module, as package.FuzzName, and no other, and counts them right.
func TestArchitectureFuzzTargets(t *testing.T) {
	text := section(t, architecture(t), "Fuzzing")
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9]+\\.Fuzz[A-Za-z0-9]*)`").FindAllStringSubmatch(text, -1) {
		listed[m[1]] = true
	}
	found := 0
	for p, names := range moduleNames(t) {
		for n := range names {
			if !strings.HasPrefix(n, "Fuzz") || strings.Contains(n, ".") {
				continue
			}
			found++
			id := path.Base(p) + "." + n
			if !listed[id] {
				t.Errorf("architecture.md's Fuzzing section does not name %s (%s)", id, p)
			}
			delete(listed, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(listed)) {
		t.Errorf("architecture.md's Fuzzing section names %s, which is no fuzz target", id)
	}
	if m := regexp.MustCompile(`Fuzz targets \((\d+);`).FindStringSubmatch(text); m == nil || m[1] != strconv.Itoa(found) {
		t.Errorf("architecture.md's Fuzzing section counts %v fuzz targets; there are %d", m, found)
	}
}
