package certification

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/pkgbase/resolve"
)

// IdentityChange is a field of the release's identity that differs.
type IdentityChange struct {
	Field string `json:"field"` // name, version or branch
	Old   string `json:"old"`
	New   string `json:"new"`
}

// ComponentChange is a component of one architecture whose set of
// packages changed: those that joined it and those that left it, even
// when the release still holds them through another component.
type ComponentChange struct {
	Arch      string   `json:"arch"`
	Component string   `json:"component"`
	Change    string   `json:"change"` // added, removed, changed
	Joined    []Member `json:"joined"`
	Left      []Member `json:"left"`
}

// Member is a package that joined or left a component.
type Member struct {
	Name  string `json:"name"`
	NEVRA string `json:"nevra"` // NEW's for one that joined, OLD's for one that left
	// Why is the shortest requirement chain from a request of the
	// component to the package, on the side whose component holds it.
	Why     *Chain `json:"why,omitempty"`
	WhyNote string `json:"whyNote,omitempty"` // why there is no chain
	// Because is what the other side's lock changed on that chain.
	Because string `json:"because,omitempty"`
	// Elsewhere are the other components of the architecture holding the
	// package on the other side: for one that left, those of NEW that
	// still hold it; for one that joined, those of OLD that held it.
	Elsewhere []string `json:"elsewhere"`
}

// Chain is a requirement chain from a request to a package.
type Chain struct {
	Request string `json:"request"`
	Steps   []Step `json:"steps"`
}

// Step is one requirement and the package that met it.
type Step struct {
	From        string `json:"from,omitempty"` // the requiring package; empty for the request itself
	Requirement string `json:"requirement"`
	Provider    string `json:"provider"`
}

// WhyFunc gives, for packages (NEVRAs) of a component of a side's lock,
// the shortest requirement chain from a request of the component to each.
type WhyFunc func(ctx context.Context, side *Side, arch, component string, nevras []string) (map[string]resolve.Path, error)

// sideIdentity is what a side says the release is: its lock's spec, or
// its build report's.
func sideIdentity(s *Side) (name, version, branch string, ok bool) {
	switch {
	case s.Lock != nil:
		return s.Lock.Spec.Name, s.Lock.Spec.Version, s.Lock.Spec.Branch, true
	case s.Report != nil:
		return s.Report.Spec.Name, s.Report.Spec.Version, s.Report.Spec.Branch, true
	}
	return "", "", "", false
}

func compareIdentity(d *Diff, old, new *Side) {
	n1, v1, b1, ok1 := sideIdentity(old)
	n2, v2, b2, ok2 := sideIdentity(new)
	if !ok1 || !ok2 {
		return
	}
	for _, f := range [][3]string{{"name", n1, n2}, {"version", v1, v2}, {"branch", b1, b2}} {
		if f[1] != f[2] {
			d.Identity = append(d.Identity, IdentityChange{Field: f[0], Old: f[1], New: f[2]})
		}
	}
}

// members are, per architecture and component, the names of the
// packages it holds with their NEVRA.
type members map[string]map[string]map[string]string

// membership reads a side's components: from its lock, or else from its
// build report (rootfs: the packages laid into the root filesystem; an
// extension: those laid into it beyond the root filesystem).
func membership(s *Side, fromLock bool) members {
	out := members{}
	add := func(arch, comp string, nevras []string) {
		if out[arch] == nil {
			out[arch] = map[string]map[string]string{}
		}
		set := map[string]string{}
		for _, n := range slices.Sorted(slices.Values(nevras)) {
			if p, ok := parseNEVRA(n); ok && set[p.Name] == "" {
				set[p.Name] = n // a multi-version name by its first NEVRA
			}
		}
		out[arch][comp] = set
	}
	if fromLock {
		for arch, a := range s.Lock.Architectures {
			for c, list := range a.Components {
				add(arch, c, list)
			}
		}
		return out
	}
	for arch, a := range s.Report.Architectures {
		add(arch, "rootfs", a.Packages)
		for name, e := range a.Extensions {
			add(arch, name, e.Packages)
		}
	}
	return out
}

