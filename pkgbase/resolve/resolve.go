// Package resolve picks the set of packages to install for a list of
// requests from a package index: a minimal closure under rpm's dependency
// rules (versioned requires and provides, file dependencies, conflicts,
// obsoletes, rpmlib features) and the version rules of each repository
// (ALT or upstream rpm, see package evr).
//
// The problem is encoded as SAT (one variable per package reachable from
// the requests) and solved with gini, driven by a preference-ordered search
// modelled on libsolv, the solver behind dnf: unit propagation first,
// single-name choices before choices between different packages, the best
// candidate first, and a final minimisation step that drops a choice made
// redundant by a later one.
package resolve

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// DefaultMultiVersion is used when Options.MultiVersion is nil: ALT installs
// kernels and their module packages side by side.
var DefaultMultiVersion = []string{`^kernel-(image|modules)-.*`}

// Options tunes Resolve.
type Options struct {
	// Arch selects the packages that may be installed: those of this
	// architecture and "noarch". Empty means every architecture.
	Arch string
	// Semantics are the version rules for the requests' versions and for
	// ordering candidates (dependencies use each package's own Semantics).
	Semantics evr.Semantics
	// TargetBranch is the ALT branch (e.g. "p10") whose disttag wins among
	// otherwise equal candidates.
	TargetBranch string
	// Excludes are shell globs (path.Match) on package names; matching
	// packages are never chosen.
	Excludes []string
	// MultiVersion are regular expressions on package names that may be
	// installed in several versions at once. nil means DefaultMultiVersion;
	// an empty non-nil slice means none.
	MultiVersion []string
	// PartialFiles names, by Package.Repo, the repositories whose packages
	// list only part of their files (rpm-md without filelists metadata:
	// primary.xml's subset), so that a file nothing provides can be
	// explained; the value is the name to show (the URL when empty).
	PartialFiles map[string]string
}

// Result is a resolved package set.
type Result struct {
	// Packages sorted by name, then version (under Options.Semantics), then
	// architecture.
	Packages []*repo.Package
}

// Resolve returns the packages to install for requests. A request is a
// package name ("bash"), a name with a version constraint
// ("kernel-image-std-def = 2:6.12.1-alt1", operators < <= = >= >), or an
// absolute file path ("/bin/sh"). A plain name matches packages of that
// name, or the providers of that name when no package has it; like dnf, a
// plain name is also satisfied by an available package that obsoletes it
// (the obsoleting package is preferred).
//
// When the requests cannot be met the error is an *Error that lists every
// problem with the chain of dependencies that leads to it. Malformed
// requests or options give a plain error.
//
// The result depends only on the set of packages and requests, not on
// their order. Resolve does not modify pkgs and may run concurrently on
// the same slice.
func Resolve(pkgs []*repo.Package, requests []string, opts Options) (*Result, error) {
	r, err := newRequestResolver(pkgs, requests, opts)
	if err != nil {
		return nil, err
	}
	r.buildClosure()
	vars, err := r.solve()
	if err != nil {
		return nil, err
	}
	res := &Result{Packages: make([]*repo.Package, 0, len(vars))}
	for _, v := range vars {
		res.Packages = append(res.Packages, r.pkg(v))
	}
	sem := opts.Semantics
	slices.SortFunc(res.Packages, func(a, b *repo.Package) int {
		return cmp.Or(
			strings.Compare(a.Name, b.Name),
			evr.Compare(sem, a.EVR, b.EVR),
			strings.Compare(a.EVR.Disttag, b.EVR.Disttag),
			strings.Compare(a.Arch, b.Arch),
			canonicalCmp(a, b),
		)
	})
	return res, nil
}

// newRequestResolver parses the requests and indexes the candidates for
// them (the files that requests name included).
func newRequestResolver(pkgs []*repo.Package, requests []string, opts Options) (*resolver, error) {
	reqs := make([]request, 0, len(requests))
	var paths []string
	for _, s := range requests {
		q, err := parseRequest(s)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, q)
		if strings.HasPrefix(q.dep.Name, "/") {
			paths = append(paths, q.dep.Name)
		}
	}
	r, err := newResolver(pkgs, opts, paths)
	if err != nil {
		return nil, err
	}
	// Sorted so that the same requests in another order give the same
	// search; duplicates would only add identical rules.
	slices.SortFunc(reqs, func(a, b request) int { return strings.Compare(a.text, b.text) })
	r.reqs = slices.CompactFunc(reqs, func(a, b request) bool { return a.text == b.text })
	return r, nil
}

