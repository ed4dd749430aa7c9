// Package synth generates deterministic ALT-like package indexes for the
// resolver's tests and benchmarks (and scripts/bench-resolve.sh through
// internal/synthrepo): nothing of the builder uses it.
package synth

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// Repo returns a deterministic ALT-like x86_64+noarch index of n
// packages (n >= 1000 is sensible) for benchmarks and tests: sonames with
// set-versions, symbol-version provides, python3()/perl() modules, file
// dependencies on /bin/sh and interpreters, rpmlib requirements, -devel
// packages pinned to their library's EVR, ALT's self-conflict pins, a few
// conflicts, obsoletes, older duplicate builds, i586 strays and two kernel
// versions with a ZFS module pinned to the older one. Averages are close to
// a real ALT branch: about 7 provides and 12 requires per package.
func Repo(n int, seed int64) []*repo.Package {
	pkgs, _ := NodeOS(n, seed)
	return pkgs
}

// NodeOS returns Repo(n, seed) and the requests of a
// ~300-package node OS drawn from it. Every generated package requires only
// packages generated before it, and the node OS draws from the first few
// hundred, so its closure stays near 300 packages however large n is.
func NodeOS(n int, seed int64) ([]*repo.Package, []string) {
	g := &synth{rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), n: n}
	g.base()
	const core = 310 // generated packages the node OS draws from
	for i := 0; len(g.pkgs) < n; i++ {
		g.generate(i, i < core)
	}
	var reqs []string
	for _, p := range g.nodeOS {
		reqs = append(reqs, p.Name)
	}
	return g.pkgs, reqs
}

type synth struct {
	rng    *rand.Rand
	n      int
	pkgs   []*repo.Package
	nodeOS []*repo.Package
	seq    int

	// What later packages can require, split so the node OS's core only
	// requires core packages.
	libs, coreLibs     []synthLib
	pymods, corePymods []string
	plmods, corePlmods []string
	tools              []string
}

type synthLib struct {
	soname  string
	symbols []string // exported symbols, for set-versions; nil: unversioned
	nodes   []string // symbol-version provides ("libfoo.so.1(FOO_1.0)(64bit)")
	pkg     *repo.Package
}

var syllables = []string{"ba", "ke", "li", "mo", "nu", "ra", "si", "to", "vu", "ze", "da", "fi", "go", "hu", "ja", "py", "qe", "wo", "xa", "cy"}

// stem names the i-th generated component uniquely.
func stem(i int) string {
	var b strings.Builder
	i += len(syllables) // at least two syllables
	for i > 0 {
		b.WriteString(syllables[i%len(syllables)])
		i /= len(syllables)
	}
	return b.String()
}

const synthBuildTime = 1700000000

func (g *synth) label(ver string) (evr.EVR, int64) {
	g.seq++
	rel := fmt.Sprintf("alt%d", 1+g.rng.IntN(3))
	dt := fmt.Sprintf("p10+%d.%d.1.1", 300000+g.seq, 100*(1+g.rng.IntN(6)))
	if g.rng.IntN(20) == 0 {
		dt = fmt.Sprintf("sisyphus+%d.100.1.1", 290000+g.seq)
	}
	return evr.EVR{Version: ver, Release: rel, Disttag: dt}, int64(synthBuildTime + g.seq*37)
}

func (g *synth) version() string {
	return fmt.Sprintf("%d.%d.%d", g.rng.IntN(8), g.rng.IntN(30), g.rng.IntN(20))
}

// newPkg makes a package with the ALT index conventions: its own
// "Name = EVR" provide listed, rpmlib requirements, a location.
func (g *synth) newPkg(name, arch string, e evr.EVR, bt int64) *repo.Package {
	p := &repo.Package{
		Name: name, EVR: e, Arch: arch, BuildTime: bt, Semantics: evr.ALT,
		SourceRPM: name + "-" + e.Version + "-" + e.Release + ".src.rpm",
		Repo:      "http://synthetic.invalid/p10/branch/" + arch,
		Size:      int64(10000 + g.rng.IntN(5000000)),
	}
	p.Location = "RPMS.classic/" + name + "-" + e.Version + "-" + e.Release + "." + arch + ".rpm"
	p.FileSize = p.Size / 3
	p.Provides = append(p.Provides, repo.Dep{Name: name, Flags: evr.FlagEqual, Version: e.String()})
	p.Requires = append(p.Requires,
		repo.Dep{Name: "rpmlib(PayloadIsXz)", Flags: evr.FlagLess | evr.FlagEqual | evr.FlagRPMLib, Version: "5.2-1"},
		repo.Dep{Name: "rpmlib(SetVersions)", Flags: evr.FlagRPMLib})
	if g.rng.IntN(2) == 0 {
		p.Requires = append(p.Requires, repo.Dep{Name: "rpmlib(FileDigests)", Flags: evr.FlagLess | evr.FlagEqual | evr.FlagRPMLib, Version: "4.6.0-1"})
	}
	g.pkgs = append(g.pkgs, p)
	return p
}

