package layering

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// importList is the explicit list of the packages of ours a package (or
// every package below a path) may import directly: a new arrow needs a
// line here, said and reviewed, on top of the floor rules.
type importList struct {
	from    string // a module-relative package, or a path and all below it ("cmd/...")
	allowed []string
	why     string
}

// importLists are those of docs/architecture.md ("Packages"): the
// factory's service reads releases (oci, release's verification), composes
// (builder/compose and what it needs of the build's floor), and never
// reaches a package base beyond version order, the build or the pipeline;
// its HTTP front reaches the service and reads what the routes name
// (platforms, schematics, compose's names), nothing of the store or the
// build; the commands call one library function each, of the floors
// listed.
var importLists = []importList{
	{"factory", []string{
		"api/extensions", "api/platform", "api/report", "api/schematic", "api/specs", "api/target",
		"attest/signing", "builder/compose", "builder/compressors", "builder/media/secureboot", "builder/rootfs",
		"internal/atomicfile", "internal/blobcache", "internal/digest", "internal/direntries", "internal/ocilayout",
		"oci", "pkgbase/evr", "release",
	}, "the factory's service reads verified releases and composes their media"},
	{"factory/server", []string{
		"api/platform", "api/schematic", "api/specs", "api/target", "builder/compose", "factory", "release",
	}, "the factory's HTTP front asks the service, through its seams"},
	{"cmd/...", []string{
		"api/...", "attest/pkcs11key", "attest/signing", "builder", "builder/media/secureboot", "certification",
		"factory/...", "internal/atomicfile", "internal/httptimeout", "internal/progress", "oci", "pipeline",
		"pkgbase/binrpm", "pkgbase/cache", "pkgbase/demobase", "pkgbase/evr", "pkgbase/keyring", "pkgbase/locker", "pkgbase/repo",
		"pkgbase/resolve", "pkgbase/rpmfile", "pkgbase/rpmwrite", "pkgbase/subset", "release",
	}, "commands parse flags and call the library"},
}

// matches says whether a module-relative path is pattern ("x", or "x/..."
// for x and below).
func matches(p, pattern string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return under(p, dir)
	}
	return p == pattern
}

// importListViolations checks every package's direct imports of ours
// against the lists that cover it.
func importListViolations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		for _, l := range importLists {
			if !matches(from, l.from) {
				continue
			}
			for _, im := range p.Imports {
				if !strings.HasPrefix(im, module+"/") {
					continue
				}
				to := rel(im)
				if !slices.ContainsFunc(l.allowed, func(a string) bool { return matches(to, a) }) {
					out = append(out, fmt.Sprintf("%s imports %s, which its list (internal/layering importLists) does not allow: %s", from, to, l.why))
				}
			}
		}
	}
	return out
}

// TestImportLists holds the module to importLists.
func TestImportLists(t *testing.T) {
	for _, v := range importListViolations(goList(t)) {
		t.Error(v)
	}
}

// httpServerNames are net/http's names for serving HTTP (handlers,
// muxes, servers, responses): a client needs none of them.
var httpServerNames = map[string]bool{
	"Server": true, "Handler": true, "HandlerFunc": true, "ServeMux": true, "NewServeMux": true,
	"ResponseWriter": true, "ResponseController": true, "NewResponseController": true, "Flusher": true, "Hijacker": true,
	"ListenAndServe": true, "ListenAndServeTLS": true, "Serve": true, "ServeTLS": true, "ServeContent": true,
	"ServeFile": true, "ServeFileFS": true, "FileServer": true, "FileServerFS": true, "StripPrefix": true,
	"MaxBytesReader": true, "TimeoutHandler": true, "Error": true, "NotFound": true, "NotFoundHandler": true,
	"Redirect": true, "RedirectHandler": true, "AllowQuerySemicolons": true, "MaxBytesHandler": true,
}

// httpServers are the packages that may serve HTTP: the factory's HTTP
// package, the commands (which listen) and the helpers of tests (fault
// proxies, registries).
var httpServers = []string{"factory/server", "cmd/...", "internal/test..."}

// httpFree are the packages that import net/http not at all, not even
// its client: the factory's service, used through its Go API by its HTTP
// front (factory/server) and by the commands (warm, gc, transfer).
var httpFree = []string{"factory"}

// importsHTTP is where a file imports net/http, or "".
func importsHTTP(fset *token.FileSet, f *ast.File) string {
	for _, im := range f.Imports {
		if strings.Trim(im.Path.Value, `"`) == "net/http" {
			return fset.Position(im.Pos()).String()
		}
	}
	return ""
}

// servesHTTP says whether p may use net/http's server names.
func servesHTTP(p string) bool {
	for _, s := range httpServers {
		if prefix, ok := strings.CutSuffix(s, "..."); ok && strings.HasPrefix(p, prefix) || matches(p, s) {
			return true
		}
	}
	return false
}

