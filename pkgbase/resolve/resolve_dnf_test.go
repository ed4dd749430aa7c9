package resolve

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// rpmSpec describes one package to build with rpmbuild.
type rpmSpec struct {
	name, version, release string
	epoch                  int    // 0: no Epoch tag
	arch                   string // x86_64, noarch or aarch64
	requires, provides     []string
	conflicts, obsoletes   []string
	files                  []string // created empty under the build root
}

func rs(name, vr, arch string, opts ...func(*rpmSpec)) rpmSpec {
	v, r, _ := strings.Cut(vr, "-")
	s := rpmSpec{name: name, version: v, release: r, arch: arch}
	if e, rest, ok := strings.Cut(v, ":"); ok {
		fmt.Sscan(e, &s.epoch)
		s.version = rest
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func sReq(d ...string) func(*rpmSpec) {
	return func(s *rpmSpec) { s.requires = append(s.requires, d...) }
}
func sProv(d ...string) func(*rpmSpec) {
	return func(s *rpmSpec) { s.provides = append(s.provides, d...) }
}
func sConf(d ...string) func(*rpmSpec) {
	return func(s *rpmSpec) { s.conflicts = append(s.conflicts, d...) }
}
func sObs(d ...string) func(*rpmSpec) {
	return func(s *rpmSpec) { s.obsoletes = append(s.obsoletes, d...) }
}
func sFiles(f ...string) func(*rpmSpec) {
	return func(s *rpmSpec) { s.files = append(s.files, f...) }
}

// dnfRepo is one repository shared by every scenario; names carry a
// scenario prefix so that scenarios do not interact.
var dnfRepo = []rpmSpec{
	// Versioned requires, several versions, epochs.
	rs("v-app", "1.0-1", "x86_64", sReq("v-lib >= 1.5", "v-lib < 3")),
	rs("v-lib", "1.0-1", "x86_64"),
	rs("v-lib", "2.0-1", "x86_64"),
	rs("v-lib", "3.0-1", "x86_64"),
	rs("v-ep", "1:1.0-1", "x86_64"),
	rs("v-ep", "2.0-1", "x86_64"),
	rs("v-rel", "1.0-1", "noarch", sReq("v-lib = 2.0-1")),

	// File dependencies: from filelists (not in primary), from a provide.
	rs("f-tool", "1.0-1", "x86_64", sReq("/usr/libexec/f-helper", "/bin/f-sh")),
	rs("f-helper", "1.0-1", "x86_64", sFiles("/usr/libexec/f-helper")),
	rs("f-shell", "1.0-1", "x86_64", sFiles("/bin/f-sh")),
	rs("f-alt", "2.0-1", "x86_64", sProv("/bin/f-sh")),

	// Conflicts, and ALT's self-conflict pin of one build's subpackages.
	rs("c-app", "1.0-1", "x86_64", sReq("c-MTA")),
	rs("c-postfix", "9.0-1", "x86_64", sProv("c-MTA"), sConf("c-mailx")),
	rs("c-sendmail", "8.17-1", "x86_64", sProv("c-MTA")),
	rs("c-mailx", "1.0-1", "x86_64"),
	rs("c-X", "1.0-1", "x86_64", sProv("c-X = 1.0-1"), sConf("c-X < 1.0-1", "c-X > 1.0-1")),
	rs("c-X", "2.0-1", "x86_64", sProv("c-X = 2.0-1"), sConf("c-X < 2.0-1", "c-X > 2.0-1")),
	rs("c-X-sub", "1.0-1", "noarch", sReq("c-X = 1.0-1"), sConf("c-X < 1.0-1", "c-X > 1.0-1")),

	// Obsoletes.
	rs("o-old", "1-1", "x86_64"),
	rs("o-new", "1-1", "x86_64", sObs("o-old < 2")),
	rs("o-user", "1-1", "x86_64", sReq("o-old")),
	rs("o-old2", "1-1", "x86_64"),
	rs("o-new2", "1-1", "x86_64", sObs("o-old2"), sReq("o-missing")),
	rs("o-virt", "1-1", "x86_64", sObs("o-vname")),
	rs("o-prov", "1-1", "x86_64", sProv("o-vname")),

	// Minimal closures: choices made redundant by later ones.
	rs("m-top", "1-1", "x86_64", sReq("m-X", "m-Z")),
	rs("m-a", "1-1", "x86_64", sProv("m-X")),
	rs("m-b", "1-1", "x86_64", sProv("m-X")),
	rs("m-c", "1-1", "x86_64", sProv("m-Z"), sReq("m-b")),
	rs("m-d", "1-1", "x86_64", sProv("m-Z")),
	rs("m-top2", "1-1", "x86_64", sReq("m-Y")),
	rs("m-e", "1-1", "x86_64", sProv("m-Y"), sReq("m-f")),
	rs("m-f", "1-1", "x86_64", sProv("m-Y")),

	// Architectures.
	rs("a-app", "1-1", "x86_64", sReq("a-lib")),
	rs("a-lib", "1.0-1", "aarch64"),
	rs("a-lib", "0.9-1", "x86_64"),
	rs("a-doc", "1-1", "noarch"),
	rs("a-arm", "1-1", "aarch64"),

	// Kernels side by side (dnf: installonlypkgs).
	rs("kernel-image-std-def", "2:6.1-1", "x86_64"),
	rs("kernel-image-std-def", "2:6.2-1", "x86_64"),
	rs("kernel-modules-zfs-std-def", "2.0-1", "x86_64", sReq("kernel-image-std-def = 2:6.1-1")),

	// Nothing provides.
	rs("n-app", "1-1", "x86_64", sReq("n-lib >= 2")),
	rs("n-lib", "1.0-1", "x86_64"),

	// Where dnf (libsolv) and our documented preference differ.
	rs("d-app", "1-1", "x86_64", sReq("d-zeta")),
	rs("d-zeta", "1-1", "x86_64"),
	rs("d-alpha", "1-1", "x86_64", sProv("d-zeta")),
	rs("d-app2", "1-1", "x86_64", sReq("d-virt")),
	rs("d-aa", "1-1", "x86_64", sProv("d-virt")),
	rs("d-bb", "2-1", "x86_64", sProv("d-virt")),
}

type dnfScenario struct {
	reqs        []string
	installonly string // dnf installonlypkgs and our MultiVersion (anchored)
	fail        bool   // both must refuse
	// Set when dnf's choice differs from ours by design (our preference
	// takes a provider named as the requirement, then the newest; libsolv
	// takes the alphabetically first name).
	dnf, ours []string
}

var dnfScenarios = []dnfScenario{
	{reqs: []string{"v-app"}},
	{reqs: []string{"v-lib"}},
	{reqs: []string{"v-lib < 2"}},
	{reqs: []string{"v-ep", "v-rel"}},
	{reqs: []string{"f-tool"}},
	{reqs: []string{"/usr/libexec/f-helper"}},
	{reqs: []string{"c-app"}},
	{reqs: []string{"c-app", "c-mailx"}},
	{reqs: []string{"c-postfix", "c-mailx"}, fail: true},
	{reqs: []string{"c-X", "c-X-sub"}},
	{reqs: []string{"o-old"}},
	{reqs: []string{"o-old = 1-1"}},
	{reqs: []string{"o-old2"}},
	{reqs: []string{"o-user"}},
	{reqs: []string{"o-user", "o-new"}, fail: true},
	{reqs: []string{"o-virt", "o-prov"}},
	{reqs: []string{"m-top"}},
	{reqs: []string{"m-top2"}},
	{reqs: []string{"a-app", "a-doc"}},
	{reqs: []string{"a-arm"}, fail: true},
	{reqs: []string{"kernel-image-std-def = 2:6.2-1", "kernel-modules-zfs-std-def"}, installonly: "kernel-image-std-def"},
	{reqs: []string{"kernel-image-std-def", "kernel-modules-zfs-std-def"}, installonly: "kernel-image-std-def"},
	{reqs: []string{"kernel-image-std-def"}, installonly: "kernel-image-std-def"},
	{reqs: []string{"kernel-image-std-def = 2:6.2-1", "kernel-modules-zfs-std-def"}, fail: true},
	{reqs: []string{"n-app"}, fail: true},
	{reqs: []string{"d-app"}, dnf: []string{"d-alpha-1-1.x86_64", "d-app-1-1.x86_64"}, ours: []string{"d-app-1-1.x86_64", "d-zeta-1-1.x86_64"}},
	{reqs: []string{"d-app2"}, dnf: []string{"d-aa-1-1.x86_64", "d-app2-1-1.x86_64"}, ours: []string{"d-app2-1-1.x86_64", "d-bb-2-1.x86_64"}},
}

// needTools skips (or, in CI, fails) when the oracle's tools are missing.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := os.Stat(tool); err != nil {
			testutil.Missing(t, tool+" (apt-get install rpm createrepo-c dnf)")
		}
	}
}