func sdep(name string) repo.Dep { return repo.Dep{Name: name} }

func (g *synth) setDep(name string, flags uint32, symbols []string) repo.Dep {
	s, err := evr.EncodeSet(16, symbols)
	if err != nil {
		return sdep(name)
	}
	return repo.Dep{Name: name, Flags: flags, Version: s}
}

// subset picks k distinct symbols.
func (g *synth) subset(sym []string, k int) []string {
	out := make([]string, 0, k)
	for _, i := range g.rng.Perm(len(sym))[:min(k, len(sym))] {
		out = append(out, sym[i])
	}
	return out
}

// requireLib adds the requirements an ELF object linked to l gets.
func (g *synth) requireLib(p *repo.Package, l synthLib) {
	if l.symbols != nil && g.rng.IntN(3) > 0 {
		p.Requires = append(p.Requires, g.setDep(l.soname, evr.FlagGreater|evr.FlagEqual, g.subset(l.symbols, 1+g.rng.IntN(len(l.symbols)/2+1))))
	} else {
		p.Requires = append(p.Requires, sdep(l.soname))
	}
	for j := 0; j < 2 && len(l.nodes) > 0; j++ {
		p.Requires = append(p.Requires, sdep(l.nodes[g.rng.IntN(len(l.nodes))]))
	}
}

// elf adds the requirements of a dynamically linked x86_64 package.
func (g *synth) elf(p *repo.Package, libs []synthLib, k int) {
	p.Requires = append(p.Requires, sdep("rtld(GNU_HASH)"))
	g.requireLib(p, libs[0]) // libc
	for j := 0; j < 1+g.rng.IntN(4); j++ {
		p.Requires = append(p.Requires, sdep(fmt.Sprintf("libc.so.6(GLIBC_2.%d)(64bit)", 2+g.rng.IntN(33))))
	}
	for j := 0; j < k && len(libs) > 1; j++ {
		g.requireLib(p, libs[1+g.rng.IntN(len(libs)-1)])
	}
}

