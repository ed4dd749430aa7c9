package resolve

import (
	"regexp"
	"slices"
	"strings"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// provRef points at one provide of one candidate.
type provRef struct {
	pkg int32 // candidate index
	dep int32 // index into that package's Provides
}

// depKey identifies a dependency for the provider cache. Only the sense
// bits of the flags change which packages match.
type depKey struct {
	name, version string
	sense         uint32
	sem           evr.Semantics
}

// pairKind says why two packages cannot be installed together.
type pairKind uint8

const (
	pairConflict pairKind = iota // a's Conflicts matches b
	pairObsolete                 // a's Obsoletes matches b
	pairSameName                 // one name, one version (not multi-version)
)

// pair is a not-both constraint between two closure variables.
type pair struct {
	a, b int32 // variables; for conflicts and obsoletes a holds the dependency
	kind pairKind
	dep  repo.Dep // the Conflicts or Obsoletes entry of a
}

// rule is a requirement: when owner is installed (always, for a request),
// one of prov must be.
type rule struct {
	owner int32 // variable of the requiring package, -1 for a request
	req   int32 // index into resolver.reqs when owner < 0
	dep   repo.Dep
	prov  []int32 // variables, ascending
}

// resolver holds one Resolve call's state.
type resolver struct {
	opts  Options
	mv    []*regexp.Regexp
	input []*repo.Package // everything given, for explanations
	reqs  []request

	// The index over the candidates (arch and excludes applied), sorted by
	// canonicalCmp so that indices do not depend on the input order.
	cands []*repo.Package
	idx   nameIndex
	cache map[depKey][]int32

	// The closure: one SAT variable per candidate reachable from the
	// requests, numbered in breadth-first order.
	varOf       []int32 // candidate -> variable, -1 when outside the closure
	pkgOf       []int32 // variable -> candidate
	rules       []rule  // requests first, then requirements in closure order
	byOwner     [][]int32
	pairs       []pair
	obsoletesOf [][]int32 // variable -> variables it obsoletes
	noMatch     []int32   // requests that matched no candidate
}

// newResolver indexes the candidates among pkgs; paths are file paths the
// requests name.
func newResolver(pkgs []*repo.Package, opts Options, paths []string) (*resolver, error) {
	mv, err := compileOptions(opts)
	if err != nil {
		return nil, err
	}
	r := &resolver{opts: opts, mv: mv, input: pkgs}
	r.cands = make([]*repo.Package, 0, len(pkgs))
	for _, p := range pkgs {
		if p == nil || !r.archOK(p) || excluded(opts.Excludes, p.Name) {
			continue
		}
		r.cands = append(r.cands, p)
	}
	slices.SortFunc(r.cands, canonicalCmp)

	n := len(r.cands)
	r.idx.build(r.cands, paths)
	r.cache = make(map[depKey][]int32, 1024)
	r.varOf = make([]int32, n)
	for i := range r.varOf {
		r.varOf[i] = -1
	}
	return r, nil
}

func (r *resolver) archOK(p *repo.Package) bool {
	return r.opts.Arch == "" || p.Arch == r.opts.Arch || p.Arch == "noarch"
}

func (r *resolver) multiVersion(name string) bool {
	for _, re := range r.mv {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// pkg returns the package of a variable.
func (r *resolver) pkg(v int32) *repo.Package { return r.cands[r.pkgOf[v]] }

// versioned reports whether d constrains the version.
func versioned(d *repo.Dep) bool { return d.Flags&evr.FlagSense != 0 && d.Version != "" }

// providers returns the candidates (ascending indices) that satisfy d under
// sem: packages providing d.Name with an overlapping version, packages
// named d.Name (rpm's implicit "Name = EVR" provide) and, for a path,
// packages that contain the file.
func (r *resolver) providers(d *repo.Dep, sem evr.Semantics) []int32 {
	key := depKey{d.Name, d.Version, d.Flags & evr.FlagSense, sem}
	if key.version == "" {
		key.sense = 0
	}
	if out, ok := r.cache[key]; ok {
		return out
	}
	var out []int32
	ver := versioned(d)
	var want evr.EVR
	if ver {
		want = evr.Parse(d.Version)
	}
	for _, pr := range r.idx.provides(d.Name) {
		if ver {
			pd := &r.cands[pr.pkg].Provides[pr.dep]
			if versioned(pd) && !evr.Overlap(sem, evr.Parse(pd.Version), pd.Flags, want, d.Flags) {
				continue
			}
		}
		out = append(out, pr.pkg)
	}
	for _, ci := range r.idx.named(d.Name) {
		if ver && !evr.Overlap(sem, r.cands[ci].EVR, evr.FlagEqual, want, d.Flags) {
			continue
		}
		out = append(out, ci)
	}
	if strings.HasPrefix(d.Name, "/") {
		out = append(out, r.idx.files(d.Name)...)
	}
	if len(out) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	r.cache[key] = out
	return out
}

// obsoletes reports whether obsolete entry o of a package matches package q
// (rpm and libsolv match obsoletes against package names, not provides).
func obsoletes(o *repo.Dep, q *repo.Package, sem evr.Semantics) bool {
	if o.Name != q.Name {
		return false
	}
	return !versioned(o) || evr.Overlap(sem, q.EVR, evr.FlagEqual, evr.Parse(o.Version), o.Flags)
}

// requestCandidates returns the candidates a request accepts.
func (r *resolver) requestCandidates(q *request) []int32 {
	sem := r.opts.Semantics
	d := &q.dep
	if strings.HasPrefix(d.Name, "/") {
		return r.providers(d, sem)
	}
	var out []int32
	for _, ci := range r.idx.named(d.Name) {
		if !versioned(d) || evr.Overlap(sem, r.cands[ci].EVR, evr.FlagEqual, evr.Parse(d.Version), d.Flags) {
			out = append(out, ci)
		}
	}
	if len(out) == 0 {
		// dnf installs a provider when no package has the name.
		return r.providers(d, sem)
	}
	if !versioned(d) {
		// dnf replaces a plain name by an available package obsoleting
		// it; keep both so the obsoleted one is the fallback.
		for _, oi := range r.idx.obsoleters(d.Name) {
			o := r.cands[oi]
			for j := range o.Obsoletes {
				if slices.ContainsFunc(out, func(ci int32) bool { return obsoletes(&o.Obsoletes[j], r.cands[ci], o.Semantics) }) {
					out = append(out, oi)
					break
				}
			}
		}
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

// addVar puts a candidate into the closure.
func (r *resolver) addVar(ci int32) int32 {
	if v := r.varOf[ci]; v >= 0 {
		return v
	}
	v := int32(len(r.pkgOf))
	r.varOf[ci] = v
	r.pkgOf = append(r.pkgOf, ci)
	return v
}

// buildClosure walks breadth-first from the requests through every
// candidate provider, recording requirement rules, then the not-both pairs
// among the packages reached.
func (r *resolver) buildClosure() {
	for i := range r.reqs {
		cs := r.requestCandidates(&r.reqs[i])
		if len(cs) == 0 {
			r.noMatch = append(r.noMatch, int32(i))
			continue
		}
		vs := make([]int32, len(cs))
		for k, ci := range cs {
			vs[k] = r.addVar(ci)
		}
		slices.Sort(vs)
		r.rules = append(r.rules, rule{owner: -1, req: int32(i), dep: r.reqs[i].dep, prov: vs})
	}
	for v := int32(0); int(v) < len(r.pkgOf); v++ {
		ci := r.pkgOf[v]
		p := r.cands[ci]
		for j := range p.Requires {
			d := &p.Requires[j]
			if isRPMLib(d) {
				continue
			}
			cs := r.providers(d, p.Semantics)
			if _, self := slices.BinarySearch(cs, ci); self {
				continue
			}
			vs := make([]int32, len(cs))
			for k, c := range cs {
				vs[k] = r.addVar(c)
			}
			slices.Sort(vs)
			r.rules = append(r.rules, rule{owner: v, dep: *d, prov: vs})
		}
	}
	r.byOwner = make([][]int32, len(r.pkgOf))
	for i := range r.rules {
		if o := r.rules[i].owner; o >= 0 {
			r.byOwner[o] = append(r.byOwner[o], int32(i))
		}
	}
	r.buildPairs()
}

// buildPairs records conflicts, obsoletes and one-version-per-name among
// the closure.
func (r *resolver) buildPairs() {
	seen := make(map[[2]int32]bool)
	add := func(a, b int32, kind pairKind, d repo.Dep) {
		k := [2]int32{min(a, b), max(a, b)}
		if kind == pairSameName && seen[k] {
			return
		}
		seen[k] = true
		r.pairs = append(r.pairs, pair{a: a, b: b, kind: kind, dep: d})
	}
	r.obsoletesOf = make([][]int32, len(r.pkgOf))
	for v := int32(0); int(v) < len(r.pkgOf); v++ {
		ci := r.pkgOf[v]
		p := r.cands[ci]
		for j := range p.Conflicts {
			d := &p.Conflicts[j]
			for _, qi := range r.providers(d, p.Semantics) {
				// A package's conflicts never match itself: ALT pins
				// subpackages with Provides X = EVR, Conflicts X < EVR
				// and X > EVR on one package.
				if qi == ci || r.varOf[qi] < 0 {
					continue
				}
				add(v, r.varOf[qi], pairConflict, *d)
			}
		}
		for j := range p.Obsoletes {
			d := &p.Obsoletes[j]
			if d.Name == p.Name {
				continue // other versions of one name: the name rule
			}
			for _, qi := range r.idx.named(d.Name) {
				w := r.varOf[qi]
				if w < 0 || !obsoletes(d, r.cands[qi], p.Semantics) {
					continue
				}
				add(v, w, pairObsolete, *d)
				r.obsoletesOf[v] = append(r.obsoletesOf[v], w)
			}
		}
	}
	// Candidates are sorted by name, so the closure's members of one name
	// are adjacent once sorted by candidate index.
	byCand := slices.Clone(r.pkgOf)
	slices.Sort(byCand)
	for i := 0; i < len(byCand); {
		j := i + 1
		name := r.cands[byCand[i]].Name
		for j < len(byCand) && r.cands[byCand[j]].Name == name {
			j++
		}
		if j-i > 1 {
			mv := r.multiVersion(name)
			for a := i; a < j; a++ {
				for b := a + 1; b < j; b++ {
					pa, pb := r.cands[byCand[a]], r.cands[byCand[b]]
					// Distinct versions of a multi-version name may
					// coexist; two builds of one version (disttags
					// apart) or one build from two repositories may not.
					if mv && evr.Compare(r.opts.Semantics, pa.EVR, pb.EVR) != 0 {
						continue
					}
					add(r.varOf[byCand[a]], r.varOf[byCand[b]], pairSameName, repo.Dep{Name: name})
				}
			}
		}
		i = j
	}
}

// nameIndex maps names (package names, provides, file paths) to the
// candidates that carry them. Every name is hashed once into an id and the
// lists are laid out flat (CSR): building it is the bulk of a Resolve on a
// large index, and one map insert per occurrence with no per-name slices
// keeps it cheap.
type nameIndex struct {
	ids   map[string]int32
	name  csr[int32]   // packages of that name
	prov  csr[provRef] // explicit provides of that name
	file  csr[int32]   // packages containing that path
	obsBy csr[int32]   // packages obsoleting that name (other names)
}

// csr holds one list per id: data[start[id]:start[id+1]].
type csr[T any] struct {
	start []int32
	data  []T
}

func (c *csr[T]) get(id int32, ok bool) []T {
	if !ok || int(id)+1 >= len(c.start) {
		return nil
	}
	return c.data[c.start[id]:c.start[id+1]]
}

// fill lays out n items with ids occ[i] (in order) over k ids.
func fill[T any](occ []int32, k int, item func(i int) T) csr[T] {
	c := csr[T]{start: make([]int32, k+1), data: make([]T, len(occ))}
	for _, id := range occ {
		c.start[id+1]++
	}
	for i := 1; i <= k; i++ {
		c.start[i] += c.start[i-1]
	}
	pos := slices.Clone(c.start[:k])
	for i, id := range occ {
		c.data[pos[id]] = item(i)
		pos[id]++
	}
	return c
}

func (x *nameIndex) named(s string) []int32 { id, ok := x.ids[s]; return x.name.get(id, ok) }
func (x *nameIndex) provides(s string) []provRef {
	id, ok := x.ids[s]
	return x.prov.get(id, ok)
}
func (x *nameIndex) files(s string) []int32      { id, ok := x.ids[s]; return x.file.get(id, ok) }
func (x *nameIndex) obsoleters(s string) []int32 { id, ok := x.ids[s]; return x.obsBy.get(id, ok) }

// build indexes cands. Files are indexed only when some candidate requires
// or conflicts with that path, or it is in paths (the requests): rpm-md
// file lists are large and almost never needed, and ALT's stripped lists
// are already limited to required paths.
func (x *nameIndex) build(cands []*repo.Package, paths []string) {
	var nprov, nfile int
	wanted := make(map[string]bool)
	for _, f := range paths {
		wanted[f] = true
	}
	for _, p := range cands {
		nprov += len(p.Provides)
		for j := range p.Requires {
			if n := p.Requires[j].Name; len(n) > 0 && n[0] == '/' {
				wanted[n] = true
			}
		}
		for j := range p.Conflicts {
			if n := p.Conflicts[j].Name; len(n) > 0 && n[0] == '/' {
				wanted[n] = true
			}
		}
		if len(p.Files) > 0 {
			nfile++
		}
	}
	x.ids = make(map[string]int32, len(cands)+nprov+nfile)
	intern := func(s string) int32 {
		if id, ok := x.ids[s]; ok {
			return id
		}
		id := int32(len(x.ids))
		x.ids[s] = id
		return id
	}
	nameOcc := make([]int32, len(cands))
	provOcc := make([]int32, 0, nprov)
	provAt := make([]provRef, 0, nprov)
	fileOcc := make([]int32, 0, nfile)
	fileAt := make([]int32, 0, nfile)
	var obsOcc, obsAt []int32
	for i, p := range cands {
		ci := int32(i)
		nameOcc[i] = intern(p.Name)
		for j := range p.Provides {
			provOcc = append(provOcc, intern(p.Provides[j].Name))
			provAt = append(provAt, provRef{ci, int32(j)})
		}
		for _, f := range p.Files {
			if wanted[f] {
				fileOcc = append(fileOcc, intern(f))
				fileAt = append(fileAt, ci)
			}
		}
		for j := range p.Obsoletes {
			if o := p.Obsoletes[j].Name; o != p.Name {
				obsOcc = append(obsOcc, intern(o))
				obsAt = append(obsAt, ci)
			}
		}
	}
	k := len(x.ids)
	x.name = fill(nameOcc, k, func(i int) int32 { return int32(i) })
	x.prov = fill(provOcc, k, func(i int) provRef { return provAt[i] })
	x.file = fill(fileOcc, k, func(i int) int32 { return fileAt[i] })
	x.obsBy = fill(obsOcc, k, func(i int) int32 { return obsAt[i] })
}
