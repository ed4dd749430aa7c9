package resolve

import (
	"hash/maphash"
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
// candidates that carry them. Building it is the bulk of a Resolve on a
// large index and a look-up is needed for only a few thousand names, so it
// builds no map: every name occurrence is hashed once and the occurrences
// are sorted by hash (then by position: a counting sort on the top 16
// bits, then each bucket), which leaves the occurrences of each name side
// by side, in order. A look-up finds the
// run of its hash through a table of the hashes' top 16 bits and keeps
// the occurrences of its kind whose name is the one asked for (the hash
// decides nothing alone).
type nameIndex struct {
	seed maphash.Seed
	occ  []hashed // every occurrence, by hash, then by position
	top  []int32  // occ[top[d]:top[d+1]]: the hashes whose top 16 bits are d
	// Occurrences are numbered by kind: names [0, nName), provides
	// [nName, nProv), files [nProv, nFile), obsoletes [nFile, len(occ)).
	nName, nProv, nFile int32
	cands               []*repo.Package
	provStart           []int32 // provides before each candidate's (and all of them)
	fileAt              []fileRef
	obsAt               []provRef // Obsoletes entries
}

type fileRef struct {
	pkg  int32
	file int32 // index into Files
}

// nameHash hashes names to 32 bits (a collision costs a string
// comparison, nothing else); the tests replace it to force collisions.
var nameHash = func(seed maphash.Seed, s string) uint32 { return uint32(maphash.String(seed, s)) }

// run returns the occurrences whose hash is s's.
func (x *nameIndex) run(s string) []hashed {
	if len(x.top) == 0 {
		return nil
	}
	h := nameHash(x.seed, s)
	d := h >> 16
	lo, hi := x.top[d], x.top[d+1]
	for lo < hi && x.occ[lo].h < h {
		lo++
	}
	end := lo
	for end < hi && x.occ[end].h == h {
		end++
	}
	return x.occ[lo:end]
}

func (x *nameIndex) named(s string) []int32 {
	var out []int32
	for _, e := range x.run(s) {
		if e.i < x.nName && x.cands[e.i].Name == s {
			out = append(out, e.i)
		}
	}
	return out
}

func (x *nameIndex) provides(s string) []provRef {
	var out []provRef
	for _, e := range x.run(s) {
		if e.i >= x.nName && e.i < x.nProv {
			pr := x.provRef(e.i - x.nName)
			if x.cands[pr.pkg].Provides[pr.dep].Name == s {
				out = append(out, pr)
			}
		}
	}
	return out
}

func (x *nameIndex) files(s string) []int32 {
	var out []int32
	for _, e := range x.run(s) {
		if e.i >= x.nProv && e.i < x.nFile {
			fr := x.fileAt[e.i-x.nProv]
			if x.cands[fr.pkg].Files[fr.file] == s {
				out = append(out, fr.pkg)
			}
		}
	}
	return out
}

func (x *nameIndex) obsoleters(s string) []int32 {
	var out []int32
	for _, e := range x.run(s) {
		if e.i >= x.nFile {
			or := x.obsAt[e.i-x.nFile]
			if x.cands[or.pkg].Obsoletes[or.dep].Name == s {
				out = append(out, or.pkg)
			}
		}
	}
	return out
}

// build indexes cands. Files are indexed only when some candidate requires
// or conflicts with that path, or it is in paths (the requests): rpm-md
// file lists are large and almost never needed, and ALT's stripped lists
// are already limited to required paths.
func (x *nameIndex) build(cands []*repo.Package, paths []string) {
	x.cands = cands
	var nprov int
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
	}
	// Most files are not wanted: their length tells most of them without
	// hashing.
	var wantLen []bool
	for f := range wanted {
		if len(f) >= len(wantLen) {
			wantLen = append(wantLen, make([]bool, len(f)+1-len(wantLen))...)
		}
		wantLen[len(f)] = true
	}

	x.seed = maphash.MakeSeed()
	hs := make([]uint32, 0, len(cands)+nprov)
	add := func(s string) { hs = append(hs, nameHash(x.seed, s)) }
	for _, p := range cands {
		add(p.Name)
	}
	x.nName = int32(len(hs))
	x.provStart = make([]int32, len(cands)+1)
	for i, p := range cands {
		x.provStart[i] = int32(len(hs)) - x.nName
		for j := range p.Provides {
			add(p.Provides[j].Name)
		}
	}
	x.provStart[len(cands)] = int32(len(hs)) - x.nName
	x.nProv = int32(len(hs))
	for i, p := range cands {
		for j, f := range p.Files {
			if len(f) < len(wantLen) && wantLen[len(f)] && wanted[f] {
				add(f)
				x.fileAt = append(x.fileAt, fileRef{int32(i), int32(j)})
			}
		}
	}
	x.nFile = int32(len(hs))
	for i, p := range cands {
		for j := range p.Obsoletes {
			if o := p.Obsoletes[j].Name; o != p.Name {
				add(o)
				x.obsAt = append(x.obsAt, provRef{int32(i), int32(j)})
			}
		}
	}
	x.occ, x.top = sortHashes(hs)
}

// provRef returns the k-th provide: the candidate whose provides hold it.
func (x *nameIndex) provRef(k int32) provRef {
	// The last candidate whose provides start at or before k.
	lo, hi := 0, len(x.provStart)-1
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if x.provStart[m] <= k {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return provRef{int32(lo), k - x.provStart[lo]}
}

// hashed is an occurrence's hash and its index.
type hashed struct {
	h uint32
	i int32
}

// sortHashes returns the occurrences (hash and position) sorted by hash,
// then by position, and where each value of the top 16 bits starts (and
// the end): a counting sort on the top 16 bits, then an insertion sort of
// each bucket (a handful of entries: the hashes are uniform).
func sortHashes(hs []uint32) ([]hashed, []int32) {
	top := make([]int32, 1<<16+1)
	for _, h := range hs {
		top[h>>16+1]++
	}
	for d := 1; d <= 1<<16; d++ {
		top[d] += top[d-1]
	}
	occ := make([]hashed, len(hs))
	// top[d] serves as bucket d's cursor, and ends as the start of d+1.
	for i, h := range hs {
		d := h >> 16
		occ[top[d]] = hashed{h, int32(i)}
		top[d]++
	}
	copy(top[1:], top[:1<<16])
	top[0] = 0
	for d := 0; d < 1<<16; d++ {
		b := occ[top[d]:top[d+1]]
		for i := 1; i < len(b); i++ {
			for j := i; j > 0 && b[j].h < b[j-1].h; j-- {
				b[j], b[j-1] = b[j-1], b[j]
			}
		}
	}
	return occ, top
}