// base adds the packages everything stands on.
func (g *synth) base() {
	glibcSyms := make([]string, 120)
	for i := range glibcSyms {
		glibcSyms[i] = fmt.Sprintf("glibc_sym_%d", i)
	}
	e, bt := g.label("2.38.0")
	e.Epoch, e.HasEpoch = 6, true
	glibc := g.newPkg("glibc-core", "x86_64", e, bt)
	glibc.Provides = append(glibc.Provides,
		g.setDep("libc.so.6()(64bit)", evr.FlagEqual, glibcSyms),
		sdep("libm.so.6()(64bit)"), sdep("ld-linux-x86-64.so.2()(64bit)"), sdep("rtld(GNU_HASH)"))
	for v := 2; v <= 38; v++ {
		glibc.Provides = append(glibc.Provides, sdep(fmt.Sprintf("libc.so.6(GLIBC_2.%d)(64bit)", v)))
	}
	glibc.Files = []string{"/lib64/libc.so.6", "/sbin/ldconfig"}
	libc := synthLib{soname: "libc.so.6()(64bit)", symbols: glibcSyms, pkg: glibc}
	g.libs = append(g.libs, libc)
	g.coreLibs = append(g.coreLibs, libc)
	g.nodeOS = append(g.nodeOS, glibc)

	e, bt = g.label("4.4.23")
	sh := g.newPkg("sh", "x86_64", e, bt)
	sh.Files = []string{"/bin/sh", "/bin/bash"}
	g.elf(sh, g.coreLibs, 0)
	e, bt = g.label("5.2.21")
	bash := g.newPkg("bash", "x86_64", e, bt)
	bash.Requires = append(bash.Requires, sdep("sh"), sdep("/bin/sh"))
	bash.Files = []string{"/bin/bash5"}
	g.elf(bash, g.coreLibs, 0)
	g.nodeOS = append(g.nodeOS, sh, bash)

	e, bt = g.label("3.12.2")
	py := g.newPkg("python3", "x86_64", e, bt)
	py.Files = []string{"/usr/bin/python3"}
	for _, m := range []string{"os", "sys", "json", "re", "subprocess", "argparse", "logging", "collections"} {
		py.Provides = append(py.Provides, sdep("python3("+m+")"))
		g.pymods = append(g.pymods, "python3("+m+")")
	}
	g.corePymods = g.pymods
	g.elf(py, g.coreLibs, 0)

	e, bt = g.label("5.38.2")
	e.Epoch, e.HasEpoch = 1, true
	perl := g.newPkg("perl-base", "x86_64", e, bt)
	perl.Files = []string{"/usr/bin/perl"}
	for _, m := range []string{"strict.pm", "warnings.pm", "Exporter.pm", "Carp.pm", "File/Spec.pm"} {
		perl.Provides = append(perl.Provides, sdep("perl("+m+")"))
		g.plmods = append(g.plmods, "perl("+m+")")
	}
	g.corePlmods = g.plmods
	g.elf(perl, g.coreLibs, 0)
	g.nodeOS = append(g.nodeOS, py, perl)

	// Mail transport: two providers of one virtual name, one in the core.
	e, bt = g.label("3.8.4")
	postfix := g.newPkg("postfix", "x86_64", e, bt)
	postfix.Provides = append(postfix.Provides, sdep("MTA"), sdep("/usr/sbin/sendmail"))
	postfix.Conflicts = append(postfix.Conflicts, sdep("sendmail"))
	postfix.Requires = append(postfix.Requires, sdep("/bin/sh"))
	g.elf(postfix, g.coreLibs, 0)
	e, bt = g.label("8.17.2")
	sendmail := g.newPkg("sendmail", "x86_64", e, bt)
	sendmail.Provides = append(sendmail.Provides, sdep("MTA"), sdep("/usr/sbin/sendmail"))
	sendmail.Requires = append(sendmail.Requires, sdep("/bin/sh"))
	g.elf(sendmail, g.coreLibs, 0)
	e, bt = g.label("1.0.0")
	cron := g.newPkg("cronie", "x86_64", e, bt)
	cron.Requires = append(cron.Requires, sdep("MTA"), sdep("/bin/sh"))
	g.elf(cron, g.coreLibs, 0)
	g.nodeOS = append(g.nodeOS, cron)

	// Install-time tools every kernel pre-requires.
	var ktools []*repo.Package
	for _, name := range []string{"kmod", "mkinitrd", "bootloader-utils"} {
		e, bt = g.label(g.version())
		t := g.newPkg(name, "x86_64", e, bt)
		t.Requires = append(t.Requires, sdep("/bin/sh"))
		g.elf(t, g.coreLibs, 0)
		ktools = append(ktools, t)
	}
	// Two kernels; the ZFS module is built for the older one, each drm
	// module for its own kernel.
	var kernels []*repo.Package
	for i, kv := range []string{"6.6.30", "6.6.41"} {
		e, bt = g.label(kv)
		e.Epoch, e.HasEpoch = 2, true
		k := g.newPkg("kernel-image-std-def", "x86_64", e, bt)
		k.Files = []string{"/boot/vmlinuz-" + kv + "-std-def-alt1"}
		for _, t := range ktools {
			k.Requires = append(k.Requires, repo.Dep{Name: t.Name, Flags: evr.FlagPrereq})
		}
		pin := repo.Dep{Name: "kernel-image-std-def", Flags: evr.FlagEqual | evr.FlagPrereq, Version: fmt.Sprintf("2:%s-%s", kv, e.Release)}
		e2, bt2 := g.label(kv)
		drm := g.newPkg("kernel-modules-drm-std-def", "x86_64", evr.EVR{Epoch: 2, HasEpoch: true, Version: kv, Release: e.Release, Disttag: e2.Disttag}, bt2)
		drm.Requires = append(drm.Requires, pin)
		if i == 0 {
			e3, bt3 := g.label("2.2.4")
			zfs := g.newPkg("kernel-modules-zfs-std-def", "x86_64", e3, bt3)
			zfs.Requires = append(zfs.Requires, pin)
			g.nodeOS = append(g.nodeOS, zfs)
		}
		kernels = append(kernels, k)
	}
	g.nodeOS = append(g.nodeOS, kernels[0], ktools[0])
}

