package build

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/build/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// assembly is the root filesystem of one architecture and what was done
// to make it.
type assembly struct {
	tree       *rootfs.Tree
	accounts   *rootfs.Accounts
	scriptlets []report.ScriptletOutcome
	triggers   []report.ScriptletOutcome
	drops      []report.DropResult
	policy     report.PolicyResult
	ghosts     []string
	packages   []string
	kernel     *kernelInfo
	libraries  []string // ld.so.cache entries, "soname => path"
}

// generated marks files the builder writes.
func generated(name string) report.Origin { return report.Origin{Generator: name} }

// assemble lays the rootfs and kernel components into one tree, performs
// scriptlet effects declaratively, writes the generated files, takes the
// kernel out, and applies the image policies.
func assemble(ctx context.Context, s *specs.Spec, arch string, a *lock.Arch, paths map[string]string, shuffle int64, lc *rootfs.LayCache, layOpts rootfs.LayOptions) (*assembly, error) {
	as := &assembly{tree: rootfs.New()}
	byNEVRA := map[string]*lock.Package{}
	for i := range a.Packages {
		byNEVRA[a.Packages[i].NEVRA] = &a.Packages[i]
	}
	as.packages = componentPackages(s, a, "rootfs", "kernel")
	var all []scripted
	layOrder := append([]string(nil), as.packages...)
	if shuffle != 0 {
		// builder repro lays packages in another order: the tree must not
		// depend on it.
		r := rand.New(rand.NewPCG(uint64(shuffle), 1))
		r.Shuffle(len(layOrder), func(i, j int) { layOrder[i], layOrder[j] = layOrder[j], layOrder[i] })
	}
	toLay := make([]rootfs.RPMToLay, len(layOrder))
	for i, nevra := range layOrder {
		lp := byNEVRA[nevra]
		if lp == nil {
			return nil, fmt.Errorf("component lists %s, which the lock does not pin", nevra)
		}
		toLay[i] = rootfs.RPMToLay{Path: paths[nevra], Origin: report.Origin{Package: nevra, RPMSHA256: lp.SHA256}}
	}
	results, err := as.tree.AddRPMs(ctx, toLay, layOpts, lc, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, err
	}
	// Nothing runs here, so nothing stops a package of another
	// architecture but this: every executable, library and module must
	// be code for the architecture's machine.
	ta, err := target.Lookup(arch)
	if err != nil {
		return nil, err
	}
	if err := as.tree.CheckMachines(ta.Machines()); err != nil {
		return nil, err
	}
	for i, nevra := range layOrder {
		for _, g := range results[i].Ghosts {
			as.ghosts = append(as.ghosts, nevra+": "+g)
		}
		all = append(all, scripted{nevra, results[i]})
	}

	// Scriptlets take effect in package order, whatever the lay order.
	sort.Slice(all, func(i, j int) bool { return all[i].pkg < all[j].pkg })

	if err := as.applyAccounts(s, all); err != nil {
		return nil, err
	}
	osr := osRelease(s)
	if err := as.tree.Replace(&rootfs.Node{Path: "/etc/os-release", Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root", Data: osr, Digest: digest.SHA256Hex(osr), Origin: generated("os-release")}); err != nil {
		return nil, err
	}
	// An empty machine-id: each node fills it at first boot.
	if err := as.tree.Replace(&rootfs.Node{Path: "/etc/machine-id", Kind: rootfs.KindFile, Mode: 0o444, User: "root", Group: "root", Data: []byte{}, Digest: digest.SHA256Hex(nil), Origin: generated("machine-id")}); err != nil {
		return nil, err
	}

	// The kernel leaves the tree as vmlinuz; its modules get indexes.
	if as.kernel, err = takeKernel(s, a, as.tree); err != nil {
		return nil, err
	}

	rules, err := dropRules(s.Image.Drop)
	if err != nil {
		return nil, err
	}
	as.drops = as.tree.Drop(rules)
	pol := rootfs.Policy{Setuid: set(s.Image.Setuid), StripSetuid: s.Image.StripSetuid, WorldWritable: set(s.Image.WorldWritable), AllowDevices: s.Image.Devices == "allow"}
	if as.policy, err = as.tree.Enforce(pol); err != nil {
		return nil, err
	}
	// The loader cache sees the final tree, as ldconfig would at the end
	// of an installation.
	cache, libs, err := as.tree.LdSoCache(rootfs.LdCacheOptions{Arch: arch})
	if err != nil {
		return nil, err
	}
	as.libraries = libs
	if err := as.tree.Replace(&rootfs.Node{Path: "/etc/ld.so.cache", Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root", Data: cache, Digest: digest.SHA256Hex(cache), Origin: generated("ldconfig")}); err != nil {
		return nil, err
	}
	sort.Strings(as.ghosts)
	return as, nil
}

// scripted is a laid package with its scriptlets and triggers.
type scripted struct {
	pkg     string
	results *rootfs.PackageResult
}

// applyAccounts makes the accounts: the base's own files, then the spec's
// entries, then the scriptlets' (in package order), and writes
// /etc/passwd, /etc/group and /etc/shadow.
func (as *assembly) applyAccounts(s *specs.Spec, all []scripted) error {
	var passwd, group []byte
	if n := as.tree.Get("/etc/passwd"); n != nil && n.Kind == rootfs.KindFile {
		passwd = n.Data
	}
	if n := as.tree.Get("/etc/group"); n != nil && n.Kind == rootfs.KindFile {
		group = n.Data
	}
	acc, err := rootfs.ParseAccounts(passwd, group)
	if err != nil {
		return err
	}
	for _, g := range s.Image.Groups {
		acc.AddGroup(g.Name, g.GID)
	}
	for _, u := range s.Image.Users {
		grp := u.Group
		if grp == "" {
			grp = u.Name
		}
		gid, ok := acc.Groups[grp]
		if !ok {
			gid = acc.AddGroup(grp, u.UID)
		}
		acc.AddUser(&rootfs.Account{Name: u.Name, UID: u.UID, GID: gid, Home: u.Home, Shell: u.Shell})
	}
	for _, sc := range all {
		for _, script := range sc.results.Scripts {
			as.scriptlets = append(as.scriptlets, rootfs.ApplyScriptlet(sc.pkg, script.Kind, script.Body, acc))
		}
		for _, tr := range sc.results.Triggers {
			as.triggers = append(as.triggers, report.ScriptletOutcome{Package: sc.pkg, Kind: "trigger on " + tr.Name, Pending: []string{strings.TrimSpace(tr.Body)}})
		}
	}
	as.accounts = acc
	pw, gr, sh := acc.Files()
	for _, f := range []struct {
		path string
		data []byte
		mode uint32
	}{{"/etc/passwd", pw, 0o644}, {"/etc/group", gr, 0o644}, {"/etc/shadow", sh, 0o400}} {
		if err := as.tree.Replace(&rootfs.Node{Path: f.path, Kind: rootfs.KindFile, Mode: f.mode, User: "root", Group: "root", Data: f.data, Digest: digest.SHA256Hex(f.data), Origin: generated("accounts")}); err != nil {
			return err
		}
	}
	return nil
}

func set(ss []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ss {
		m[s] = true
	}
	return m
}

func dropRules(rs []specs.DropRule) ([]rootfs.DropRule, error) {
	var out []rootfs.DropRule
	for _, r := range rs {
		dr := rootfs.DropRule{Name: r.Name}
		for _, p := range r.Paths {
			re, err := specs.GlobRegexp(p)
			if err != nil {
				return nil, fmt.Errorf("drop rule %s: %w", r.Name, err)
			}
			dr.Patterns = append(dr.Patterns, re)
		}
		out = append(out, dr)
	}
	return out, nil
}

var osValue = regexp.MustCompile(`^[A-Za-z0-9._:+-]*$`)

// osRelease renders /etc/os-release from the spec (os-release(5)).
func osRelease(s *specs.Spec) []byte {
	q := func(v string) string {
		if osValue.MatchString(v) {
			return v
		}
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`", "$", `\$`).Replace(v) + `"`
	}
	var b strings.Builder
	fmt.Fprintf(&b, "NAME=%s\n", q(s.Image.OS.Name))
	fmt.Fprintf(&b, "ID=%s\n", q(s.Image.OS.ID))
	fmt.Fprintf(&b, "VERSION_ID=%s\n", q(s.Version))
	fmt.Fprintf(&b, "PRETTY_NAME=%s\n", q(s.Image.OS.PrettyName))
	fmt.Fprintf(&b, "BUILD_ID=%s\n", q(s.Branch))
	if s.Image.OS.HomeURL != "" {
		fmt.Fprintf(&b, "HOME_URL=%s\n", q(s.Image.OS.HomeURL))
	}
	return []byte(b.String())
}
