package resolve

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// Explanation says why a package is in a resolved set.
type Explanation struct {
	Package string `json:"package"` // its NEVRA
	// Requested says a request names it (or is met by it) directly.
	Requested bool `json:"requested"`
	// Paths hold, for each request that leads to the package, the
	// shortest chain of requirements from that request through the set.
	Paths []Path `json:"paths"`
	// RequiredBy are the requirements of packages in the set that it
	// meets (every one, not only those on a path).
	RequiredBy []Edge `json:"requiredBy"`
}

// Path is one chain from a request to the package.
type Path struct {
	Request string `json:"request"`
	Edges   []Edge `json:"edges"`
}

// Edge is one requirement and the package of the set that met it.
type Edge struct {
	From        string `json:"from,omitempty"` // the requiring package; empty for a request
	Requirement string `json:"requirement"`
	Provider    string `json:"provider"`
	// Provide is what of the provider met it: a provide ("libfoo.so.1()(64bit)"),
	// its name and version ("foo = 1.0-alt1"), or a file.
	Provide string `json:"provide"`
	// Others are the other packages of the base that meet the
	// requirement, each with why it was not the one.
	Others []Candidate `json:"others"`
}

// Candidate is a package that could have met a requirement.
type Candidate struct {
	Package string `json:"package"`
	Reason  string `json:"reason"`
}

// NotInSetError says the package asked about is not in the set.
type NotInSetError struct{ Name string }

func (e *NotInSetError) Error() string {
	return fmt.Sprintf("%s is not in the package set", e.Name)
}

// Why explains why the package named target (a name or a NEVRA) is in a
// set that resolving requests chose from pkgs: the set is the packages for
// which inSet holds (a lock's component, a Resolve result). There is one
// Explanation per package of the set that target names (a multi-version
// kernel may have several); none is a *NotInSetError. Nothing is solved:
// the set is taken as given, and only the requirement graph is walked.
func Why(pkgs []*repo.Package, requests []string, inSet func(*repo.Package) bool, target string, opts Options) ([]Explanation, error) {
	w, found, err := newWhy(pkgs, requests, inSet, []string{target}, opts)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, &NotInSetError{Name: target}
	}
	out := make([]Explanation, 0, len(found))
	for _, v := range found {
		out = append(out, w.explain(v))
	}
	return out, nil
}

// ShortestEach gives, for each package of the set that a target names, by
// its NEVRA, the shortest of Why's Paths (the first of the shortest,
// requests sorted), walking the graph once per request for all targets; a
// target outside the set or that no request reaches has none.
func ShortestEach(pkgs []*repo.Package, requests []string, inSet func(*repo.Package) bool, targets []string, opts Options) (map[string]Path, error) {
	w, found, err := newWhy(pkgs, requests, inSet, targets, opts)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return map[string]Path{}, nil
	}
	best := make([][]hop, len(found)) // per package found
	for ri := range w.r.rules {
		if w.r.rules[ri].owner >= 0 {
			continue
		}
		w.walk(int32(ri))
		for i, v := range found {
			if w.seen[v] && (best[i] == nil || int(w.depth[v]) < len(best[i])) {
				best[i] = w.hops(v)
			}
		}
	}
	// Packages sharing a NEVRA (a build in two repositories) keep the
	// first of the shortest, as Why lists them.
	byNEVRA := map[string][]hop{}
	for i, v := range found {
		k := nevra(w.r.pkg(v))
		if q := byNEVRA[k]; best[i] != nil && (q == nil || len(best[i]) < len(q)) {
			byNEVRA[k] = best[i]
		}
	}
	out := make(map[string]Path, len(byNEVRA))
	for k, hs := range byNEVRA {
		out[k] = w.path(hs)
	}
	return out, nil
}

// newWhy builds the graph of the requests over pkgs and finds the packages
// of the set that targets name (a name or a NEVRA each).
func newWhy(pkgs []*repo.Package, requests []string, inSet func(*repo.Package) bool, targets []string, opts Options) (*why, []int32, error) {
	r, err := newRequestResolver(pkgs, requests, opts)
	if err != nil {
		return nil, nil, err
	}
	r.buildClosure()
	n := len(r.pkgOf)
	w := &why{r: r, chosen: make([]bool, n), pairsOf: make([][]int32, n), outOf: map[depKey][]Candidate{},
		via: make([]pathStep, n), depth: make([]int32, n), seen: make([]bool, n)}
	want := map[string]bool{}
	for _, t := range targets {
		want[t] = true
	}
	var found []int32
	for v := range r.pkgOf {
		p := r.pkg(int32(v))
		if w.chosen[v] = inSet(p); w.chosen[v] && (want[p.Name] || want[p.NEVRA()]) {
			found = append(found, int32(v))
		}
	}
	if len(found) == 0 {
		return w, nil, nil
	}
	for i, pa := range r.pairs {
		w.pairsOf[pa.a] = append(w.pairsOf[pa.a], int32(i))
		w.pairsOf[pa.b] = append(w.pairsOf[pa.b], int32(i))
	}
	return w, found, nil
}

