package resolve

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve/internal/synth"
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

// ShortestEach keeps of Why's paths, for every package of a set, the
// first of the shortest (requests sorted): on a node OS, and where two
// requests reach a package in as many steps.
func TestShortestEachAgreesWithWhy(t *testing.T) {
	pkgs, reqs := synth.NodeOS(3000, 1)
	res, err := Resolve(pkgs, reqs, nodeOSOpts)
	if err != nil {
		t.Fatal(err)
	}
	if n := checkShortest(t, pkgs, reqs, res.Packages, nodeOSOpts); n == 0 {
		t.Error("no package is reached by two requests: not a test of the choice")
	}

	ties := []*repo.Package{
		pk("a", "1-alt1", "x86_64", req("c")),
		pk("b", "1-alt1", "x86_64", req("c")),
		pk("c", "1-alt1", "x86_64", req("d")),
		pk("d", "1-alt1", "x86_64"),
	}
	opts := Options{Arch: "x86_64", Semantics: evr.ALT}
	checkShortest(t, ties, []string{"b", "a", "d"}, ties, opts)
	got, err := ShortestEach(ties, []string{"b", "a", "d"}, func(*repo.Package) bool { return true }, []string{"c", "d"}, opts)
	if c, d := got["c-1-alt1.x86_64"], got["d-1-alt1.x86_64"]; err != nil || c.Request != "a" || len(c.Edges) != 2 || d.Request != "d" || len(d.Edges) != 1 {
		t.Errorf("c by the first request of two (sorted), d by its own: %v %+v", err, got)
	}
}

// checkShortest compares ShortestEach with the shortest of Why's paths for
// every package of set, and says how many packages have more than one.
func checkShortest(t *testing.T, pkgs []*repo.Package, reqs []string, set []*repo.Package, opts Options) int {
	t.Helper()
	in := map[*repo.Package]bool{}
	var nevras []string
	for _, p := range set {
		in[p] = true
		nevras = append(nevras, p.NEVRA())
	}
	inSet := func(p *repo.Package) bool { return in[p] }
	got, err := ShortestEach(pkgs, reqs, inSet, append(nevras, "nonesuch-1-1.x86_64"), opts)
	if err != nil {
		t.Fatal(err)
	}
	w, found, err := newWhy(pkgs, reqs, inSet, nevras, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Path{}
	var several int
	for _, v := range found {
		e := w.explain(v)
		for _, p := range e.Paths {
			if q, ok := want[e.Package]; !ok || len(p.Edges) < len(q.Edges) {
				want[e.Package] = p
			}
		}
		if len(e.Paths) > 1 {
			several++
		}
	}
	if len(want) < len(nevras)/2 {
		t.Fatalf("%d of %d packages reached", len(want), len(nevras))
	}
	if !reflect.DeepEqual(got, want) {
		for k := range want {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("%s:\n got %+v\nwant %+v", k, got[k], want[k])
			}
		}
		t.Errorf("%d answers, want %d", len(got), len(want))
	}
	return several
}
