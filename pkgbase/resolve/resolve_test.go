package resolve

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// pkgOpt edits a test package.
type pkgOpt func(*repo.Package)

// deps parses "name", "name OP version" or "/path" entries.
func deps(s []string) []repo.Dep {
	var out []repo.Dep
	for _, x := range s {
		q, err := parseRequest(x)
		if err != nil {
			panic(err)
		}
		out = append(out, q.dep)
	}
	return out
}

func prov(s ...string) pkgOpt {
	return func(p *repo.Package) { p.Provides = append(p.Provides, deps(s)...) }
}
func req(s ...string) pkgOpt {
	return func(p *repo.Package) { p.Requires = append(p.Requires, deps(s)...) }
}
func conf(s ...string) pkgOpt {
	return func(p *repo.Package) { p.Conflicts = append(p.Conflicts, deps(s)...) }
}
func obs(s ...string) pkgOpt {
	return func(p *repo.Package) { p.Obsoletes = append(p.Obsoletes, deps(s)...) }
}
func files(s ...string) pkgOpt {
	return func(p *repo.Package) { p.Files = append(p.Files, s...) }
}
func buildTime(t int64) pkgOpt   { return func(p *repo.Package) { p.BuildTime = t } }
func sem(s evr.Semantics) pkgOpt { return func(p *repo.Package) { p.Semantics = s } }
func inRepo(r string) pkgOpt     { return func(p *repo.Package) { p.Repo = r } }
func rawDep(d repo.Dep) pkgOpt   { return func(p *repo.Package) { p.Requires = append(p.Requires, d) } }

// pk makes a package "name" with label "E:V-R:DISTTAG" and arch.
func pk(name, label, arch string, opts ...pkgOpt) *repo.Package {
	p := &repo.Package{Name: name, EVR: evr.Parse(label), Arch: arch, Repo: "test", Location: name + "-" + label + "." + arch + ".rpm"}
	for _, o := range opts {
		o(p)
	}
	return p
}

func names(res *Result) []string {
	var out []string
	for _, p := range res.Packages {
		out = append(out, p.NEVRA())
	}
	return out
}

type tcase struct {
	name    string
	pkgs    []*repo.Package
	reqs    []string
	opts    Options
	want    []string // NEVRAs in result order
	wantErr []string // substrings of the error, when it must fail
}