// why walks the requirement graph within a set.
type why struct {
	r       *resolver
	chosen  []bool    // variable -> in the set
	pairsOf [][]int32 // variable -> its not-both pairs
	outOf   map[depKey][]Candidate

	// The last walk from a request (walk): how each package it reached
	// was first reached, in how many steps, and the packages in the order
	// reached (to clear seen for the next).
	via     []pathStep
	depth   []int32
	seen    []bool
	reached []int32
}

// hop is one step of a chain: rule followed to variable to.
type hop struct{ rule, to int32 }

func (w *why) explain(target int32) Explanation {
	r := w.r
	ex := Explanation{Package: nevra(r.pkg(target)), Paths: []Path{}, RequiredBy: []Edge{}}
	for ri := range r.rules {
		ru := &r.rules[ri]
		if ru.owner < 0 {
			if _, ok := slices.BinarySearch(ru.prov, target); ok {
				ex.Requested = true
			}
			if w.walk(int32(ri)); w.seen[target] {
				ex.Paths = append(ex.Paths, w.path(w.hops(target)))
			}
			continue
		}
		if _, ok := slices.BinarySearch(ru.prov, target); ok && w.chosen[ru.owner] {
			ex.RequiredBy = append(ex.RequiredBy, w.edge(int32(ri), target))
		}
	}
	slices.SortFunc(ex.RequiredBy, func(a, b Edge) int {
		return cmp.Or(strings.Compare(a.From, b.From), strings.Compare(a.Requirement, b.Requirement))
	})
	return ex
}

// walk reaches every package of the set it can from request rule ri,
// breadth first (rules in closure order, so the chains do not depend on
// the input order), for hops.
func (w *why) walk(ri int32) {
	r := w.r
	for _, v := range w.reached {
		w.seen[v] = false
	}
	w.reached = w.reached[:0]
	reach := func(v int32, st pathStep, depth int32) {
		if !w.seen[v] && w.chosen[v] {
			w.seen[v], w.via[v], w.depth[v] = true, st, depth
			w.reached = append(w.reached, v)
		}
	}
	for _, v := range r.rules[ri].prov {
		reach(v, pathStep{from: -1, rule: ri}, 1)
	}
	for i := 0; i < len(w.reached); i++ {
		v := w.reached[i]
		for _, rj := range r.byOwner[v] {
			for _, u := range r.rules[rj].prov {
				reach(u, pathStep{from: v, rule: rj}, w.depth[v]+1)
			}
		}
	}
}

// hops is the chain the last walk reached target by, from its request.
func (w *why) hops(target int32) []hop {
	hs := make([]hop, 0, w.depth[target])
	for cur := target; ; {
		st := w.via[cur]
		hs = append(hs, hop{rule: st.rule, to: cur})
		if st.from < 0 {
			break
		}
		cur = st.from
	}
	slices.Reverse(hs)
	return hs
}

// path describes a chain.
func (w *why) path(hs []hop) Path {
	r := w.r
	edges := make([]Edge, len(hs))
	for i, h := range hs {
		edges[i] = w.edge(h.rule, h.to)
	}
	return Path{Request: r.reqs[r.rules[hs[0].rule].req].text, Edges: edges}
}

// edge describes rule ri met by variable to.
func (w *why) edge(ri, to int32) Edge {
	r := w.r
	ru := &r.rules[ri]
	p := r.pkg(to)
	e := Edge{Provider: nevra(p), Others: []Candidate{}}
	sem := r.opts.Semantics
	if ru.owner >= 0 {
		e.From = nevra(r.pkg(ru.owner))
		e.Requirement = depString(&ru.dep)
		sem = r.pkg(ru.owner).Semantics
	} else {
		e.Requirement = r.reqs[ru.req].text
	}
	e.Provide = provideOf(p, &ru.dep, sem)
	for _, u := range ru.prov {
		if u != to {
			e.Others = append(e.Others, Candidate{Package: nevra(r.pkg(u)), Reason: w.lost(u, to)})
		}
	}
	e.Others = append(e.Others, w.outside(&ru.dep, sem)...)
	return e
}

