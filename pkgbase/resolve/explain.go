package resolve

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-air/gini"
	"github.com/go-air/gini/z"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// ProblemKind classifies a Problem.
type ProblemKind int

const (
	// NoMatch: a request that no package matches.
	NoMatch ProblemKind = iota
	// NothingProvides: a chain of requirements ends in one that no
	// installable package provides.
	NothingProvides
	// Conflict: two packages that exclude each other (Conflicts,
	// Obsoletes, or two versions of one name) are both needed.
	Conflict
)

// Problem is one reason why the requests cannot be met.
type Problem struct {
	Kind    ProblemKind
	Message string
}

// Error is returned by Resolve when the requests cannot be met. It lists
// every problem found, sorted.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "cannot resolve: " + e.Problems[0].Message
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cannot resolve, %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Message)
	}
	return b.String()
}

// maxProblems caps the list: past that the rest is noise.
const maxProblems = 50

// explain finds why the requests fail: requests that match nothing,
// requirement chains that end in nothing (an exact, conflict-free
// analysis), and, among the rest, a minimal set of conflicts (gini's Why
// over selector literals).
func (r *resolver) explain() error {
	var probs []Problem
	seen := map[string]bool{}
	addProb := func(k ProblemKind, msg string) {
		if !seen[msg] {
			seen[msg] = true
			probs = append(probs, Problem{k, msg})
		}
	}
	for _, i := range r.noMatch {
		q := &r.reqs[i]
		addProb(NoMatch, fmt.Sprintf("requested %s: %s", q.text, r.nothingProvides(&q.dep, r.opts.Semantics, true)))
	}

	broken := r.brokenVars()
	var goodReqs []int32 // rules of requests that have an installable candidate
	for i := range r.rules {
		ru := &r.rules[i]
		if ru.owner >= 0 {
			break // requests come first
		}
		if slices.ContainsFunc(ru.prov, func(v int32) bool { return !broken[v] }) {
			goodReqs = append(goodReqs, int32(i))
			continue
		}
		visited := map[int32]bool{}
		for _, v := range ru.prov {
			r.brokenChains("requested "+r.reqs[ru.req].text, v, broken, visited, func(msg string) {
				addProb(NothingProvides, msg)
			})
		}
	}

	if len(goodReqs) > 0 {
		for _, msg := range r.conflictCore(goodReqs, broken) {
			addProb(Conflict, msg)
		}
	}
	if len(probs) == 0 {
		// Cannot happen: the solver said unsatisfiable. Say so rather than
		// return a success without packages.
		addProb(Conflict, "the requests are unsatisfiable but no single reason was isolated")
	}
	slices.SortFunc(probs, func(a, b Problem) int { return strings.Compare(a.Message, b.Message) })
	if len(probs) > maxProblems {
		n := len(probs) - maxProblems
		probs = append(probs[:maxProblems], Problem{Conflict, fmt.Sprintf("... and %d more problems", n)})
	}
	return &Error{Problems: probs}
}

// brokenVars computes the packages that cannot be installed whatever else
// is chosen: some requirement has no provider, or only such packages
// (the least fixpoint, ignoring conflicts, so it is exact for them).
func (r *resolver) brokenVars() []bool {
	broken := make([]bool, len(r.pkgOf))
	for changed := true; changed; {
		changed = false
		for i := range r.rules {
			ru := &r.rules[i]
			if ru.owner < 0 || broken[ru.owner] {
				continue
			}
			if !slices.ContainsFunc(ru.prov, func(v int32) bool { return !broken[v] }) {
				broken[ru.owner] = true
				changed = true
			}
		}
	}
	return broken
}

// brokenChains reports, for a broken package v reached through prefix,
// every requirement chain that ends in nothing. Each package is expanded
// once per request so that the output stays linear in the closure.
func (r *resolver) brokenChains(prefix string, v int32, broken []bool, visited map[int32]bool, emit func(string)) {
	if visited[v] || len(visited) > 4*maxProblems {
		return
	}
	visited[v] = true
	p := r.pkg(v)
	for _, ri := range r.byOwner[v] {
		ru := &r.rules[ri]
		if slices.ContainsFunc(ru.prov, func(w int32) bool { return !broken[w] }) {
			continue
		}
		step := fmt.Sprintf("%s -> %s requires %s", prefix, nevra(p), depString(&ru.dep))
		if len(ru.prov) == 0 {
			emit(step + ", " + r.nothingProvides(&ru.dep, p.Semantics, false))
			continue
		}
		for _, w := range ru.prov {
			r.brokenChains(step, w, broken, visited, emit)
		}
	}
}