func runCases(t *testing.T, cases []tcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.Arch == "" {
				tc.opts.Arch = "x86_64"
			}
			res, err := Resolve(tc.pkgs, tc.reqs, tc.opts)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("want error, got %v", names(res))
				}
				var re *Error
				if !errors.As(err, &re) {
					t.Fatalf("error %v is not an *Error", err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not contain %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(res); !slices.Equal(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
			// The same input in any order resolves the same way.
			rng := rand.New(rand.NewPCG(1, 2))
			for range 5 {
				pk := slices.Clone(tc.pkgs)
				rng.Shuffle(len(pk), func(i, j int) { pk[i], pk[j] = pk[j], pk[i] })
				rq := slices.Clone(tc.reqs)
				rng.Shuffle(len(rq), func(i, j int) { rq[i], rq[j] = rq[j], rq[i] })
				res2, err := Resolve(pk, rq, tc.opts)
				if err != nil {
					t.Fatalf("shuffled: %v", err)
				}
				if got := names(res2); !slices.Equal(got, tc.want) {
					t.Fatalf("shuffled: got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestBasics(t *testing.T) {
	runCases(t, []tcase{
		{
			name: "chain",
			pkgs: []*repo.Package{
				pk("app", "1.0-alt1", "x86_64", req("libfoo.so.1()(64bit)")),
				pk("libfoo", "1.2-alt1", "x86_64", prov("libfoo.so.1()(64bit)"), req("glibc-core")),
				pk("glibc-core", "2.32-alt5", "x86_64"),
				pk("unrelated", "1-alt1", "x86_64"),
			},
			reqs: []string{"app"},
			want: []string{"app-1.0-alt1.x86_64", "glibc-core-2.32-alt5.x86_64", "libfoo-1.2-alt1.x86_64"},
		},
		{
			name: "request by provide and by path",
			pkgs: []*repo.Package{
				pk("bash", "5.2-alt1", "x86_64", files("/bin/bash", "/bin/sh")),
				pk("python3", "3.12-alt1", "x86_64", prov("python3(json)")),
			},
			reqs: []string{"/bin/sh", "python3(json)"},
			want: []string{"bash-5.2-alt1.x86_64", "python3-3.12-alt1.x86_64"},
		},
		{
			name: "request with version",
			pkgs: []*repo.Package{
				pk("foo", "1.0-alt1", "x86_64"),
				pk("foo", "2.0-alt1", "x86_64"),
				pk("foo", "3.0-alt1", "x86_64"),
			},
			reqs: []string{"foo < 3"},
			want: []string{"foo-2.0-alt1.x86_64"},
		},
		{
			name: "request operator without spaces",
			pkgs: []*repo.Package{pk("foo", "1.0-alt1", "x86_64"), pk("foo", "2.0-alt1", "x86_64")},
			reqs: []string{"foo<=1.0-alt1"},
			want: []string{"foo-1.0-alt1.x86_64"},
		},
		{
			name: "rpmlib requirements are internal",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64",
					req("rpmlib(SetVersions)"),
					rawDep(repo.Dep{Name: "rpmlib(PayloadIsXz)", Flags: evr.FlagLess | evr.FlagEqual | evr.FlagRPMLib, Version: "5.2-1"}),
					rawDep(repo.Dep{Name: "rpmlib(Odd)", Flags: evr.FlagRPMLib})),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64"},
		},
		{
			name: "file dependencies: file list or provide",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "noarch", req("/bin/sh", "/usr/bin/env")),
				pk("sh", "4.4-alt1", "x86_64", files("/bin/sh")),
				pk("coreutils", "9.0-alt1", "x86_64", prov("/usr/bin/env")),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.noarch", "coreutils-9.0-alt1.x86_64", "sh-4.4-alt1.x86_64"},
		},
		{
			name: "requirement met by the package itself",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", prov("app-data"), req("app-data", "/usr/bin/app"), files("/usr/bin/app")),
				pk("other", "1-alt1", "x86_64", prov("app-data")),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64"},
		},
		{
			name: "implicit Name = EVR provide meets a versioned require",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("lib >= 2.0")),
				pk("lib", "1.9-alt1", "x86_64"),
				pk("lib", "2.1-alt1", "x86_64"),
				pk("lib", "2.2-alt1", "x86_64"),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "lib-2.2-alt1.x86_64"},
		},
		{
			name: "duplicate provide entry is not counted twice",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("lib = 2.0-alt1")),
				pk("lib", "2.0-alt1:p10+1.1.1.1", "x86_64", prov("lib = 2.0-alt1:p10+1.1.1.1")),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "lib-2.0-alt1.x86_64"},
		},
	})
}