func TestAgainstDNF(t *testing.T) {
	testutil.Slow(t) // builds RPMs and runs dnf
	// The solver runs on one goroutine; rpmbuild and dnf take the time.
	testutil.NoRace(t)
	// dnf's script needs the system python (/usr/bin/python3), not
	// whatever python3 is first on PATH.
	needTools(t, "/usr/bin/rpmbuild", "/usr/bin/createrepo_c", "/usr/bin/dnf", "/usr/bin/python3")
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	repoDir := filepath.Join(dir, "repo")
	for _, d := range []string{home, repoDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Debian's rpm keeps its database under ~/.rpmdb; dnf wants the
	// standard place inside the install root.
	if err := os.WriteFile(filepath.Join(home, ".rpmmacros"), []byte("%_dbpath /var/lib/rpm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+home, "LC_ALL=C.UTF-8", "LANG=C.UTF-8")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	buildRPMs(ctx, t, dir, repoDir, env)
	if out, err := exec.CommandContext(ctx, "/usr/bin/createrepo_c", "-q", repoDir).CombinedOutput(); err != nil {
		t.Fatalf("createrepo_c: %v\n%s", err, out)
	}

	src, err := repo.NewSource(repoDir, repo.SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := repo.LoadRPMMD(ctx, src, repo.LoadOptions{Filelists: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != len(dnfRepo) {
		t.Fatalf("loaded %d packages, built %d", len(pkgs), len(dnfRepo))
	}

	cache := filepath.Join(dir, "cache")
	for i, sc := range dnfScenarios {
		t.Run(strings.Join(sc.reqs, ","), func(t *testing.T) {
			dnfGot, dnfErr := runDNF(ctx, t, env, repoDir, cache, filepath.Join(dir, fmt.Sprintf("root%d", i)), sc, i == 0)
			opts := Options{Arch: "x86_64", Semantics: evr.RPM, MultiVersion: []string{}}
			if sc.installonly != "" {
				opts.MultiVersion = []string{"^" + sc.installonly + "$"}
			}
			res, err := Resolve(pkgs, sc.reqs, opts)
			if sc.fail {
				if dnfErr == "" {
					t.Errorf("dnf installs %v, the scenario expects a failure", dnfGot)
				}
				if err == nil {
					t.Errorf("Resolve installs %v; dnf says:\n%s", dnfNames(res), dnfErr)
				} else {
					t.Logf("dnf: %s\nours: %v", dnfErr, err)
				}
				return
			}
			if dnfErr != "" {
				t.Fatalf("dnf failed:\n%s", dnfErr)
			}
			if err != nil {
				t.Fatalf("Resolve: %v (dnf installs %v)", err, dnfGot)
			}
			ours := dnfNames(res)
			if sc.dnf != nil {
				// A documented difference: check both sides still behave
				// as documented.
				if !slices.Equal(dnfGot, sc.dnf) {
					t.Errorf("dnf now installs %v, expected %v", dnfGot, sc.dnf)
				}
				if !slices.Equal(ours, sc.ours) {
					t.Errorf("Resolve installs %v, expected %v", ours, sc.ours)
				}
				return
			}
			if !slices.Equal(ours, dnfGot) {
				t.Errorf("Resolve: %v\ndnf:     %v", ours, dnfGot)
			}
		})
	}
}

// dnfNames formats a result the way dnf prints packages (epoch 0 hidden),
// sorted.
func dnfNames(res *Result) []string {
	var out []string
	for _, p := range res.Packages {
		v := p.EVR.Version + "-" + p.EVR.Release
		if p.EVR.Epoch != 0 {
			v = fmt.Sprintf("%d:%s", p.EVR.Epoch, v)
		}
		out = append(out, p.Name+"-"+v+"."+p.Arch)
	}
	slices.Sort(out)
	return out
}

// buildRPMs builds dnfRepo into repoDir, two rpmbuilds at a time.
func buildRPMs(ctx context.Context, t *testing.T, dir, repoDir string, env []string) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
		sem  = make(chan struct{}, 2)
	)
	for i, s := range dnfRepo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			top := filepath.Join(dir, "build", fmt.Sprint(i))
			spec := filepath.Join(top, s.name+".spec")
			if err := os.MkdirAll(top, 0o755); err == nil {
				err = os.WriteFile(spec, []byte(specText(s)), 0o644)
			}
			target := s.arch
			cmd := exec.CommandContext(ctx, "/usr/bin/rpmbuild", "-bb", "--quiet",
				"--define", "_topdir "+top,
				"--define", "_rpmdir "+repoDir,
				"--define", "_build_name_fmt %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm",
				// One build time for all: otherwise packages built a second
				// apart are not ties, and which one wins (here and in dnf)
				// depends on the machine's load.
				"--define", "use_source_date_epoch_as_buildtime 1",
				"--target", target, spec)
			cmd.Env = append(env[:len(env):len(env)], "SOURCE_DATE_EPOCH=1700000000")
			if out, err := cmd.CombinedOutput(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("rpmbuild %s: %v\n%s", s.name, err, out))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
}

func specText(s rpmSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Name: %s\nVersion: %s\nRelease: %s\n", s.name, s.version, s.release)
	if s.epoch != 0 {
		fmt.Fprintf(&b, "Epoch: %d\n", s.epoch)
	}
	b.WriteString("Summary: resolver oracle test package\nLicense: MIT\nAutoReqProv: no\n")
	if s.arch == "noarch" {
		b.WriteString("BuildArch: noarch\n")
	}
	for _, l := range []struct {
		tag  string
		deps []string
	}{{"Requires", s.requires}, {"Provides", s.provides}, {"Conflicts", s.conflicts}, {"Obsoletes", s.obsoletes}} {
		for _, d := range l.deps {
			fmt.Fprintf(&b, "%s: %s\n", l.tag, d)
		}
	}
	b.WriteString("%define debug_package %{nil}\n%description\ntest\n%install\n")
	for _, f := range s.files {
		fmt.Fprintf(&b, "mkdir -p %%{buildroot}%s\ntouch %%{buildroot}%s\n", filepath.Dir(f), f)
	}
	b.WriteString("%files\n")
	for _, f := range s.files {
		b.WriteString(f + "\n")
	}
	return b.String()
}

// runDNF asks dnf what it would install. It returns the sorted NEVRAs of
// the transaction, or dnf's error text when it refuses.
func runDNF(ctx context.Context, t *testing.T, env []string, repoDir, cache, root string, sc dnfScenario, refresh bool) ([]string, string) {
	t.Helper()
	args := []string{
		"--installroot=" + root, "--setopt=reposdir=/dev/null", "--setopt=cachedir=" + cache,
		"--setopt=install_weak_deps=False", "--nogpgcheck",
		"--repofrompath=r,file://" + repoDir, "--repo=r", "--forcearch=x86_64", "--releasever=1",
		"--setopt=installonlypkgs=" + sc.installonly,
	}
	if refresh {
		args = append(args, "--refresh") // a stale cache would hide packages
	}
	args = append(args, "--assumeno", "install")
	args = append(args, sc.reqs...)
	cmd := exec.CommandContext(ctx, "/usr/bin/dnf", args...)
	cmd.Env = env
	out, _ := cmd.CombinedOutput() // --assumeno always exits 1
	text := string(out)
	if i := strings.Index(text, "\nError:"); i >= 0 || strings.HasPrefix(text, "Error:") {
		return nil, strings.TrimSpace(text[max(i, 0):])
	}
	if strings.Contains(text, "No match for argument") {
		return nil, text
	}
	got := parseTransaction(text)
	if len(got) == 0 {
		t.Fatalf("no transaction in dnf's output:\n%s", text)
	}
	return got, ""
}

// parseTransaction reads the packages of dnf's "Installing" sections.
// Columns are name, arch, [epoch:]version-release, repository, size; long
// rows wrap, so the rows are read as one stream of fields.
func parseTransaction(text string) []string {
	var fields []string
	inTable, installing := false, false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Transaction Summary"):
			inTable = false
		case strings.HasPrefix(line, "====="):
		case strings.HasPrefix(line, " Package "):
			inTable = true
		case !inTable:
		case !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":"):
			installing = strings.HasPrefix(line, "Installing") || strings.HasPrefix(line, "Upgrading")
		case installing:
			fields = append(fields, strings.Fields(line)...)
		}
	}
	arches := map[string]bool{"x86_64": true, "noarch": true, "aarch64": true, "i686": true}
	var out []string
	for i := 0; i+3 < len(fields); i++ {
		if arches[fields[i+1]] && fields[i+3] == "r" {
			out = append(out, fields[i]+"-"+fields[i+2]+"."+fields[i+1])
			i += 3
		}
	}
	slices.Sort(out)
	return out
}