// nothingProvides says that nothing provides d, naming the packages that
// would but are filtered out by architecture or excludes.
func (r *resolver) nothingProvides(d *repo.Dep, sem evr.Semantics, request bool) string {
	var arch, excl []string
	ver := versioned(d)
	var want evr.EVR
	if ver {
		want = evr.Parse(d.Version)
	}
	for _, p := range r.input {
		if p == nil || (r.archOK(p) && !excluded(r.opts.Excludes, p.Name)) {
			continue
		}
		if !matchesDep(p, d, ver, want, sem) {
			continue
		}
		if !r.archOK(p) {
			arch = append(arch, nevra(p))
		} else {
			excl = append(excl, nevra(p))
		}
	}
	what := "which nothing provides"
	if request {
		what = "no package matches"
	}
	var notes []string
	if len(arch) > 0 {
		slices.Sort(arch)
		notes = append(notes, fmt.Sprintf("not for %s: %s", r.opts.Arch, limitList(arch)))
	}
	if len(excl) > 0 {
		slices.Sort(excl)
		notes = append(notes, "excluded: "+limitList(excl))
	}
	if n := r.partialFilesNote(d.Name); n != "" {
		notes = append(notes, n)
	}
	if len(notes) > 0 {
		what += " (" + strings.Join(notes, "; ") + ")"
	}
	return what
}

// partialFilesNote explains that a file no package provides may be in a
// package all the same: the repositories that carry no filelists metadata
// list only primary.xml's files, and this one is not among those.
func (r *resolver) partialFilesNote(name string) string {
	if !strings.HasPrefix(name, "/") || repo.PrimaryFile(name) || len(r.opts.PartialFiles) == 0 {
		return ""
	}
	var names []string
	for url, n := range r.opts.PartialFiles {
		if n == "" {
			n = url
		}
		names = append(names, strconv.Quote(n))
	}
	slices.Sort(names)
	names = slices.Compact(names) // one name, several dists
	if len(names) == 1 {
		return "the repository " + names[0] + " has no filelists metadata, so only the files primary.xml lists are known"
	}
	return "the repositories " + strings.Join(names, ", ") + " have no filelists metadata, so only the files primary.xml lists are known"
}

// matchesDep reports whether p provides d (by name, provides or files).
func matchesDep(p *repo.Package, d *repo.Dep, ver bool, want evr.EVR, sem evr.Semantics) bool {
	if p.Name == d.Name && (!ver || evr.Overlap(sem, p.EVR, evr.FlagEqual, want, d.Flags)) {
		return true
	}
	for j := range p.Provides {
		pd := &p.Provides[j]
		if pd.Name != d.Name {
			continue
		}
		if !ver || !versioned(pd) || evr.Overlap(sem, evr.Parse(pd.Version), pd.Flags, want, d.Flags) {
			return true
		}
	}
	if strings.HasPrefix(d.Name, "/") && slices.Contains(p.Files, d.Name) {
		return true
	}
	return false
}

func limitList(s []string) string {
	const max = 5
	if len(s) > max {
		return strings.Join(s[:max], ", ") + fmt.Sprintf(" and %d more", len(s)-max)
	}
	return strings.Join(s, ", ")
}