func TestVersionSemantics(t *testing.T) {
	set3, _ := evr.EncodeSet(16, []string{"mama", "myla", "ramu"})
	set2, _ := evr.EncodeSet(16, []string{"myla", "mama"})
	setOther, _ := evr.EncodeSet(16, []string{"mama", "papa"})
	runCases(t, []tcase{
		{
			name: "ALT: alphabetic segment newer than numeric",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("foo > 1.0.1")),
				pk("foo", "1.0.a-alt1", "x86_64"),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "foo-1.0.a-alt1.x86_64"},
		},
		{
			name: "RPM: alphabetic segment older than numeric",
			pkgs: []*repo.Package{
				pk("app", "1-1", "x86_64", req("foo > 1.0.1"), sem(evr.RPM)),
				pk("foo", "1.0.a-1", "x86_64", sem(evr.RPM)),
			},
			reqs:    []string{"app"},
			opts:    Options{Semantics: evr.RPM},
			wantErr: []string{"requested app -> app-1-1.x86_64 requires foo > 1.0.1, which nothing provides"},
		},
		{
			name: "ALT: release on the require alone never matches",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("bar = 1.0-alt1")),
				pk("baz", "1-alt1", "x86_64", prov("bar = 1.0")),
			},
			reqs:    []string{"app"},
			wantErr: []string{"requires bar = 1.0-alt1, which nothing provides"},
		},
		{
			name: "RPM: release on the require alone matches an EQUAL provide",
			pkgs: []*repo.Package{
				pk("app", "1-1", "x86_64", req("bar = 1.0-1"), sem(evr.RPM)),
				pk("baz", "1-1", "x86_64", prov("bar = 1.0"), sem(evr.RPM)),
			},
			reqs: []string{"app"},
			opts: Options{Semantics: evr.RPM},
			want: []string{"app-1-1.x86_64", "baz-1-1.x86_64"},
		},
		{
			name: "ALT: disttag pins one build",
			pkgs: []*repo.Package{
				pk("mod", "1-alt1", "x86_64", req("kern = 2:5.10-alt1:p10+200.1.1.1")),
				pk("kern", "2:5.10-alt1:p10+100.1.1.1", "x86_64", buildTime(200)),
				pk("kern", "2:5.10-alt1:p10+200.1.1.1", "x86_64", buildTime(100)),
			},
			reqs: []string{"mod"},
			want: []string{"kern-2:5.10-alt1.x86_64", "mod-1-alt1.x86_64"},
		},
		{
			name: "ALT: epoch on the provide alone is promoted",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("kern >= 5.10")),
				pk("kern", "2:5.10-alt1", "x86_64"),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "kern-2:5.10-alt1.x86_64"},
		},
		{
			name: "unversioned provide meets a versioned require",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("python3(argparse) < 0")),
				pk("python3", "3.12-alt1", "x86_64", prov("python3(argparse)")),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "python3-3.12-alt1.x86_64"},
		},
		{
			name: "set-versions: superset provided",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("libpopt.so.0()(64bit) >= "+set2)),
				pk("libpopt", "1.19-alt1", "x86_64", prov("libpopt.so.0()(64bit) = "+set3)),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "libpopt-1.19-alt1.x86_64"},
		},
		{
			name: "set-versions: a missing symbol",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("libpopt.so.0()(64bit) >= "+setOther)),
				pk("libpopt", "1.19-alt1", "x86_64", prov("libpopt.so.0()(64bit) = "+set3)),
			},
			reqs:    []string{"app"},
			wantErr: []string{"requires libpopt.so.0()(64bit) >= " + setOther + ", which nothing provides"},
		},
		{
			name: "set-versions: the provider with the needed symbols wins",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("libpopt.so.0()(64bit) >= "+set3)),
				pk("libpopt", "1.19-alt1", "x86_64", prov("libpopt.so.0()(64bit) = "+set3)),
				pk("libpopt", "1.20-alt1", "x86_64", prov("libpopt.so.0()(64bit) = "+set2)),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "libpopt-1.19-alt1.x86_64"},
		},
	})
}

