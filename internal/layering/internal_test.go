package layering

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
)

// isTestHelper says whether a module-relative package path is a helper of
// tests: named test… (internal/testutil, pkgbase/testbase: the test
// package base, beside the package bases) or …test beside the package it
// helps test (net/http/httptest's way, e.g. attest/signing/signingtest),
// or a command under a test… helper (pkgbase/testbase/mkbase).
func isTestHelper(p string) bool {
	b := path.Base(p)
	if strings.HasPrefix(b, "test") || strings.HasSuffix(b, "test") {
		return true
	}
	return slices.ContainsFunc(strings.Split(path.Dir(p), "/"), func(dir string) bool { return strings.HasPrefix(dir, "test") })
}

// internalViolations checks, on direct imports: no package that is not a
// test helper imports one (test helpers are for _test.go files and for
// each other); packages under internal/ import nothing of ours outside
// internal/: it is the ground floor.
func internalViolations(pkgs []pkg) (bad []string) {
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		for _, im := range p.Imports {
			if !strings.HasPrefix(im, module+"/") {
				continue
			}
			to := rel(im)
			if isTestHelper(to) && !isTestHelper(from) {
				bad = append(bad, fmt.Sprintf("%s imports the test helper %s: helpers are for tests only", from, to))
			}
			if under(from, "internal") && !under(to, "internal") {
				bad = append(bad, fmt.Sprintf("%s imports %s: internal/ is the ground floor and imports nothing above it", from, to))
			}
		}
	}
	return bad
}

// TestInternal holds the module to internalViolations' rules.
func TestInternal(t *testing.T) {
	for _, v := range internalViolations(goList(t)) {
		t.Error(v)
	}
}

// TestRulesCatchWrongImports: the rules find deliberately wrong imports in
// a made-up module (the real one passes, so this is where they are seen
// failing).
func TestRulesCatchWrongImports(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := []pkg{
		// Fine: the ground floor among itself, a helper beside its
		// package, a test helper importing another and the floors above
		// it, a command under a helper.
		{ImportPath: m("internal/ocilayout"), Imports: []string{m("internal/atomicfile"), "os"}},
		{ImportPath: m("attest/signing/signingtest"), Imports: []string{m("attest/signing")}, Deps: []string{m("attest/signing")}},
		{ImportPath: m("pkgbase/testbase/mkbase"), Imports: []string{m("pkgbase/testbase")}},
		{ImportPath: m("pkgbase/testbase"), Imports: []string{m("api/target"), m("pkgbase/debpkg"), m("internal/testutil")}},
		// Wrong: the ground floor reaching up, a test helper in library
		// code, the build reaching the release.
		{ImportPath: m("internal/atomicfile"), Imports: []string{m("oci")}},
		{ImportPath: m("oci"), Imports: []string{m("internal/testutil")}},
		{ImportPath: m("release"), Imports: []string{m("pkgbase/demobase/demotest")}},
		{ImportPath: m("attest/sbom"), Imports: []string{m("pkgbase/testbase")}},
		{ImportPath: m("builder/compose"), Deps: []string{m("release"), m("internal/digest")}},
	}
	bad := internalViolations(pkgs)
	want := []string{
		"internal/atomicfile imports oci: internal/ is the ground floor and imports nothing above it",
		"oci imports the test helper internal/testutil: helpers are for tests only",
		"release imports the test helper pkgbase/demobase/demotest: helpers are for tests only",
		"attest/sbom imports the test helper pkgbase/testbase: helpers are for tests only",
	}
	if !slices.Equal(bad, want) {
		t.Errorf("internal rules found\n%s\nwant\n%s", strings.Join(bad, "\n"), strings.Join(want, "\n"))
	}
	floors := floorViolations(pkgs)
	if len(floors) != 1 || !strings.HasPrefix(floors[0], "builder/compose imports release") {
		t.Errorf("floor rules found %q, want builder/compose -> release alone", floors)
	}
}
