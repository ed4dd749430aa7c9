package resolve

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-air/gini"
	"github.com/go-air/gini/z"

	"github.com/nodeforge/builder/pkgbase/evr"
)

// lit is the positive literal of a closure variable.
func lit(v int32) z.Lit { return z.Var(v + 1).Pos() }

// decision is one choice of the search, with the alternatives libsolv
// would keep as a branch for the minimisation step.
type decision struct {
	level  int
	chosen int32
	alts   []int32 // other viable candidates, best version per name
}

// search is the state of the preference-driven search. gini holds every
// hard constraint and answers "is this still satisfiable"; the search keeps
// its own unit propagation over the same clauses to know which packages the
// decisions force in or out.
type search struct {
	r       *resolver
	g       *gini.Gini
	val     []int8  // 1 installed, -1 not installed, 0 undecided
	lvl     []int32 // level of each assignment
	trail   []int32 // assigned variables in order
	queue   []int32 // assigned, not yet propagated
	model   []bool  // the last satisfying assignment; it always satisfies the decisions
	decs    []decision
	assume  []z.Lit
	provIn  [][]int32 // variable -> rules listing it as a provider
	partner [][]int32 // variable -> variables it cannot be installed with
}

// solve returns the variables to install, or an *Error.
func (r *resolver) solve() ([]int32, error) {
	n := len(r.pkgOf)
	g := gini.NewVc(n, len(r.rules)+len(r.pairs))
	addClauses(g, r, nil)
	if len(r.noMatch) > 0 || g.Solve() != 1 {
		return nil, r.explain()
	}
	s := &search{
		r:       r,
		g:       g,
		val:     make([]int8, n),
		lvl:     make([]int32, n),
		model:   make([]bool, n),
		provIn:  make([][]int32, n),
		partner: make([][]int32, n),
	}
	for i := range r.rules {
		for _, p := range r.rules[i].prov {
			s.provIn[p] = append(s.provIn[p], int32(i))
		}
	}
	for _, pa := range r.pairs {
		s.partner[pa.a] = append(s.partner[pa.a], pa.b)
		s.partner[pa.b] = append(s.partner[pa.b], pa.a)
	}
	s.readModel()
	// Level 0: what the clauses force on their own (requests with one
	// candidate, their single-provider requirements, what those exclude).
	for i := range r.rules {
		if !s.checkRule(int32(i), 0) {
			return nil, fmt.Errorf("resolve: internal error: propagation failed after a satisfiable solve")
		}
	}
	if !s.propagate(0) {
		return nil, fmt.Errorf("resolve: internal error: propagation failed after a satisfiable solve")
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	var vars []int32
	for v := range s.val {
		if s.val[v] == 1 {
			vars = append(vars, int32(v))
		}
	}
	return vars, nil
}

// addClauses adds the hard constraints. With guard != nil, each request
// and each pair gets a fresh selector literal (for explanations); guard
// receives them in order: requests, then pairs.
func addClauses(g *gini.Gini, r *resolver, guard func(z.Lit)) {
	n := int32(len(r.pkgOf))
	next := n + 1
	for i := range r.rules {
		ru := &r.rules[i]
		if ru.owner >= 0 {
			g.Add(lit(ru.owner).Not())
		} else if guard != nil {
			sel := z.Var(next).Pos()
			next++
			guard(sel)
			g.Add(sel.Not())
		}
		for _, p := range ru.prov {
			g.Add(lit(p))
		}
		g.Add(0)
	}
	for i := range r.pairs {
		pa := &r.pairs[i]
		g.Add(lit(pa.a).Not())
		g.Add(lit(pa.b).Not())
		if guard != nil {
			sel := z.Var(next).Pos()
			next++
			guard(sel)
			g.Add(sel.Not())
		}
		g.Add(0)
	}
}

func (s *search) readModel() {
	for v := range s.model {
		s.model[v] = s.g.Value(lit(int32(v)))
	}
}

// level is the current decision level.
func (s *search) level() int { return len(s.decs) }

// assign sets v unless it is already set; it reports false on a clash.
func (s *search) assign(v int32, x int8, level int) bool {
	switch s.val[v] {
	case x:
		return true
	case -x:
		return false
	}
	s.val[v], s.lvl[v] = x, int32(level)
	s.trail = append(s.trail, v)
	s.queue = append(s.queue, v)
	return true
}

// checkRule applies unit propagation to one rule: when its owner is
// installed and one provider is left, that provider is installed; when
// every provider is out, so is the owner.
func (s *search) checkRule(ri int32, level int) bool {
	ru := &s.r.rules[ri]
	if ru.owner >= 0 && s.val[ru.owner] == -1 {
		return true
	}
	free, last := 0, int32(-1)
	for _, p := range ru.prov {
		switch s.val[p] {
		case 1:
			return true
		case 0:
			free++
			last = p
		}
	}
	switch {
	case free == 0 && ru.owner < 0:
		return false
	case free == 0:
		return s.assign(ru.owner, -1, level)
	case free == 1 && (ru.owner < 0 || s.val[ru.owner] == 1):
		return s.assign(last, 1, level)
	}
	return true
}

// propagate runs unit propagation over the queue; false on a conflict.
func (s *search) propagate(level int) bool {
	for len(s.queue) > 0 {
		v := s.queue[len(s.queue)-1]
		s.queue = s.queue[:len(s.queue)-1]
		if s.val[v] == 1 {
			for _, w := range s.partner[v] {
				if !s.assign(w, -1, level) {
					return false
				}
			}
			for _, ri := range s.r.byOwner[v] {
				if !s.checkRule(ri, level) {
					return false
				}
			}
			continue
		}
		for _, ri := range s.provIn[v] {
			if !s.checkRule(ri, level) {
				return false
			}
		}
	}
	return true
}

// run decides rules until every installed package's requirements are met,
// then minimises like libsolv and repeats.
func (s *search) run() error {
	// Each minimisation step makes the branch list lexicographically
	// smaller, so this terminates; the cap only bounds pathological inputs
	// (the solution is valid at every stop).
	minimise := 4*len(s.val) + 64
	for {
		ri, cands := s.pickRule()
		if ri >= 0 {
			if err := s.decide(cands, nil); err != nil {
				return err
			}
			continue
		}
		if minimise == 0 {
			return nil
		}
		minimise--
		d, alt, ok := s.findMinimisation()
		if !ok {
			return nil
		}
		// Take the branch: redo decision d with the alternative that ended
		// up installed anyway; the old choice is no longer an alternative.
		old := s.decs[d]
		s.revert(old.level - 1)
		alts := slices.DeleteFunc(slices.Clone(old.alts), func(v int32) bool { return v == alt })
		if err := s.decide([]int32{alt}, alts); err != nil {
			return err
		}
	}
}

// findMinimisation returns the earliest decision with an alternative that
// was installed by a later decision.
func (s *search) findMinimisation() (int, int32, bool) {
	for i, d := range s.decs {
		for _, a := range d.alts {
			if s.val[a] == 1 && int(s.lvl[a]) >= d.level {
				return i, a, true
			}
		}
	}
	return 0, 0, false
}

// pickRule returns the first unmet rule whose candidates name a single
// package (after dropping older versions and obsoleted packages), or else
// the first unmet rule: libsolv postpones real choices the same way, so
// that forced packages can make them moot. cands come best first.
func (s *search) pickRule() (int, []int32) {
	first, firstCands := -1, []int32(nil)
	for i := range s.r.rules {
		ru := &s.r.rules[i]
		if ru.owner >= 0 && s.val[ru.owner] != 1 {
			continue
		}
		met := false
		var cands []int32
		for _, p := range ru.prov {
			switch s.val[p] {
			case 1:
				met = true
			case 0:
				cands = append(cands, p)
			}
			if met {
				break
			}
		}
		if met {
			continue
		}
		cands = s.order(cands, ru.dep.Name)
		if s.names(cands) <= 1 {
			return i, cands
		}
		if first < 0 {
			first, firstCands = i, cands
		}
	}
	return first, firstCands
}

// names counts the distinct names among the viable (not obsoleted)
// candidates; cands are ordered, obsoleted ones last.
func (s *search) names(cands []int32) int {
	var seen []string
	for i, c := range cands {
		if i > 0 && s.obsoleted(c, cands) {
			break
		}
		if name := s.r.pkg(c).Name; !slices.Contains(seen, name) {
			seen = append(seen, name)
		}
	}
	return len(seen)
}

// obsoleted reports whether another candidate obsoletes c.
func (s *search) obsoleted(c int32, cands []int32) bool {
	for _, o := range cands {
		if o != c && slices.Contains(s.r.obsoletesOf[o], c) {
			return true
		}
	}
	return false
}

// order sorts candidates best first: not obsoleted by another candidate
// (dnf installs the obsoleting package), named as required, newest
// (evr.Newer), then by name and arch for determinism.
func (s *search) order(cands []int32, want string) []int32 {
	r := s.r
	if len(cands) < 2 {
		return cands
	}
	obs := make(map[int32]bool)
	for _, c := range cands {
		if s.obsoleted(c, cands) {
			obs[c] = true
		}
	}
	if len(obs) == len(cands) {
		clear(obs) // obsoleting each other: nothing to prefer
	}
	sem, branch := r.opts.Semantics, r.opts.TargetBranch
	slices.SortFunc(cands, func(a, b int32) int {
		if obs[a] != obs[b] {
			if obs[a] {
				return 1
			}
			return -1
		}
		pa, pb := r.pkg(a), r.pkg(b)
		if (pa.Name == want) != (pb.Name == want) {
			if pa.Name == want {
				return -1
			}
			return 1
		}
		if c := evr.Newer(sem, pa.EVR, pb.EVR, pa.BuildTime, pb.BuildTime, branch); c != 0 {
			return -c
		}
		if c := strings.Compare(pa.Name, pb.Name); c != 0 {
			return c
		}
		if c := strings.Compare(pa.Arch, pb.Arch); c != 0 {
			return c
		}
		return int(r.pkgOf[a] - r.pkgOf[b])
	})
	return cands
}

// bestPerName keeps the first (best) candidate of each name.
func (s *search) bestPerName(cands []int32) []int32 {
	var out []int32
	for _, c := range cands {
		name := s.r.pkg(c).Name
		if !slices.ContainsFunc(out, func(o int32) bool { return s.r.pkg(o).Name == name }) {
			out = append(out, c)
		}
	}
	return out
}

// decide installs the first candidate that keeps the problem satisfiable.
// alts, when not nil, replaces the branch alternatives recorded.
func (s *search) decide(cands []int32, alts []int32) error {
	for i, c := range cands {
		level := s.level() + 1
		if !s.assign(c, 1, level) || !s.propagate(level) {
			s.queue = s.queue[:0]
			s.revert(level - 1)
			continue
		}
		// The last model satisfies every decision so far; if it also
		// installs c there is no need to ask the solver again.
		if !s.model[c] {
			s.g.Assume(s.assume...)
			s.g.Assume(lit(c))
			if s.g.Solve() != 1 {
				s.revert(level - 1)
				continue
			}
			s.readModel()
		}
		d := decision{level: level, chosen: c, alts: alts}
		if alts == nil {
			for _, a := range s.bestPerName(cands[i+1:]) {
				if s.r.pkg(a).Name != s.r.pkg(c).Name {
					d.alts = append(d.alts, a)
				}
			}
		}
		s.decs = append(s.decs, d)
		s.assume = append(s.assume, lit(c))
		return nil
	}
	return fmt.Errorf("resolve: internal error: no viable candidate for a satisfiable rule")
}

// revert undoes every assignment and decision above level.
func (s *search) revert(level int) {
	k := len(s.trail)
	for k > 0 && int(s.lvl[s.trail[k-1]]) > level {
		k--
		s.val[s.trail[k]] = 0
	}
	s.trail = s.trail[:k]
	if len(s.decs) > level {
		s.decs = s.decs[:level]
		s.assume = s.assume[:level]
	}
}