func TestConflictsAndObsoletes(t *testing.T) {
	runCases(t, []tcase{
		{
			name: "self-conflict of an ALT pinned build is ignored",
			pkgs: []*repo.Package{
				pk("X", "1.0-alt1", "x86_64", prov("X = 1.0-alt1"), conf("X < 1.0-alt1", "X > 1.0-alt1")),
				pk("X-sub", "1.0-alt1", "x86_64", req("X = 1.0-alt1"), conf("X < 1.0-alt1", "X > 1.0-alt1")),
			},
			reqs: []string{"X-sub"},
			want: []string{"X-1.0-alt1.x86_64", "X-sub-1.0-alt1.x86_64"},
		},
		{
			name: "pinned subpackage keeps its build",
			pkgs: []*repo.Package{
				pk("X", "1.0-alt1", "x86_64", conf("X-sub < 1.0-alt1", "X-sub > 1.0-alt1")),
				pk("X", "2.0-alt1", "x86_64", conf("X-sub < 2.0-alt1", "X-sub > 2.0-alt1")),
				pk("X-sub", "1.0-alt1", "x86_64", req("X = 1.0-alt1")),
			},
			reqs: []string{"X", "X-sub"},
			want: []string{"X-1.0-alt1.x86_64", "X-sub-1.0-alt1.x86_64"},
		},
		{
			name: "conflict steers the choice",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("MTA")),
				pk("mailx", "1-alt1", "x86_64"),
				pk("postfix", "3.8-alt1", "x86_64", prov("MTA"), conf("mailx")),
				pk("sendmail", "8.17-alt1", "x86_64", prov("MTA")),
			},
			reqs: []string{"app", "mailx"},
			want: []string{"app-1-alt1.x86_64", "mailx-1-alt1.x86_64", "sendmail-8.17-alt1.x86_64"},
		},
		{
			name: "conflict through provides",
			pkgs: []*repo.Package{
				pk("a", "1-alt1", "x86_64", conf("virt")),
				pk("b", "1-alt1", "x86_64", prov("virt")),
			},
			reqs:    []string{"a", "b"},
			wantErr: []string{"a-1-alt1.x86_64 conflicts with virt provided by b-1-alt1.x86_64; needed as requested a -> a-1-alt1.x86_64; and as requested b -> b-1-alt1.x86_64"},
		},
		{
			name: "conflict with chains",
			pkgs: []*repo.Package{
				pk("kubelet", "1.30-alt1", "x86_64", req("cri-runtime")),
				pk("crun", "1.1-alt1", "x86_64", prov("cri-runtime"), conf("runc")),
				pk("docker", "27-alt1", "x86_64", req("runc >= 1.1")),
				pk("runc", "1.2-alt1", "x86_64"),
			},
			reqs: []string{"kubelet", "docker"},
			wantErr: []string{
				"crun-1.1-alt1.x86_64 conflicts with runc provided by runc-1.2-alt1.x86_64",
				"needed as requested kubelet -> kubelet-1.30-alt1.x86_64 requires cri-runtime -> crun-1.1-alt1.x86_64",
				"and as requested docker -> docker-27-alt1.x86_64 requires runc >= 1.1 -> runc-1.2-alt1.x86_64",
			},
		},
		{
			name: "plain request replaced by the obsoleting package",
			pkgs: []*repo.Package{
				pk("old", "1-alt1", "x86_64"),
				pk("new", "1-alt1", "x86_64", obs("old < 2")),
			},
			reqs: []string{"old"},
			want: []string{"new-1-alt1.x86_64"},
		},
		{
			name: "versioned request keeps the obsoleted package",
			pkgs: []*repo.Package{
				pk("old", "1-alt1", "x86_64"),
				pk("new", "1-alt1", "x86_64", obs("old < 2")),
			},
			reqs: []string{"old = 1-alt1"},
			want: []string{"old-1-alt1.x86_64"},
		},
		{
			name: "obsoleting package that cannot be installed falls back",
			pkgs: []*repo.Package{
				pk("old", "1-alt1", "x86_64"),
				pk("new", "1-alt1", "x86_64", obs("old"), req("missing")),
			},
			reqs: []string{"old"},
			want: []string{"old-1-alt1.x86_64"},
		},
		{
			name: "obsoleted provider loses",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("libX")),
				pk("libX-compat", "1-alt1", "x86_64", prov("libX"), obs("libX-old")),
				pk("libX-old", "9-alt1", "x86_64", prov("libX")),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "libX-compat-1-alt1.x86_64"},
		},
		{
			name: "installed package excludes what it obsoletes",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("old")),
				pk("old", "1-alt1", "x86_64"),
				pk("new", "1-alt1", "x86_64", obs("old < 2")),
			},
			reqs:    []string{"app", "new"},
			wantErr: []string{"new-1-alt1.x86_64 obsoletes old < 2, matching old-1-alt1.x86_64"},
		},
		{
			name: "obsoletes match package names, not provides",
			pkgs: []*repo.Package{
				pk("a", "1-alt1", "x86_64", obs("virt")),
				pk("b", "1-alt1", "x86_64", prov("virt")),
			},
			reqs: []string{"a", "b"},
			want: []string{"a-1-alt1.x86_64", "b-1-alt1.x86_64"},
		},
		{
			name: "obsoletes on its own name are ignored",
			pkgs: []*repo.Package{
				pk("kernel-image-std-def", "2:6.1-alt1", "x86_64", obs("kernel-image-std-def < 2:6.1")),
				pk("kernel-image-std-def", "2:6.2-alt1", "x86_64", obs("kernel-image-std-def < 2:6.2")),
			},
			reqs: []string{"kernel-image-std-def = 2:6.1-alt1", "kernel-image-std-def = 2:6.2-alt1"},
			want: []string{"kernel-image-std-def-2:6.1-alt1.x86_64", "kernel-image-std-def-2:6.2-alt1.x86_64"},
		},
	})
}