// compareComponents lists the packages that joined or left each component,
// explained with why when it is not nil. Both sides' locks are compared
// when both have one, else both build reports.
func compareComponents(ctx context.Context, d *Diff, old, new *Side, why WhyFunc) {
	fromLock := old.Lock != nil && new.Lock != nil
	if !fromLock && (old.Report == nil || new.Report == nil) {
		return
	}
	a, b := membership(old, fromLock), membership(new, fromLock)
	for _, arch := range unionKeys(a, b) {
		for _, c := range unionKeys(a[arch], b[arch]) {
			was, is := a[arch][c], b[arch][c]
			cc := ComponentChange{Arch: arch, Component: c, Joined: []Member{}, Left: []Member{}}
			switch {
			case was == nil:
				cc.Change = "added"
			case is == nil:
				cc.Change = "removed"
			default:
				cc.Change = "changed"
			}
			for _, name := range slices.Sorted(maps.Keys(is)) {
				if _, ok := was[name]; !ok {
					cc.Joined = append(cc.Joined, Member{Name: name, NEVRA: is[name], Elsewhere: elsewhere(a[arch], c, name)})
				}
			}
			for _, name := range slices.Sorted(maps.Keys(was)) {
				if _, ok := is[name]; !ok {
					cc.Left = append(cc.Left, Member{Name: name, NEVRA: was[name], Elsewhere: elsewhere(b[arch], c, name)})
				}
			}
			if len(cc.Joined)+len(cc.Left) == 0 {
				continue
			}
			// A component added or removed as a whole is its own reason.
			if fromLock && why != nil && cc.Change == "changed" {
				explainMembers(ctx, why, memberSide{side: new, other: old, arch: arch, comp: c, joined: true, otherSet: was}, cc.Joined)
				explainMembers(ctx, why, memberSide{side: old, other: new, arch: arch, comp: c, otherSet: is}, cc.Left)
			}
			d.Components = append(d.Components, cc)
		}
	}
}

// unionKeys are the keys of both maps, sorted.
func unionKeys[V any](a, b map[string]V) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// elsewhere lists the components of an architecture other than comp
// holding a package of that name.
func elsewhere(arch map[string]map[string]string, comp, name string) []string {
	out := []string{}
	for _, c := range slices.Sorted(maps.Keys(arch)) {
		if _, ok := arch[c][name]; ok && c != comp {
			out = append(out, c)
		}
	}
	return out
}

// memberSide says whose members are explained: those of comp on side
// that joined it (or left it) against other, whose comp holds otherSet.
type memberSide struct {
	side, other *Side
	arch, comp  string
	joined      bool
	otherSet    map[string]string
}

// explainMembers gives each member (joined: of NEW, else of OLD) the chain
// that put it in the component on its side, and what the other side
// changed on it.
func explainMembers(ctx context.Context, why WhyFunc, ms memberSide, list []Member) {
	if len(list) == 0 {
		return
	}
	if ms.side.Lock.Resolution == nil {
		for i := range list {
			list[i].WhyNote = "the lock records no resolution (an older builder made it): lock again to explain"
		}
		return
	}
	nevras := make([]string, len(list))
	for i, m := range list {
		nevras[i] = m.NEVRA
	}
	paths, err := why(ctx, ms.side, ms.arch, ms.comp, nevras)
	for i := range list {
		m := &list[i]
		p, ok := paths[m.NEVRA]
		switch {
		case err != nil:
			m.WhyNote = "why not available: " + err.Error()
			continue
		case !ok:
			m.WhyNote = "no requirement chain from the component's requests"
			continue
		}
		c := &Chain{Request: p.Request, Steps: []Step{}}
		for _, e := range p.Edges {
			c.Steps = append(c.Steps, Step{From: e.From, Requirement: e.Requirement, Provider: e.Provider})
		}
		m.Why = c
		m.Because = because(c, ms.comp, ms.joined, ms.otherSet, ms.other.Lock.Resolution)
	}
}

// because names the first change the other side made on a chain: its
// request dropped (or new), or a package along it gone from the component
// (or new in it) or of another version.
func because(c *Chain, comp string, joined bool, other map[string]string, res *lock.Resolution) string {
	if res != nil && !slices.Contains(res.Requests[comp], c.Request) {
		if joined {
			return fmt.Sprintf("%s now requests %q", comp, c.Request)
		}
		return fmt.Sprintf("%s no longer requests %q", comp, c.Request)
	}
	for _, s := range c.Steps {
		p, ok := parseNEVRA(s.From)
		if s.From == "" || !ok {
			continue
		}
		n, held := other[p.Name]
		switch {
		case !held && joined:
			return fmt.Sprintf("%s, on the chain, joined %s too", s.From, comp)
		case !held:
			return fmt.Sprintf("%s, on the chain, left %s too", s.From, comp)
		case n != s.From && joined:
			return fmt.Sprintf("%s, on the chain, was %s", s.From, n)
		case n != s.From:
			return fmt.Sprintf("%s, on the chain, is now %s", s.From, n)
		}
	}
	return ""
}
