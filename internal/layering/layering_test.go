package layering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/nodeforge/builder"

// pkg is what go list says of one package of the module.
type pkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Deps       []string
}

// goList lists the module's packages once for all the tests here.
func goList(t *testing.T) []pkg {
	t.Helper()
	listOnce.Do(func() { listed, listErr = runGoList() })
	if listErr != nil {
		t.Fatal(listErr)
	}
	return listed
}

var (
	listOnce sync.Once
	listed   []pkg
	listErr  error
)

func runGoList() ([]pkg, error) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if p, err := exec.LookPath("go"); err == nil {
		gobin = p
	}
	cmd := exec.Command(gobin, "list", "-deps=false", "-json", module+"/...")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, errb.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		return nil, fmt.Errorf("go list found %d packages", len(pkgs))
	}
	return pkgs, nil
}

// rel is a package's path inside the module ("" for the root).
func rel(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}

// under says whether a module-relative path is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// floorRule bans, from a package at or below from, every dependency at or
// below one of banned.
type floorRule struct {
	from   string
	banned []string
	why    string
}

// floorRules are the floors of docs/architecture.md ("Packages"):
// contracts (api/) import nothing of ours but other contracts; the build
// never reaches the OCI store or the release; the release, the
// attestations and the audit never reach the build; only the pipeline
// (which only commands call) knows both the build and the release.
var floorRules = []floorRule{
	{"api", []string{"attest", "builder", "certification", "cmd", "internal", "oci", "pkgbase", "pipeline", "release"}, "contracts import nothing of ours"},
	{"builder", []string{"oci", "release", "certification", "cmd", "pipeline"}, "the build hands images over; it does not publish them"},
	{"release", []string{"builder", "certification", "cmd", "pipeline"}, "the release receives what the build made"},
	{"certification", []string{"builder", "cmd", "pipeline"}, "the audit reads a release, not the build"},
	{"attest", []string{"builder", "release", "certification", "cmd", "pipeline"}, "attestations describe; they do not build or publish"},
	{"oci", []string{"builder", "release", "attest", "certification", "pkgbase", "cmd", "pipeline"}, "the store knows nothing of what it stores"},
	{"pkgbase", []string{"builder", "oci", "release", "attest", "certification", "cmd", "pipeline"}, "the package base is the ground floor"},
	{"pipeline", []string{"cmd", "certification"}, "the pipeline runs jobs for the commands"},
	{"factory", []string{"cmd", "pipeline", "certification", "pkgbase/locker", "pkgbase/resolve", "pkgbase/repo", "pkgbase/cache"}, "the factory composes from signed releases, never from a package base"},
}

// floorViolations checks the floor rules on every package's transitive
// dependencies.
func floorViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		for _, r := range floorRules {
			if !under(from, r.from) {
				continue
			}
			for _, d := range p.Deps {
				if !strings.HasPrefix(d, module+"/") {
					continue
				}
				dep := rel(d)
				for _, b := range r.banned {
					if under(dep, b) {
						out = append(out, fmt.Sprintf("%s imports %s (directly or not): %s", from, dep, r.why))
					}
				}
			}
		}
	}
	return out
}

// TestLayering checks the floor rules (floorRules) on the module.
func TestLayering(t *testing.T) {
	for _, v := range floorViolations(goList(t)) {
		t.Error(v)
	}
}

// TestOnlyCommandsTalk: below cmd/, packages return errors and values;
// they never print, exit or read the environment, so that every command's
// behaviour is decided in one place.
func TestOnlyCommandsTalk(t *testing.T) {
	banned := map[string]map[string]bool{
		"fmt": {"Print": true, "Printf": true, "Println": true},
		"os":  {"Exit": true, "Getenv": true, "LookupEnv": true, "Environ": true, "Stdout": true, "Stderr": true, "Setenv": true},
		"log": {"Print": true, "Printf": true, "Println": true, "Fatal": true, "Fatalf": true, "Fatalln": true, "Panic": true, "Panicf": true},
	}
	fset := token.NewFileSet()
	for _, p := range goList(t) {
		from := rel(p.ImportPath)
		// Commands, programs (package main) and the helpers of tests.
		if under(from, "cmd") || p.Name == "main" || isTestHelper(from) {
			continue
		}
		for _, name := range append(append([]string{}, p.GoFiles...), p.CgoFiles...) {
			file := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			imported := map[string]string{} // local name -> path
			for _, im := range f.Imports {
				path := strings.Trim(im.Path.Value, `"`)
				local := filepath.Base(path)
				if im.Name != nil {
					local = im.Name.Name
				}
				imported[local] = path
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					id, ok := x.X.(*ast.Ident)
					if !ok {
						return true
					}
					if names := banned[imported[id.Name]]; names[x.Sel.Name] {
						t.Errorf("%s: %s.%s outside cmd/", fset.Position(x.Pos()), imported[id.Name], x.Sel.Name)
					}
				case *ast.CallExpr:
					if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "print" || id.Name == "println") && id.Obj == nil {
						t.Errorf("%s: %s outside cmd/", fset.Position(x.Pos()), id.Name)
					}
				}
				return true
			})
		}
	}
}