func TestCandidates(t *testing.T) {
	runCases(t, []tcase{
		{
			name: "arch filter",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("libz")),
				pk("libz", "1.3-alt1", "i586"),
				pk("libz", "1.2-alt1", "x86_64"),
				pk("libz", "1.4-alt1", "aarch64"),
				pk("docs", "1-alt1", "noarch"),
			},
			reqs: []string{"app", "docs"},
			want: []string{"app-1-alt1.x86_64", "docs-1-alt1.noarch", "libz-1.2-alt1.x86_64"},
		},
		{
			name: "arch filter explains",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("libz")),
				pk("libz", "1.4-alt1", "aarch64"),
			},
			reqs:    []string{"app"},
			wantErr: []string{"requires libz, which nothing provides (not for x86_64: libz-1.4-alt1.aarch64)"},
		},
		{
			name: "excludes",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("MTA")),
				pk("postfix", "3.8-alt1", "x86_64", prov("MTA")),
				pk("postfix-ldap", "3.8-alt1", "x86_64", prov("MTA")),
				pk("sendmail", "8.17-alt1", "x86_64", prov("MTA")),
			},
			reqs: []string{"app"},
			opts: Options{Excludes: []string{"postfix*"}},
			want: []string{"app-1-alt1.x86_64", "sendmail-8.17-alt1.x86_64"},
		},
		{
			name: "excludes explain",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("MTA")),
				pk("postfix", "3.8-alt1", "x86_64", prov("MTA")),
			},
			reqs:    []string{"app", "postfix"},
			opts:    Options{Excludes: []string{"post?ix"}},
			wantErr: []string{"requires MTA, which nothing provides (excluded: postfix-3.8-alt1.x86_64)", "requested postfix: no package matches (excluded: postfix-3.8-alt1.x86_64)"},
		},
		{
			name: "file dependency without filelists",
			pkgs: []*repo.Package{
				pk("bar", "1-1", "x86_64", req("/usr/libexec/foo", "/usr/bin/foo"), inRepo("file:///r")),
				pk("foo", "1-1", "x86_64", files("/usr/bin/foo"), inRepo("file:///r")),
			},
			reqs: []string{"bar", "/usr/libexec/foo"},
			opts: Options{PartialFiles: map[string]string{"file:///r": "r"}},
			wantErr: []string{
				`requested bar -> bar-1-1.x86_64 requires /usr/libexec/foo, which nothing provides (the repository "r" has no filelists metadata, so only the files primary.xml lists are known)`,
				`requested /usr/libexec/foo: no package matches (the repository "r" has no filelists metadata, so only the files primary.xml lists are known)`,
			},
		},
	})
	// Primary lists every /usr/sbin file: no note for those.
	res, err := Resolve([]*repo.Package{pk("bar", "1-1", "x86_64", req("/usr/sbin/foo"), inRepo("file:///r"))}, []string{"bar"},
		Options{Arch: "x86_64", PartialFiles: map[string]string{"file:///r": "r"}})
	if err == nil || !strings.HasSuffix(err.Error(), "requires /usr/sbin/foo, which nothing provides") {
		t.Errorf("a file primary.xml would list: %v", err)
	}
	// Arch "" in the table means x86_64; check the empty arch directly.
	res, err = Resolve([]*repo.Package{pk("libz", "1.4-alt1", "aarch64")}, []string{"libz"}, Options{})
	if err != nil || len(res.Packages) != 1 {
		t.Fatalf("empty Arch: %v %v", res, err)
	}
}