// generate adds the i-th generated component: one or more packages.
func (g *synth) generate(i int, core bool) {
	st := stem(i)
	libs, pymods, plmods := g.libs, g.pymods, g.plmods
	if core {
		libs, pymods, plmods = g.coreLibs, g.corePymods, g.corePlmods
	}
	var made []*repo.Package
	switch k := g.rng.IntN(100); {
	case k < 38: // a shared library, sometimes with a -devel package
		made = g.library(st, core, libs)
	case k < 62: // a program
		made = g.program(i, st, core, libs)
	case k < 80: // a python module
		made = g.pythonModule(st, core, pymods)
	case k < 92: // a perl module
		made = g.perlModule(st, core, plmods)
	default: // data or documentation for an earlier program
		made = g.dataPackage(st, libs)
	}
	// An older build of some packages (a multi-version index, or a package
	// copied from Sisyphus).
	if g.rng.IntN(30) == 0 {
		p := made[0]
		old := *p
		old.EVR.Release = "alt0"
		old.EVR.Disttag = fmt.Sprintf("p10+%d.100.1.1", 200000+g.seq)
		old.BuildTime -= 86400 * 90
		old.Location = strings.Replace(p.Location, "-"+p.EVR.Release+".", "-alt0.", 1)
		old.Provides = append([]repo.Dep{{Name: p.Name, Flags: evr.FlagEqual, Version: old.EVR.String()}}, p.Provides[1:]...)
		g.pkgs = append(g.pkgs, &old)
	}
	if core {
		for _, p := range made {
			if p.Arch != "i586" && !strings.HasSuffix(p.Name, "-devel") {
				g.nodeOS = append(g.nodeOS, p)
			}
		}
	}
}

// library makes a shared library, sometimes with a -devel package.
func (g *synth) library(st string, core bool, libs []synthLib) []*repo.Package {
	var made []*repo.Package
	e, bt := g.label(g.version())
	arch := "x86_64"
	if !core && g.rng.IntN(40) == 0 {
		arch = "i586" // strays of the biarch repository
	}
	p := g.newPkg("lib"+st, arch, e, bt)
	major := 1 + g.rng.IntN(4)
	soname := fmt.Sprintf("lib%s.so.%d()(64bit)", st, major)
	l := synthLib{soname: soname, pkg: p}
	if g.rng.IntN(2) == 0 {
		l.symbols = make([]string, 8+g.rng.IntN(60))
		for j := range l.symbols {
			l.symbols[j] = fmt.Sprintf("%s_fn%d", st, j)
		}
		p.Provides = append(p.Provides, g.setDep(soname, evr.FlagEqual, l.symbols))
	} else {
		p.Provides = append(p.Provides, sdep(soname))
	}
	for v := 0; v < 4+g.rng.IntN(17); v++ {
		node := fmt.Sprintf("lib%s.so.%d(%s_%d.%d)(64bit)", st, major, strings.ToUpper(st), major, v)
		p.Provides = append(p.Provides, sdep(node))
		l.nodes = append(l.nodes, node)
	}
	p.Files = []string{fmt.Sprintf("/usr/lib64/lib%s.so.%d", st, major)}
	g.elf(p, libs, g.rng.IntN(5))
	made = append(made, p)
	if arch == "x86_64" {
		g.libs = append(g.libs, l)
		if core {
			g.coreLibs = append(g.coreLibs, l)
		}
		if !core && g.rng.IntN(3) == 0 {
			_, bt := g.label(e.Version)
			d := g.newPkg("lib"+st+"-devel", "x86_64", evr.EVR{Version: e.Version, Release: e.Release, Disttag: e.Disttag}, bt)
			d.Requires = append(d.Requires,
				repo.Dep{Name: p.Name, Flags: evr.FlagEqual, Version: e.Version + "-" + e.Release},
				sdep("/usr/bin/pkg-config"))
			d.Provides = append(d.Provides,
				repo.Dep{Name: "pkgconfig(" + st + ")", Flags: evr.FlagEqual, Version: e.Version},
				sdep("devel(lib"+st+"(64bit))"))
			made = append(made, d)
		}
	}
	return made
}

