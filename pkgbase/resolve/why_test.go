package resolve

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// whyBase has a package, libz, that is only a transitive dependency of the
// request app, with every kind of losing candidate beside it.
func whyBase() []*repo.Package {
	return []*repo.Package{
		pk("app", "1.0-alt1:p11+1", "x86_64", req("libmid")),
		pk("libmid", "2.0-alt1:p11+1", "x86_64", req("libz.so.1()(64bit)")),
		pk("libz", "1.3-alt1:p11+2", "x86_64", prov("libz.so.1()(64bit)")),
		pk("libz", "1.2-alt1:p11+1", "x86_64", prov("libz.so.1()(64bit)")),      // older
		pk("libz", "1.3-alt1:sisyphus+3", "x86_64", prov("libz.so.1()(64bit)")), // another branch
		pk("zlib-ng-compat", "1.0-alt1:p11+1", "x86_64", prov("libz.so.1()(64bit)")),
		pk("libz-evil", "1.0-alt1:p11+1", "x86_64", prov("libz.so.1()(64bit)"), conf("libmid")),
		pk("libz", "1.3-alt1:p11+2", "aarch64", prov("libz.so.1()(64bit)")),
		pk("libz-bad", "1.0-alt1:p11+1", "x86_64", prov("libz.so.1()(64bit)")),
	}
}

func TestWhy(t *testing.T) {
	pkgs := whyBase()
	opts := Options{Arch: "x86_64", Semantics: evr.ALT, TargetBranch: "p11", Excludes: []string{"*-bad"}}
	res, err := Resolve(pkgs, []string{"app"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	set := map[*repo.Package]bool{}
	for _, p := range res.Packages {
		set[p] = true
	}
	ans, err := Why(pkgs, []string{"app"}, func(p *repo.Package) bool { return set[p] }, "libz", opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(ans) != 1 || ans[0].Requested || len(ans[0].Paths) != 1 {
		t.Fatalf("answers: %+v", ans)
	}
	edges := ans[0].Paths[0].Edges
	var chain []string
	for _, e := range edges {
		chain = append(chain, e.From+" | "+e.Requirement+" | "+e.Provider+" | "+e.Provide)
	}
	want := []string{
		" | app | app-1.0-alt1.x86_64 | app = 1.0-alt1:p11+1",
		"app-1.0-alt1.x86_64 | libmid | libmid-2.0-alt1.x86_64 | libmid = 2.0-alt1:p11+1",
		"libmid-2.0-alt1.x86_64 | libz.so.1()(64bit) | libz-1.3-alt1.x86_64 | libz.so.1()(64bit)",
	}
	if !reflect.DeepEqual(chain, want) {
		t.Errorf("chain:\n got %q\nwant %q", chain, want)
	}
	reasons := map[string]string{}
	for _, c := range edges[2].Others {
		reasons[c.Package] = c.Reason
	}
	wantReasons := map[string]string{
		"libz-1.2-alt1.x86_64":           "older than 1.3-alt1:p11+2",
		"zlib-ng-compat-1.0-alt1.x86_64": "not needed: libz-1.3-alt1.x86_64 meets the requirement",
		"libz-evil-1.0-alt1.x86_64":      "conflicts with libmid-2.0-alt1.x86_64 (libmid)",
		"libz-1.3-alt1.aarch64":          "architecture aarch64, not x86_64 or noarch",
		"libz-bad-1.0-alt1.x86_64":       "excluded by the spec",
	}
	for p, r := range wantReasons {
		if reasons[p] != r {
			t.Errorf("%s lost for %q, want %q", p, reasons[p], r)
		}
	}
	// The sisyphus build of the same version shares the NEVRA: its
	// reason names the branch.
	if r := reasons["libz-1.3-alt1.x86_64"]; r != "same version from another branch (disttag sisyphus+3): p11's build is preferred" {
		t.Errorf("the other branch's build lost for %q", r)
	}
	if len(ans[0].RequiredBy) != 1 || ans[0].RequiredBy[0].From != "libmid-2.0-alt1.x86_64" {
		t.Errorf("required by: %+v", ans[0].RequiredBy)
	}

	// The input's order does not change the answer.
	shuffled := slices.Clone(pkgs)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	again, err := Why(shuffled, []string{"app"}, func(p *repo.Package) bool { return set[p] }, "libz", opts)
	if err != nil || !reflect.DeepEqual(again, ans) {
		t.Errorf("shuffled input: %v\n%+v\nwant %+v", err, again, ans)
	}

	// A requested package says so; one outside the set is an error.
	ans, err = Why(pkgs, []string{"app"}, func(p *repo.Package) bool { return set[p] }, "app", opts)
	if err != nil || !ans[0].Requested || len(ans[0].RequiredBy) != 0 {
		t.Errorf("app: %v %+v", err, ans)
	}
	_, err = Why(pkgs, []string{"app"}, func(p *repo.Package) bool { return set[p] }, "zlib-ng-compat", opts)
	if nf := (*NotInSetError)(nil); !errors.As(err, &nf) {
		t.Errorf("a package outside the set: %v", err)
	}
}