func TestBestCandidate(t *testing.T) {
	runCases(t, []tcase{
		{
			name: "provider named as the requirement",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("zeta")),
				pk("alpha", "9-alt1", "x86_64", prov("zeta")),
				pk("zeta", "1-alt1", "x86_64"),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "zeta-1-alt1.x86_64"},
		},
		{
			name: "newest provider",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("virt")),
				pk("aa", "1-alt1", "x86_64", prov("virt")),
				pk("bb", "2-alt1", "x86_64", prov("virt")),
			},
			reqs: []string{"app"},
			want: []string{"app-1-alt1.x86_64", "bb-2-alt1.x86_64"},
		},
		{
			name: "epoch beats version",
			pkgs: []*repo.Package{
				pk("foo", "1:1.0-alt1", "x86_64"),
				pk("foo", "9.0-alt1", "x86_64"),
			},
			reqs: []string{"foo"},
			want: []string{"foo-1:1.0-alt1.x86_64"},
		},
		{
			name: "same version: target branch disttag wins",
			pkgs: []*repo.Package{
				pk("foo", "1.0-alt1:sisyphus+300.1.1.1", "x86_64", buildTime(300), inRepo("a")),
				pk("foo", "1.0-alt1:p10+200.1.1.1", "x86_64", buildTime(200), inRepo("b")),
			},
			reqs: []string{"foo"},
			opts: Options{TargetBranch: "p10"},
			want: []string{"foo-1.0-alt1.x86_64"},
		},
		{
			name: "same version and branch: build time breaks the tie",
			pkgs: []*repo.Package{
				pk("foo", "1.0-alt1:p10+200.1.1.1", "x86_64", buildTime(100), inRepo("old")),
				pk("foo", "1.0-alt1:p10+201.1.1.1", "x86_64", buildTime(500), inRepo("new")),
			},
			reqs: []string{"foo"},
			opts: Options{TargetBranch: "p10"},
			want: []string{"foo-1.0-alt1.x86_64"},
		},
		{
			name: "already chosen provider is reused",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("virt")),
				pk("aa", "1-alt1", "x86_64", prov("virt")),
				pk("bb", "2-alt1", "x86_64", prov("virt")),
			},
			reqs: []string{"app", "aa"},
			want: []string{"aa-1-alt1.x86_64", "app-1-alt1.x86_64"},
		},
		{
			name: "minimal: a choice made redundant by a later one is dropped",
			pkgs: []*repo.Package{
				pk("top", "1-alt1", "x86_64", req("X", "Z")),
				pk("a", "1-alt1", "x86_64", prov("X")),
				pk("b", "0.1-alt1", "x86_64", prov("X")),
				pk("c", "1-alt1", "x86_64", prov("Z"), req("b")),
				pk("d", "0.1-alt1", "x86_64", prov("Z")),
			},
			reqs: []string{"top"},
			want: []string{"b-0.1-alt1.x86_64", "c-1-alt1.x86_64", "top-1-alt1.x86_64"},
		},
		{
			name: "minimal: alternative pulled in by the choice itself",
			pkgs: []*repo.Package{
				pk("top", "1-alt1", "x86_64", req("X")),
				pk("a", "2-alt1", "x86_64", prov("X"), req("b")),
				pk("b", "1-alt1", "x86_64", prov("X")),
			},
			reqs: []string{"top"},
			want: []string{"b-1-alt1.x86_64", "top-1-alt1.x86_64"},
		},
		{
			name: "noarch and arch of one name: one of them",
			pkgs: []*repo.Package{
				pk("foo", "1.0-alt1", "noarch"),
				pk("foo", "1.0-alt1", "x86_64"),
			},
			reqs: []string{"foo"},
			want: []string{"foo-1.0-alt1.noarch"},
		},
	})
}