// request is one parsed request.
type request struct {
	text string   // as given, for messages
	dep  repo.Dep // name (or path), sense flags and version
}

// parseRequest reads "name", "name OP version" or "/path".
func parseRequest(s string) (request, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return request{}, errors.New("resolve: empty request")
	}
	i := strings.IndexAny(t, "<>=")
	if i < 0 {
		if strings.ContainsAny(t, " \t") {
			return request{}, fmt.Errorf("resolve: request %q: want \"name\", \"name OP version\" or \"/path\"", s)
		}
		return request{text: t, dep: repo.Dep{Name: t}}, nil
	}
	name := strings.TrimSpace(t[:i])
	j := i
	for j < len(t) && strings.IndexByte("<>=", t[j]) >= 0 {
		j++
	}
	var flags uint32
	switch t[i:j] {
	case "<":
		flags = evr.FlagLess
	case "<=", "=<":
		flags = evr.FlagLess | evr.FlagEqual
	case "=", "==":
		flags = evr.FlagEqual
	case ">=", "=>":
		flags = evr.FlagGreater | evr.FlagEqual
	case ">":
		flags = evr.FlagGreater
	default:
		return request{}, fmt.Errorf("resolve: request %q: unknown operator %q", s, t[i:j])
	}
	ver := strings.TrimSpace(t[j:])
	if name == "" || ver == "" || strings.ContainsAny(name, " \t") || strings.ContainsAny(ver, " \t") {
		return request{}, fmt.Errorf("resolve: request %q: want \"name OP version\"", s)
	}
	return request{text: name + " " + t[i:j] + " " + ver, dep: repo.Dep{Name: name, Flags: flags, Version: ver}}, nil
}

// isRPMLib reports requirements that rpm satisfies itself.
func isRPMLib(d *repo.Dep) bool {
	return d.Flags&evr.FlagRPMLib != 0 || strings.HasPrefix(d.Name, "rpmlib(")
}

// depString renders a dependency the way rpm prints it: "name OP version".
func depString(d *repo.Dep) string {
	if d.Flags&evr.FlagSense == 0 || d.Version == "" {
		return d.Name
	}
	op := ""
	if d.Flags&evr.FlagLess != 0 {
		op += "<"
	}
	if d.Flags&evr.FlagGreater != 0 {
		op += ">"
	}
	if d.Flags&evr.FlagEqual != 0 {
		op += "="
	}
	return d.Name + " " + op + " " + d.Version
}

// nevra names a package in messages.
func nevra(p *repo.Package) string { return p.NEVRA() }

// canonicalCmp is a total order on packages that does not depend on the
// input order; it only has to be stable, not meaningful. Early returns
// matter: it sorts the whole index on every call.
func canonicalCmp(a, b *repo.Package) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := strings.Compare(a.EVR.Version, b.EVR.Version); c != 0 {
		return c
	}
	if c := strings.Compare(a.EVR.Release, b.EVR.Release); c != 0 {
		return c
	}
	return cmp.Or(
		cmp.Compare(a.EVR.Epoch, b.EVR.Epoch),
		cmpBool(a.EVR.HasEpoch, b.EVR.HasEpoch),
		strings.Compare(a.EVR.Disttag, b.EVR.Disttag),
		strings.Compare(a.Arch, b.Arch),
		cmp.Compare(a.BuildTime, b.BuildTime),
		strings.Compare(a.Repo, b.Repo),
		strings.Compare(a.Location, b.Location),
		strings.Compare(a.SHA256, b.SHA256),
		strings.Compare(a.BLAKE2b, b.BLAKE2b),
	)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// compileOptions checks the globs and compiles the multi-version patterns.
func compileOptions(opts Options) ([]*regexp.Regexp, error) {
	for _, g := range opts.Excludes {
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("resolve: exclude pattern %q: %w", g, err)
		}
	}
	pats := opts.MultiVersion
	if pats == nil {
		pats = DefaultMultiVersion
	}
	mv := make([]*regexp.Regexp, 0, len(pats))
	for _, p := range pats {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("resolve: multi-version pattern %q: %w", p, err)
		}
		mv = append(mv, re)
	}
	return mv, nil
}

// excluded reports whether name matches one of the exclude globs.
func excluded(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
