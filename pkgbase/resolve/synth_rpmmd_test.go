package resolve

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve/internal/synth"
)

// TestSyntheticRPMMDRoundTrip: the synthetic rpm-md repository reads back
// as exactly the packages written (the benchmark's premise), and the node
// OS resolves the same from them, from the repository, and from the
// repository through the parsed-index cache, cold and warm.
func TestSyntheticRPMMDRoundTrip(t *testing.T) {
	// The benchmark's 20,000 packages end to end; the loader's
	// concurrency (primary and filelists side by side, the index cache's
	// writers) is pkgbase/repo's tests', under -race.
	testutil.NoRace(t)
	n := 20000
	if testing.Short() {
		n = 3000
	}
	pkgs, reqs := synth.RPMMD(n, 1)
	dir := t.TempDir()
	if err := repo.WriteRPMMD(dir, pkgs, repo.RPMMDWriteOptions{}); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	ld, err := repo.Load(context.Background(), dir, repo.AnyOptions{InsecureSkipVerify: true, IndexCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if !ld.FullFiles || len(ld.Packages) != len(pkgs) {
		t.Fatalf("loaded %d of %d packages (full files %v)", len(ld.Packages), len(pkgs), ld.FullFiles)
	}
	want := make([]*repo.Package, len(pkgs))
	for i, p := range pkgs {
		q := *p
		q.Repo = ld.URL
		if q.Files == nil {
			q.Files = []string{} // filelists.xml lists none
		}
		want[i] = &q
	}
	slices.SortStableFunc(want, func(a, b *repo.Package) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := strings.Compare(a.VR(), b.VR()); c != 0 {
			return c
		}
		if c := strings.Compare(a.Arch, b.Arch); c != 0 {
			return c
		}
		return strings.Compare(a.Location, b.Location)
	})
	for i := range want {
		if !reflect.DeepEqual(ld.Packages[i], want[i]) {
			t.Fatalf("package %d:\n got %+v\nwant %+v", i, ld.Packages[i], want[i])
		}
	}

	direct, err := Resolve(pkgs, reqs, rpmmdNodeOSOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(direct.Packages) < 250 {
		t.Fatalf("closure of %d packages", len(direct.Packages))
	}
	for what, c := range map[string]string{"no cache": "", "cold": t.TempDir(), "warm": cache} {
		res, _ := loadAndResolveRPMMD(t, dir, reqs, c)
		if g, w := names(res), names(direct); !slices.Equal(g, w) {
			t.Fatalf("%s: resolved %d packages, directly %d", what, len(g), len(w))
		}
	}
}
