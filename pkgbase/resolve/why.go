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
	out, err := WhyEach(pkgs, requests, inSet, []string{target}, opts)
	if err == nil && len(out) == 0 {
		return nil, &NotInSetError{Name: target}
	}
	return out, err
}

// WhyEach is Why for several targets at once (the graph is built once):
// one Explanation per package of the set that a target names, none for a
// target outside the set.
func WhyEach(pkgs []*repo.Package, requests []string, inSet func(*repo.Package) bool, targets []string, opts Options) ([]Explanation, error) {
	r, err := newRequestResolver(pkgs, requests, opts)
	if err != nil {
		return nil, err
	}
	r.buildClosure()
	w := &why{r: r, chosen: make([]bool, len(r.pkgOf)), pairsOf: make([][]int32, len(r.pkgOf)), outOf: map[depKey][]Candidate{}}
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
		return nil, nil
	}
	for i, pa := range r.pairs {
		w.pairsOf[pa.a] = append(w.pairsOf[pa.a], int32(i))
		w.pairsOf[pa.b] = append(w.pairsOf[pa.b], int32(i))
	}
	out := make([]Explanation, 0, len(found))
	for _, v := range found {
		out = append(out, w.explain(v))
	}
	return out, nil
}

// why walks the requirement graph within a set.
type why struct {
	r       *resolver
	chosen  []bool    // variable -> in the set
	pairsOf [][]int32 // variable -> its not-both pairs
	outOf   map[depKey][]Candidate
}

func (w *why) explain(target int32) Explanation {
	r := w.r
	ex := Explanation{Package: nevra(r.pkg(target)), Paths: []Path{}, RequiredBy: []Edge{}}
	for ri := range r.rules {
		ru := &r.rules[ri]
		if ru.owner < 0 {
			if _, ok := slices.BinarySearch(ru.prov, target); ok {
				ex.Requested = true
			}
			if p, ok := w.path(int32(ri), target); ok {
				ex.Paths = append(ex.Paths, p)
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

// path finds the shortest chain from request rule ri to target through
// packages of the set (breadth first, rules in closure order, so the
// answer does not depend on the input order).
func (w *why) path(ri, target int32) (Path, bool) {
	r := w.r
	via := map[int32]pathStep{}
	var queue []int32
	for _, v := range r.rules[ri].prov {
		if w.chosen[v] {
			via[v] = pathStep{from: -1, rule: ri}
			queue = append(queue, v)
		}
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if v == target {
			break
		}
		for _, rj := range r.byOwner[v] {
			for _, u := range r.rules[rj].prov {
				if _, seen := via[u]; !seen && w.chosen[u] {
					via[u] = pathStep{from: v, rule: rj}
					queue = append(queue, u)
				}
			}
		}
	}
	if _, ok := via[target]; !ok {
		return Path{}, false
	}
	var edges []Edge
	for cur := target; ; {
		st := via[cur]
		edges = append(edges, w.edge(st.rule, cur))
		if st.from < 0 {
			break
		}
		cur = st.from
	}
	slices.Reverse(edges)
	return Path{Request: r.reqs[r.rules[ri].req].text, Edges: edges}, true
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