func TestMultiVersion(t *testing.T) {
	kernels := func() []*repo.Package {
		return []*repo.Package{
			pk("kernel-image-std-def", "2:6.1.10-alt1:p10+100.1.1.1", "x86_64", req("kmod")),
			pk("kernel-image-std-def", "2:6.1.20-alt1:p10+200.1.1.1", "x86_64", req("kmod")),
			pk("kernel-modules-zfs-std-def", "2.2.4-alt1:p10+150.1.1.1", "x86_64",
				rawDep(repo.Dep{Name: "kernel-image-std-def", Flags: evr.FlagEqual | evr.FlagPrereq, Version: "2:6.1.10-alt1"})),
			pk("kmod", "31-alt1", "x86_64"),
			pk("bash", "5.2-alt1", "x86_64"),
		}
	}
	runCases(t, []tcase{
		{
			name: "module pins the older kernel, newer requested too",
			pkgs: kernels(),
			reqs: []string{"kernel-image-std-def = 2:6.1.20-alt1", "kernel-modules-zfs-std-def"},
			want: []string{"kernel-image-std-def-2:6.1.10-alt1.x86_64", "kernel-image-std-def-2:6.1.20-alt1.x86_64", "kernel-modules-zfs-std-def-2.2.4-alt1.x86_64", "kmod-31-alt1.x86_64"},
		},
		{
			name: "plain kernel request is met by the pinned one (as dnf)",
			pkgs: kernels(),
			reqs: []string{"kernel-image-std-def", "kernel-modules-zfs-std-def"},
			want: []string{"kernel-image-std-def-2:6.1.10-alt1.x86_64", "kernel-modules-zfs-std-def-2.2.4-alt1.x86_64", "kmod-31-alt1.x86_64"},
		},
		{
			name: "plain kernel request alone: newest",
			pkgs: kernels(),
			reqs: []string{"kernel-image-std-def"},
			want: []string{"kernel-image-std-def-2:6.1.20-alt1.x86_64", "kmod-31-alt1.x86_64"},
		},
		{
			name: "requested explicitly twice",
			pkgs: kernels(),
			reqs: []string{"kernel-image-std-def = 2:6.1.10-alt1", "kernel-image-std-def = 2:6.1.20-alt1"},
			want: []string{"kernel-image-std-def-2:6.1.10-alt1.x86_64", "kernel-image-std-def-2:6.1.20-alt1.x86_64", "kmod-31-alt1.x86_64"},
		},
		{
			name:    "not multi-version when the patterns say so",
			pkgs:    kernels(),
			reqs:    []string{"kernel-image-std-def = 2:6.1.10-alt1", "kernel-image-std-def = 2:6.1.20-alt1"},
			opts:    Options{MultiVersion: []string{}},
			wantErr: []string{"cannot install both kernel-image-std-def-2:6.1.10-alt1.x86_64 and kernel-image-std-def-2:6.1.20-alt1.x86_64: one version of kernel-image-std-def at a time"},
		},
		{
			name: "two builds of one kernel version cannot coexist",
			pkgs: []*repo.Package{
				pk("kernel-image-std-def", "2:6.1.10-alt1:p10+100.1.1.1", "x86_64"),
				pk("kernel-image-std-def", "2:6.1.10-alt1:p10+101.1.1.1", "x86_64"),
				pk("mod-a", "1-alt1", "x86_64", req("kernel-image-std-def = 2:6.1.10-alt1:p10+100.1.1.1")),
				pk("mod-b", "1-alt1", "x86_64", req("kernel-image-std-def = 2:6.1.10-alt1:p10+101.1.1.1")),
			},
			reqs:    []string{"mod-a", "mod-b"},
			wantErr: []string{"cannot install both kernel-image-std-def-2:6.1.10-alt1.x86_64 (p10+100.1.1.1, test) and kernel-image-std-def-2:6.1.10-alt1.x86_64 (p10+101.1.1.1, test)"},
		},
		{
			name: "other names: one version only",
			pkgs: []*repo.Package{
				pk("foo", "1-alt1", "x86_64"),
				pk("foo", "2-alt1", "x86_64"),
			},
			reqs:    []string{"foo = 1-alt1", "foo = 2-alt1"},
			wantErr: []string{"cannot install both foo-1-alt1.x86_64 and foo-2-alt1.x86_64: one version of foo at a time; needed as requested foo = 1-alt1 -> foo-1-alt1.x86_64; and as requested foo = 2-alt1 -> foo-2-alt1.x86_64"},
		},
		{
			name: "other names: dependency pins the older version",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("foo < 2")),
				pk("foo", "1-alt1", "x86_64"),
				pk("foo", "2-alt1", "x86_64"),
			},
			reqs: []string{"foo", "app"},
			want: []string{"app-1-alt1.x86_64", "foo-1-alt1.x86_64"},
		},
	})
}

