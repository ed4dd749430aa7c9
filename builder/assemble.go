package builder

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
	"github.com/nodeforge/builder/builder/rootfs"
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

// layInputs are how packages are laid: the order's seed (builder repro
// shuffles it), the laid-package cache, and the laying options.
type layInputs struct {
	shuffle int64
	cache   *rootfs.LayCache
	opts    rootfs.LayOptions
}

// assemble lays the rootfs and kernel components into one tree, performs
// scriptlet effects declaratively, writes the generated files, takes the
// kernel out, and applies the image policies.
func assemble(ctx context.Context, s *specs.Spec, arch string, a *lock.Arch, paths map[string]string, lay layInputs) (*assembly, error) {
	as := &assembly{tree: rootfs.New()}
	as.packages = componentPackages(s, a, "rootfs", "kernel")
	all, ghosts, err := layLocked(ctx, as.tree, arch, a, as.packages, paths, lay)
	if err != nil {
		return nil, err
	}
	as.ghosts = ghosts
	if err := as.applyAccounts(s.Image.Users, s.Image.Groups, all); err != nil {
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

	pol := rootfs.Policy{Setuid: set(s.Image.Setuid), StripSetuid: s.Image.StripSetuid, WorldWritable: set(s.Image.WorldWritable), AllowDevices: s.Image.Devices == "allow"}
	if err := as.finish(arch, s.Image.Drop, pol); err != nil {
		return nil, err
	}
	sort.Strings(as.ghosts)
	return as, nil
}

// finish applies the drop rules and the policy to the tree, and writes
// the loader cache of the final tree, as ldconfig would at the end of an
// installation.
func (as *assembly) finish(arch string, drop []specs.DropRule, pol rootfs.Policy) error {
	rules, err := dropRules(drop)
	if err != nil {
		return err
	}
	as.drops = as.tree.Drop(rules)
	if as.policy, err = as.tree.Enforce(pol); err != nil {
		return err
	}
	cache, libs, err := as.tree.LdSoCache(rootfs.LdCacheOptions{Arch: arch})
	if err != nil {
		return err
	}
	as.libraries = libs
	return as.tree.Replace(&rootfs.Node{Path: "/etc/ld.so.cache", Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root", Data: cache, Digest: digest.SHA256Hex(cache), Origin: generated("ldconfig")})
}

// layLocked lays the locked packages nevras of a into tree (in a shuffled
// order when lay.shuffle is not 0: the tree must not depend on it), checks
// that every executable, library and module is code for arch's machine,
// and returns the laid packages in NEVRA order (scriptlets take effect in
// that order, whatever the lay order) with the ghosts they declared.
func layLocked(ctx context.Context, tree *rootfs.Tree, arch string, a *lock.Arch, nevras []string, paths map[string]string, lay layInputs) ([]scripted, []string, error) {
	byNEVRA := map[string]*lock.Package{}
	for i := range a.Packages {
		byNEVRA[a.Packages[i].NEVRA] = &a.Packages[i]
	}
	layOrder := append([]string(nil), nevras...)
	if lay.shuffle != 0 {
		r := rand.New(rand.NewPCG(uint64(lay.shuffle), 1))
		r.Shuffle(len(layOrder), func(i, j int) { layOrder[i], layOrder[j] = layOrder[j], layOrder[i] })
	}
	toLay := make([]rootfs.RPMToLay, len(layOrder))
	for i, nevra := range layOrder {
		lp := byNEVRA[nevra]
		if lp == nil {
			return nil, nil, fmt.Errorf("the lock lists %s, which it does not pin", nevra)
		}
		toLay[i] = rootfs.RPMToLay{Path: paths[nevra], Origin: report.Origin{Package: nevra, RPMSHA256: lp.SHA256}}
	}
	results, err := tree.AddRPMs(ctx, toLay, lay.opts, lay.cache, runtime.GOMAXPROCS(0))
	if err != nil {
		return nil, nil, err
	}
	// Nothing runs here, so nothing stops a package of another
	// architecture but this.
	ta, err := target.Lookup(arch)
	if err != nil {
		return nil, nil, err
	}
	if err := tree.CheckMachines(ta.Machines()); err != nil {
		return nil, nil, err
	}
	var all []scripted
	var ghosts []string
	for i, nevra := range layOrder {
		for _, g := range results[i].Ghosts {
			ghosts = append(ghosts, nevra+": "+g)
		}
		all = append(all, scripted{nevra, results[i]})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].pkg < all[j].pkg })
	return all, ghosts, nil
}

// scripted is a laid package with its scriptlets and triggers.
type scripted struct {
	pkg     string
	results *rootfs.PackageResult
}

// applyAccounts makes the accounts: the base's own files, then the spec's
// entries (users, groups), then the scriptlets' (in package order), and
// writes /etc/passwd, /etc/group and /etc/shadow.
func (as *assembly) applyAccounts(users []specs.User, groups []specs.Group, all []scripted) error {
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
	for _, g := range groups {
		acc.AddGroup(g.Name, g.GID)
	}
	for _, u := range users {
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
