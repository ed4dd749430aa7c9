package layering

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
)

// isTestHelper says whether a module-relative package path is a helper of
// tests: under internal/test… (helpers shared across floors) or named
// …test beside the package it helps test (net/http/httptest's way, e.g.
// attest/signing/signingtest).
func isTestHelper(p string) bool {
	return strings.HasPrefix(p, "internal/test") || strings.HasSuffix(path.Base(p), "test")
}

// internalUp are the arrows from internal/ up to a floor above it that
// are still there, each with the reason and what removes it. The ground
// floor (internal/, "shared" in docs/architecture.md's package table)
// otherwise imports nothing of ours outside internal/.
var internalUp = map[string]string{
	"internal/testbase -> api/target": "the boot tests' package base reads the architectures' data; " +
		"it moves beside the build once the factory's tests that import it have moved (issue 39)",
	"internal/testbase -> pkgbase/debpkg": "the boot tests' base wraps Debian's packages as the bootable " +
		"demo base does; it moves beside the build with the api/target arrow (issue 39)",
	"internal/testbase -> pkgbase/debext": "the boot tests' base makes the cri and btrfs extensions of the " +
		"Debian packages the bootable demo base makes them of; it moves beside the build with the api/target arrow (issue 39)",
}

// internalViolations checks, on direct imports: no package that is not a
// test helper imports one (test helpers are for _test.go files and for
// each other); packages under internal/ import nothing of ours outside
// internal/ (internalUp aside). It also returns the entries of internalUp
// that no longer match an import, so that the list stays true.
func internalViolations(pkgs []pkg) (bad, stale []string) {
	used := map[string]bool{}
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
			if !under(from, "internal") || under(to, "internal") {
				continue
			}
			arrow := from + " -> " + to
			if _, ok := internalUp[arrow]; ok {
				used[arrow] = true
				continue
			}
			bad = append(bad, fmt.Sprintf("%s imports %s: internal/ is the ground floor and imports nothing above it", from, to))
		}
	}
	for arrow := range internalUp {
		if !used[arrow] {
			stale = append(stale, arrow)
		}
	}
	slices.Sort(stale)
	return bad, stale
}

// TestInternal holds the module to internalViolations' rules.
func TestInternal(t *testing.T) {
	bad, stale := internalViolations(goList(t))
	for _, v := range bad {
		t.Error(v)
	}
	for _, a := range stale {
		t.Errorf("internalUp lists %s, which no package imports any more: take it off the list", a)
	}
}

// TestRulesCatchWrongImports: the rules find deliberately wrong imports in
// a made-up module (the real one passes, so this is where they are seen
// failing).
func TestRulesCatchWrongImports(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	pkgs := []pkg{
		// Fine: the ground floor among itself, a helper beside its
		// package, a test helper importing another, a listed arrow.
		{ImportPath: m("internal/ocilayout"), Imports: []string{m("internal/atomicfile"), "os"}},
		{ImportPath: m("attest/signing/signingtest"), Imports: []string{m("attest/signing")}, Deps: []string{m("attest/signing")}},
		{ImportPath: m("internal/testbase/mkbase"), Imports: []string{m("internal/testbase")}},
		{ImportPath: m("internal/testbase"), Imports: []string{m("api/target"), m("pkgbase/debpkg"), m("pkgbase/debext")}},
		// Wrong: the ground floor reaching up, a test helper in library
		// code, the build reaching the release.
		{ImportPath: m("internal/atomicfile"), Imports: []string{m("oci")}},
		{ImportPath: m("oci"), Imports: []string{m("internal/testutil")}},
		{ImportPath: m("release"), Imports: []string{m("pkgbase/demobase/demotest")}},
		{ImportPath: m("builder/compose"), Deps: []string{m("release"), m("internal/digest")}},
	}
	bad, stale := internalViolations(pkgs)
	want := []string{
		"internal/atomicfile imports oci: internal/ is the ground floor and imports nothing above it",
		"oci imports the test helper internal/testutil: helpers are for tests only",
		"release imports the test helper pkgbase/demobase/demotest: helpers are for tests only",
	}
	if !slices.Equal(bad, want) {
		t.Errorf("internal rules found\n%s\nwant\n%s", strings.Join(bad, "\n"), strings.Join(want, "\n"))
	}
	if len(stale) != 0 {
		t.Errorf("stale arrows %v in a module that has them all", stale)
	}
	if _, stale := internalViolations(pkgs[:3]); len(stale) != len(internalUp) {
		t.Errorf("stale arrows %v, want all of %d", stale, len(internalUp))
	}
	floors := floorViolations(pkgs)
	if len(floors) != 1 || !strings.HasPrefix(floors[0], "builder/compose imports release") {
		t.Errorf("floor rules found %q, want builder/compose -> release alone", floors)
	}
}
