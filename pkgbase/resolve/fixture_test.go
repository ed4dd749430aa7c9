package resolve

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// altFixture is a real p10 index (component checkinstall), copied into the
// project (testdata/fixtures/README.md).
const altFixture = "../../testdata/fixtures/alt/pkglist.checkinstall.xz"

func loadALTFixture(t *testing.T) []*repo.Package {
	t.Helper()
	f, err := os.Open(altFixture)
	if errors.Is(err, fs.ErrNotExist) {
		testutil.Missing(t, "fixture "+altFixture)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := repo.Decompress(altFixture, f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var pkgs []*repo.Package
	for {
		h, err := rpmhdr.ReadHeader(r)
		if errors.Is(err, rpmhdr.ErrNoMoreHeaders) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p, err := repo.PackageFromHeader(h, evr.ALT)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) != 14 {
		t.Fatalf("%d packages in the fixture, want 14", len(pkgs))
	}
	return pkgs
}

// The checkinstall component alone cannot install a kernel check: the
// kernel build it is pinned to (by disttag) lives in classic, and so do
// the tools its pre-requirement needs. Every reason is listed.
func TestALTFixtureExplains(t *testing.T) {
	pkgs := loadALTFixture(t)
	_, err := Resolve(pkgs, []string{"kernel-image-std-def-checkinstall"}, Options{Arch: "x86_64", TargetBranch: "p10"})
	var re *Error
	if !errors.As(err, &re) {
		t.Fatalf("want *Error, got %v", err)
	}
	t.Log(err)
	for _, want := range []string{
		"requested kernel-image-std-def-checkinstall -> kernel-image-std-def-checkinstall-2:5.10.253-alt1.x86_64 requires kernel-image-std-def = 2:5.10.253-alt1:p10+415595.100.2.1, which nothing provides",
		"requested kernel-image-std-def-checkinstall -> kernel-image-std-def-checkinstall-2:5.10.253-alt1.x86_64 requires rpm-pesign-checkinstall -> rpm-pesign-checkinstall-3-alt1.x86_64 requires alt-uefi-certs, which nothing provides",
		"requires /bin/sh, which nothing provides",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q", want)
		}
	}
}

// With the packages the component needs added from "classic", the real
// headers resolve: the disttag pin selects one of two kernel builds of the
// same version, and rpmlib(PosttransFiletriggers) (no RPMLIB flag) is
// internal.
func TestALTFixtureResolves(t *testing.T) {
	pkgs := loadALTFixture(t)
	stub := func(name, label string, provides ...string) *repo.Package {
		p := pk(name, label, "x86_64", prov(provides...))
		p.Semantics = evr.ALT
		return p
	}
	pkgs = append(pkgs,
		stub("kernel-image-std-def", "2:5.10.253-alt1:p10+415595.100.2.1"),
		stub("kernel-image-std-def", "2:5.10.253-alt1:p10+415000.100.1.1"),
		stub("sh", "4.4.23-alt1:p10+1.1.1.1"),
	)
	pkgs[len(pkgs)-1].Files = []string{"/bin/sh"}
	for _, n := range []string{"alt-uefi-certs", "openssl", "sbsigntools", "binutils", "coreutils", "findutils", "grep"} {
		pkgs = append(pkgs, stub(n, "1-alt1:p10+1.1.1.1"))
	}
	res, err := Resolve(pkgs, []string{"kernel-image-std-def-checkinstall"}, Options{Arch: "x86_64", TargetBranch: "p10"})
	if err != nil {
		t.Fatal(err)
	}
	var kernel *repo.Package
	for _, p := range res.Packages {
		if p.Name == "kernel-image-std-def" {
			kernel = p
		}
	}
	if kernel == nil || kernel.EVR.Disttag != "p10+415595.100.2.1" {
		t.Fatalf("kernel %v, want the p10+415595.100.2.1 build; got %v", kernel, names(res))
	}
	if len(res.Packages) != 11 {
		t.Errorf("%d packages: %v", len(res.Packages), names(res))
	}
}