// provideOf says what of p meets d.
func provideOf(p *repo.Package, d *repo.Dep, sem evr.Semantics) string {
	ver := versioned(d)
	var want evr.EVR
	if ver {
		want = evr.Parse(d.Version)
	}
	for j := range p.Provides {
		pd := &p.Provides[j]
		if pd.Name == d.Name && (!ver || !versioned(pd) || evr.Overlap(sem, evr.Parse(pd.Version), pd.Flags, want, d.Flags)) {
			return depString(pd)
		}
	}
	if p.Name == d.Name {
		return p.Name + " = " + p.EVR.String()
	}
	return d.Name // a file
}

// lost says why candidate u did not meet a requirement that chosen met.
func (w *why) lost(u, chosen int32) string {
	r := w.r
	if w.chosen[u] {
		return "also in the set"
	}
	if why := w.excludedBy(u); why != "" {
		return why
	}
	pu, pc := r.pkg(u), r.pkg(chosen)
	if pu.Name != pc.Name {
		return "not needed: " + nevra(pc) + " meets the requirement"
	}
	sem, branch := r.opts.Semantics, r.opts.TargetBranch
	switch c := evr.Compare(sem, pu.EVR, pc.EVR); {
	case c < 0:
		return "older than " + pc.EVR.String()
	case c == 0 && evr.Newer(sem, pu.EVR, pc.EVR, pu.BuildTime, pc.BuildTime, branch) < 0:
		if sem == evr.ALT && pu.EVR.Disttag != pc.EVR.Disttag && branch != "" && strings.HasPrefix(pc.EVR.Disttag, branch+"+") {
			return fmt.Sprintf("same version from another branch (disttag %s): %s's build is preferred", pu.EVR.Disttag, branch)
		}
		return "same version, an older build"
	}
	return "newer, but not installable with the set"
}

// excludedBy names a package of the set that rules u out (a conflict or
// an obsolete either way), or "".
func (w *why) excludedBy(u int32) string {
	r := w.r
	for _, pi := range w.pairsOf[u] {
		pa := &r.pairs[pi]
		other := pa.a
		if other == u {
			other = pa.b
		}
		if !w.chosen[other] || pa.kind == pairSameName {
			continue
		}
		on := nevra(r.pkg(other))
		switch {
		case pa.kind == pairConflict && pa.a == u:
			return "conflicts with " + on + " (" + depString(&pa.dep) + ")"
		case pa.kind == pairConflict:
			return on + " conflicts with it (" + depString(&pa.dep) + ")"
		case pa.a == u:
			return "obsoletes " + on
		default:
			return "obsoleted by " + on
		}
	}
	return ""
}

// outside lists the packages of the input that meet d but were never
// candidates: of another architecture, or excluded by name.
func (w *why) outside(d *repo.Dep, sem evr.Semantics) []Candidate {
	key := depKey{d.Name, d.Version, d.Flags & evr.FlagSense, sem}
	if c, ok := w.outOf[key]; ok {
		return c // every package that requires glibc asks the same
	}
	c := w.scanOutside(d, sem)
	w.outOf[key] = c
	return c
}

// scanOutside reads the whole input for outside.
func (w *why) scanOutside(d *repo.Dep, sem evr.Semantics) []Candidate {
	r := w.r
	ver := versioned(d)
	var want evr.EVR
	if ver {
		want = evr.Parse(d.Version)
	}
	var out []Candidate
	for _, p := range r.input {
		if p == nil {
			continue
		}
		arch, excl := r.archOK(p), excluded(r.opts.Excludes, p.Name)
		if (arch && !excl) || !matchesDep(p, d, ver, want, sem) {
			continue
		}
		reason := fmt.Sprintf("architecture %s, not %s or noarch", p.Arch, r.opts.Arch)
		if arch {
			reason = "excluded by the spec"
		}
		out = append(out, Candidate{Package: nevra(p), Reason: reason})
	}
	slices.SortFunc(out, func(a, b Candidate) int { return strings.Compare(a.Package, b.Package) })
	return slices.CompactFunc(out, func(a, b Candidate) bool { return a == b })
}