func TestErrors(t *testing.T) {
	const kv = "2:5.10.253-alt1:p10+415595.100.2.1"
	runCases(t, []tcase{
		{
			name: "checkinstall pinned to a missing kernel build",
			pkgs: []*repo.Package{
				pk("kernel-image-std-def-checkinstall", "5.10.253-alt1:p10+415595.100.2.1", "x86_64", req("kernel-image-std-def = "+kv)),
				pk("kernel-image-std-def", "2:5.10.253-alt1:p10+415000.100.1.1", "x86_64"),
			},
			reqs: []string{"kernel-image-std-def-checkinstall"},
			wantErr: []string{
				"requested kernel-image-std-def-checkinstall -> kernel-image-std-def-checkinstall-5.10.253-alt1.x86_64 requires kernel-image-std-def = " + kv + ", which nothing provides",
			},
		},
		{
			name: "deep chain, several reasons",
			pkgs: []*repo.Package{
				pk("a", "1-alt1", "x86_64", req("b")),
				pk("b", "1-alt1", "x86_64", req("c", "d")),
				pk("c", "1-alt1", "x86_64", req("libmissing.so.1()(64bit)")),
				pk("d", "1-alt1", "x86_64", req("/usr/bin/missing")),
				pk("x", "1-alt1", "x86_64", req("y >= 2")),
				pk("y", "1-alt1", "x86_64"),
			},
			reqs: []string{"a", "x", "nosuch"},
			wantErr: []string{
				"cannot resolve, 4 problems:\n" +
					"  - requested a -> a-1-alt1.x86_64 requires b -> b-1-alt1.x86_64 requires c -> c-1-alt1.x86_64 requires libmissing.so.1()(64bit), which nothing provides\n" +
					"  - requested a -> a-1-alt1.x86_64 requires b -> b-1-alt1.x86_64 requires d -> d-1-alt1.x86_64 requires /usr/bin/missing, which nothing provides\n" +
					"  - requested nosuch: no package matches\n" +
					"  - requested x -> x-1-alt1.x86_64 requires y >= 2, which nothing provides",
			},
		},
		{
			name: "every alternative broken",
			pkgs: []*repo.Package{
				pk("app", "1-alt1", "x86_64", req("virt")),
				pk("p1", "1-alt1", "x86_64", prov("virt"), req("m1")),
				pk("p2", "1-alt1", "x86_64", prov("virt"), req("m2")),
			},
			reqs: []string{"app"},
			wantErr: []string{
				"requested app -> app-1-alt1.x86_64 requires virt -> p1-1-alt1.x86_64 requires m1, which nothing provides",
				"requested app -> app-1-alt1.x86_64 requires virt -> p2-1-alt1.x86_64 requires m2, which nothing provides",
			},
		},
	})
}

func TestBadInput(t *testing.T) {
	pkgs := []*repo.Package{pk("a", "1-alt1", "x86_64"), nil}
	for _, tc := range []struct {
		reqs []string
		opts Options
		want string
	}{
		{[]string{""}, Options{}, "empty request"},
		{[]string{"a b"}, Options{}, "want"},
		{[]string{"a <> 1"}, Options{}, "unknown operator"},
		{[]string{"a >="}, Options{}, "want \"name OP version\""},
		{[]string{"a"}, Options{Excludes: []string{"["}}, "exclude pattern"},
		{[]string{"a"}, Options{MultiVersion: []string{"("}}, "multi-version pattern"},
	} {
		_, err := Resolve(pkgs, tc.reqs, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %+v: got %v, want %q", tc.reqs, tc.opts, err, tc.want)
		}
		var re *Error
		if errors.As(err, &re) {
			t.Errorf("%q: bad input should not be an *Error", tc.reqs)
		}
	}
	// nil packages are skipped, an empty request list installs nothing.
	res, err := Resolve(pkgs, nil, Options{})
	if err != nil || len(res.Packages) != 0 {
		t.Fatalf("no requests: %v %v", res, err)
	}
}
