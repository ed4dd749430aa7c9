package rootfs

import (
	"cmp"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/nodeforge/builder/api/report"
)

// DropRule removes every path matching one of its patterns.
type DropRule struct {
	Name     string
	Patterns []*regexp.Regexp
}

// Drop applies the rules in order. A directory that matches is removed
// with everything below it; directories left empty by a rule are kept
// (packages own them).
func (t *Tree) Drop(rules []DropRule) []report.DropResult {
	out := make([]report.DropResult, 0, len(rules))
	for _, r := range rules {
		res := report.DropResult{Rule: r.Name}
		for _, p := range t.Paths() {
			n := t.nodes[p]
			if n == nil || p == "/" {
				continue // removed with its parent
			}
			for _, re := range r.Patterns {
				if re.MatchString(p) {
					before := t.Len()
					res.Bytes += t.Remove(p)
					res.Paths += before - t.Len()
					break
				}
			}
		}
		out = append(out, res)
	}
	return out
}

// Policy is what the image allows of special files.
type Policy struct {
	Setuid        map[string]bool // paths allowed to keep setuid/setgid
	StripSetuid   bool            // strip the bits elsewhere instead of failing
	WorldWritable map[string]bool
	AllowDevices  bool
	// Section names the spec section the rules come from in messages
	// ("image" when empty; "images.NAME" for a container image).
	Section string
}

// Enforce checks every node against the policy and returns every
// violation at once.
func (t *Tree) Enforce(p Policy) (report.PolicyResult, error) {
	res := report.PolicyResult{Setuid: []string{}, Stripped: []string{}, WorldWritable: []string{}, Capabilities: []string{}}
	var bad []string
	sec := cmp.Or(p.Section, "image")
	for _, n := range t.Nodes() {
		if n.Kind == KindSymlink {
			continue
		}
		if n.Mode&0o6000 != 0 {
			switch {
			case p.Setuid[n.Path]:
				res.Setuid = append(res.Setuid, n.Path)
			case p.StripSetuid:
				n.Mode &^= 0o6000
				res.Stripped = append(res.Stripped, n.Path)
			default:
				bad = append(bad, fmt.Sprintf("%s is setuid/setgid (mode %04o) from %s and not allowed by %s.setuid", n.Path, n.Mode, n.Origin, sec))
			}
		}
		if n.Mode&0o002 != 0 {
			sticky := n.Kind == KindDir && n.Mode&0o1000 != 0
			switch {
			case p.WorldWritable[n.Path]:
				res.WorldWritable = append(res.WorldWritable, n.Path)
			case sticky:
			default:
				bad = append(bad, fmt.Sprintf("%s is world-writable (mode %04o) from %s and not allowed by %s.world-writable", n.Path, n.Mode, n.Origin, sec))
			}
		}
		if (n.Kind == KindCharDev || n.Kind == KindBlockDev || n.Kind == KindFifo || n.Kind == KindSocket) && !p.AllowDevices {
			bad = append(bad, fmt.Sprintf("%s is a %s from %s; %s.devices is refuse", n.Path, n.Kind, n.Origin, sec))
		}
		if _, ok := n.Xattrs["security.capability"]; ok {
			res.Capabilities = append(res.Capabilities, n.Path)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return res, fmt.Errorf("image policy: %s", strings.Join(bad, "; "))
	}
	return res, nil
}