// conflictCore solves again with a selector literal on every request and
// every not-both pair, and the broken packages forced out; gini's Why then
// names a minimal set of requests and pairs that cannot hold together.
func (r *resolver) conflictCore(reqRules []int32, broken []bool) []string {
	g := gini.New()
	var sels []z.Lit
	addClauses(g, r, func(m z.Lit) { sels = append(sels, m) })
	for v, b := range broken {
		if b {
			g.Add(lit(int32(v)).Not())
			g.Add(0)
		}
	}
	nreq := 0
	for i := range r.rules {
		if r.rules[i].owner < 0 {
			nreq++
		}
	}
	var assume []z.Lit
	for _, ri := range reqRules {
		assume = append(assume, sels[ri]) // request rules come first, in order
	}
	assume = append(assume, sels[nreq:]...)
	g.Assume(assume...)
	if g.Solve() != -1 {
		return nil // the good requests hold together; the broken ones said why
	}
	core := g.Why(nil)
	selIndex := make(map[z.Lit]int, len(sels))
	for i, m := range sels {
		selIndex[m] = i
	}
	var coreReqs []int32
	var corePairs []int
	for _, m := range core {
		i, ok := selIndex[m]
		switch {
		case !ok:
		case i < nreq:
			coreReqs = append(coreReqs, int32(i))
		default:
			corePairs = append(corePairs, i-nreq)
		}
	}
	if len(coreReqs) == 0 {
		coreReqs = reqRules
	}
	slices.Sort(coreReqs)
	via := r.paths(coreReqs, broken)
	var msgs []string
	for _, pi := range corePairs {
		msgs = append(msgs, r.pairMessage(&r.pairs[pi], via))
	}
	if len(msgs) == 0 {
		var names []string
		for _, ri := range coreReqs {
			names = append(names, r.reqs[r.rules[ri].req].text)
		}
		msgs = append(msgs, "the requests "+strings.Join(names, ", ")+" cannot be installed together")
	}
	return msgs
}

// pathStep is a breadth-first parent pointer: how a package was reached.
type pathStep struct {
	from int32 // parent variable, -1 when reached from a request
	rule int32 // the rule followed
}

// paths finds, for every package reachable from the given request rules
// through installable packages, the shortest chain of requirements.
func (r *resolver) paths(reqRules []int32, broken []bool) map[int32]pathStep {
	via := make(map[int32]pathStep)
	var queue []int32
	for _, ri := range reqRules {
		for _, v := range r.rules[ri].prov {
			if _, ok := via[v]; !ok && !broken[v] {
				via[v] = pathStep{from: -1, rule: ri}
				queue = append(queue, v)
			}
		}
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, ri := range r.byOwner[v] {
			for _, w := range r.rules[ri].prov {
				if _, ok := via[w]; !ok && !broken[w] {
					via[w] = pathStep{from: v, rule: ri}
					queue = append(queue, w)
				}
			}
		}
	}
	return via
}

// chain renders how v is pulled in: "requested A -> A-1.x86_64 requires
// B -> B-2.x86_64".
func (r *resolver) chain(v int32, via map[int32]pathStep) string {
	steps := []string{nevra(r.pkg(v))}
	cur := v
	for n := 0; n <= len(r.pkgOf); n++ { // bounded: the parents form a tree
		st, ok := via[cur]
		if !ok {
			break
		}
		ru := &r.rules[st.rule]
		if st.from < 0 {
			steps = append(steps, "requested "+r.reqs[ru.req].text)
			break
		}
		steps = append(steps, fmt.Sprintf("%s requires %s", nevra(r.pkg(st.from)), depString(&ru.dep)))
		cur = st.from
	}
	slices.Reverse(steps)
	return strings.Join(steps, " -> ")
}

// pairMessage explains one not-both constraint and how each side is needed.
func (r *resolver) pairMessage(pa *pair, via map[int32]pathStep) string {
	a, b := r.pkg(pa.a), r.pkg(pa.b)
	var what string
	switch pa.kind {
	case pairConflict:
		what = fmt.Sprintf("%s conflicts with %s provided by %s", nevra(a), depString(&pa.dep), nevra(b))
	case pairObsolete:
		what = fmt.Sprintf("%s obsoletes %s, matching %s", nevra(a), depString(&pa.dep), nevra(b))
	default:
		na, nb := nevra(a), nevra(b)
		if na == nb { // two builds of one version: tell them apart
			na += " (" + a.EVR.Disttag + ", " + a.Repo + ")"
			nb += " (" + b.EVR.Disttag + ", " + b.Repo + ")"
		}
		what = fmt.Sprintf("cannot install both %s and %s: one version of %s at a time", na, nb, a.Name)
	}
	return fmt.Sprintf("%s; needed as %s; and as %s", what, r.chain(pa.a, via), r.chain(pa.b, via))
}