// httpServerUses are the places of a file that use net/http's server
// names.
func httpServerUses(fset *token.FileSet, f *ast.File) []string {
	local := map[string]bool{} // net/http's names in the file
	for _, im := range f.Imports {
		if strings.Trim(im.Path.Value, `"`) == "net/http" {
			if im.Name != nil {
				local[im.Name.Name] = true
			} else {
				local["http"] = true
			}
		}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if x, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := x.X.(*ast.Ident); ok && local[id.Name] && httpServerNames[x.Sel.Name] {
				out = append(out, fmt.Sprintf("%s: net/http.%s", fset.Position(x.Pos()), x.Sel.Name))
			}
		}
		return true
	})
	return out
}

// httpViolations are the places of a file of package p (which does not
// serve HTTP) that break the rule: no net/http at all in the packages
// httpFree lists, no server names in any.
func httpViolations(fset *token.FileSet, p string, f *ast.File) []string {
	if slices.Contains(httpFree, p) {
		if at := importsHTTP(fset, f); at != "" {
			return []string{fmt.Sprintf("%s: %s imports net/http, which it may not (internal/layering httpFree): its HTTP front is factory/server", at, p)}
		}
	}
	var out []string
	for _, u := range httpServerUses(fset, f) {
		out = append(out, fmt.Sprintf("%s in %s, which does not serve HTTP (internal/layering httpServers)", u, p))
	}
	return out
}

// TestHTTPServersApart: only the factory's HTTP front, factory/server
// (and the commands, and test helpers), serves HTTP; the factory's
// service does not import net/http, and no library uses a handler, mux,
// server or response writer, so that the service is used through its Go
// API and the HTTP front stays in one package.
func TestHTTPServersApart(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range goList(t) {
		from := rel(p.ImportPath)
		if servesHTTP(from) {
			continue
		}
		for _, name := range append(append([]string{}, p.GoFiles...), p.CgoFiles...) {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range httpViolations(fset, from, f) {
				t.Error(v)
			}
		}
	}
}

// TestImportRulesCatchWrongOnes: the import lists and the HTTP server
// rule find deliberately wrong code in made-up packages.
func TestImportRulesCatchWrongOnes(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := []pkg{
		{ImportPath: m("factory"), Imports: []string{m("oci"), m("release"), "net/http"}},
		{ImportPath: m("cmd/builder"), Imports: []string{m("factory"), m("factory/server"), m("pipeline")}},
		{ImportPath: m("factory"), Imports: []string{m("pkgbase/subset")}},
		{ImportPath: m("cmd/builder"), Imports: []string{m("internal/testutil")}},
	}
	got := importListViolations(pkgs)
	want := []string{
		"factory imports pkgbase/subset, which its list (internal/layering importLists) does not allow: the factory's service reads verified releases and composes their media",
		"cmd/builder imports internal/testutil, which its list (internal/layering importLists) does not allow: commands parse flags and call the library",
	}
	if !slices.Equal(got, want) {
		t.Errorf("import lists found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	fset := token.NewFileSet()
	src := `package factory

import (
	"net/http"
	web "net/http"
)

func get(c *http.Client) { c.Get("x") }

func handle(w web.ResponseWriter, r *web.Request) { http.Error(w, "no", 500) }
`
	f, err := parser.ParseFile(fset, "service.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v := httpViolations(fset, "factory", f); len(v) != 1 || !strings.Contains(v[0], "factory imports net/http, which it may not") {
		t.Errorf("the factory's service importing net/http: %q", v)
	}
	client, err := parser.ParseFile(fset, "client.go", "package factory\n\nimport \"net/http\"\n\nfunc get(c *http.Client) { c.Get(\"x\") }\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	if v := httpViolations(fset, "factory", client); len(v) != 1 {
		t.Errorf("the factory's service as an HTTP client: %q", v)
	}
	if v := httpViolations(fset, "oci", client); len(v) != 0 {
		t.Errorf("a client package: %q", v)
	}
	if v := httpViolations(fset, "oci", f); len(v) != 2 {
		t.Errorf("a client package serving: %q", v)
	}
	uses := httpServerUses(fset, f)
	if len(uses) != 2 || !strings.HasSuffix(uses[0], "net/http.ResponseWriter") || !strings.HasSuffix(uses[1], "net/http.Error") {
		t.Errorf("HTTP server uses %q, want the ResponseWriter and Error of line 10", uses)
	}
	if servesHTTP("oci") || servesHTTP("factory/cache") || !servesHTTP("factory/server") || !servesHTTP("cmd/builder") || !servesHTTP("internal/testutil") {
		t.Error("servesHTTP: only the factory's HTTP package, commands and test helpers serve")
	}
}