// program makes a program (a core one never gets a subpackage).
func (g *synth) program(i int, st string, core bool, libs []synthLib) []*repo.Package {
	var made []*repo.Package
	e, bt := g.label(g.version())
	p := g.newPkg(st, "x86_64", e, bt)
	p.Files = []string{"/usr/bin/" + st}
	g.elf(p, libs, 2+g.rng.IntN(5))
	if g.rng.IntN(5) < 2 {
		p.Requires = append(p.Requires, sdep("/bin/sh"))
	}
	if g.rng.IntN(10) == 0 {
		p.Provides = append(p.Provides, sdep("/usr/bin/"+st))
	}
	if g.rng.IntN(5) < 2 { // a Go program lists what it bundles
		for j := 0; j < 2+g.rng.IntN(11); j++ {
			p.Provides = append(p.Provides, sdep(fmt.Sprintf("bundled(golang(%s/pkg%d))", st, j)))
		}
	}
	if i > 10 && g.rng.IntN(50) == 0 && len(g.tools) > 0 {
		// A conflict with an unrelated program.
		p.Conflicts = append(p.Conflicts, sdep(g.tools[g.rng.IntN(len(g.tools))]+"-nonexistent"))
	}
	if g.rng.IntN(60) == 0 {
		p.Obsoletes = append(p.Obsoletes, repo.Dep{Name: st + "-legacy", Flags: evr.FlagLess, Version: e.Version})
	}
	if !core && g.rng.IntN(25) == 0 {
		// ALT's pin of subpackages of one build.
		self := repo.Dep{Name: st, Flags: evr.FlagEqual, Version: e.Version + "-" + e.Release}
		sub := g.newPkg(st+"-common", "noarch", e, bt)
		for _, q := range []*repo.Package{p, sub} {
			q.Conflicts = append(q.Conflicts,
				repo.Dep{Name: st, Flags: evr.FlagLess, Version: self.Version},
				repo.Dep{Name: st, Flags: evr.FlagGreater, Version: self.Version})
		}
		sub.Requires = append(sub.Requires, self)
		p.Requires = append(p.Requires, repo.Dep{Name: sub.Name, Flags: evr.FlagEqual, Version: self.Version})
		made = append(made, sub)
	}
	g.tools = append(g.tools, st)
	made = append(made, p)
	return made
}

// pythonModule makes a python module.
func (g *synth) pythonModule(st string, core bool, pymods []string) []*repo.Package {
	var made []*repo.Package
	e, bt := g.label(g.version())
	p := g.newPkg("python3-module-"+st, "noarch", e, bt)
	var mods []string
	for j := 0; j < 6+g.rng.IntN(21); j++ {
		m := "python3(" + st + ")"
		if j > 0 {
			m = fmt.Sprintf("python3(%s.sub%d)", st, j)
		}
		p.Provides = append(p.Provides, sdep(m))
		mods = append(mods, m)
	}
	p.Requires = append(p.Requires, sdep("python3"), repo.Dep{Name: "python3", Flags: evr.FlagGreater | evr.FlagEqual, Version: "3.12"}, sdep("/usr/bin/python3"))
	for j := 0; j < 3+g.rng.IntN(7); j++ {
		p.Requires = append(p.Requires, sdep(pymods[g.rng.IntN(len(pymods))]))
	}
	p.Files = []string{"/usr/lib/python3/site-packages/" + st + "/__init__.py"}
	g.pymods = append(g.pymods, mods...)
	if core {
		g.corePymods = append(g.corePymods, mods...)
	}
	made = append(made, p)
	return made
}

// perlModule makes a perl module.
func (g *synth) perlModule(st string, core bool, plmods []string) []*repo.Package {
	var made []*repo.Package
	e, bt := g.label(g.version())
	name := strings.ToUpper(st[:1]) + st[1:]
	p := g.newPkg("perl-"+name, "noarch", e, bt)
	var mods []string
	for j := 0; j < 2+g.rng.IntN(11); j++ {
		m := fmt.Sprintf("perl(%s/M%d.pm)", name, j)
		p.Provides = append(p.Provides, sdep(m))
		mods = append(mods, m)
	}
	p.Requires = append(p.Requires, sdep("perl(strict.pm)"), sdep("perl(warnings.pm)"),
		repo.Dep{Name: "perl-base", Flags: evr.FlagGreater | evr.FlagEqual, Version: "1:5.36"})
	for j := 0; j < 3+g.rng.IntN(6); j++ {
		p.Requires = append(p.Requires, sdep(plmods[g.rng.IntN(len(plmods))]))
	}
	g.plmods = append(g.plmods, mods...)
	if core {
		g.corePlmods = append(g.corePlmods, mods...)
	}
	made = append(made, p)
	return made
}

// dataPackage makes data or documentation for an earlier program.
func (g *synth) dataPackage(st string, libs []synthLib) []*repo.Package {
	var made []*repo.Package
	e, bt := g.label(g.version())
	p := g.newPkg(st+"-data", "noarch", e, bt)
	p.Files = []string{"/usr/share/" + st + "/data"}
	p.Provides = append(p.Provides, sdep(st+"-data-files"))
	p.Requires = append(p.Requires, sdep("/bin/sh"))
	if len(libs) > 2 {
		p.Requires = append(p.Requires, sdep(libs[1+g.rng.IntN(len(libs)-1)].soname))
	}
	made = append(made, p)
	return made
}
