package certification

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/attest/provenance"
	"github.com/nodeforge/builder/release"
)

// judged runs the audit's checks that need no store on a p11 release of
// these packages (with a reproduction compared, so that the only caveats
// are the packages' own).
func judged(t *testing.T, pol *release.Policy, disttags ...string) *Report {
	t.Helper()
	return judgedAgainst(t, pol, nil, nil, disttags...)
}

// judgedAgainst is judged with the release's report and the second
// build's given (nil: the same report, without compressors).
func judgedAgainst(t *testing.T, pol *release.Policy, released, reproduced *report.Report, disttags ...string) *Report {
	t.Helper()
	l := &lock.Lock{Spec: lock.SpecRef{Name: "p11", Branch: "p11", Version: "1.0"},
		Repositories:  []lock.Repository{{Name: "p11", URL: "http://alt/p11", Signers: []string{"FP"}}},
		Architectures: map[string]*lock.Arch{"x86_64": {}}}
	for i, d := range disttags {
		l.Architectures["x86_64"].Packages = append(l.Architectures["x86_64"].Packages, lock.Package{
			Name: fmt.Sprintf("pkg%d", i), Version: "1", Release: "alt1", Disttag: d, Arch: "x86_64", NEVRA: fmt.Sprintf("pkg%d-1-alt1.x86_64", i),
			Repository: "p11", SHA256: strings.Repeat("0", 64), SignerFingerprint: "FP", License: "MIT"})
	}
	built := &report.Report{LockSHA256: strings.Repeat("1", 64), Architectures: map[string]*report.ArchReport{}, Generators: map[string]string{}}
	if released == nil {
		released = built
	}
	if reproduced == nil {
		reproduced = built
	}
	rel := &auditedRelease{lock: l, report: released}
	r := &Report{SchemaVersion: SchemaVersion, Reasons: []string{}, Caveats: []string{}, Artifacts: []Artifact{}, Promotions: []Promotion{}, UKIs: []UKI{},
		Identity: Identity{Name: "p11", Version: "1.0", Branch: "p11", SpecSHA256: strings.Repeat("2", 64), LockSHA256: strings.Repeat("1", 64), Base: []Repo{}}}
	fail := func(format string, a ...any) { r.Reasons = append(r.Reasons, fmt.Sprintf(format, a...)) }
	packages(r, rel, pol, fail)
	files(r, rel, fail)
	policy(r, rel, fail)
	reproducibility(r, rel, Options{Reproduced: reproduced, ReproducedFrom: "second/report.json"}, fail)
	licenses(r)
	caveats(r, rel, pol, fail)
	conclude(r)
	return r
}

// rendered is the report in its three formats.
func rendered(t *testing.T, r *Report) (js, md, html string) {
	t.Helper()
	var j, m, h bytes.Buffer
	if err := r.JSON(&j); err != nil {
		t.Fatal(err)
	}
	if err := r.Markdown(&m); err != nil {
		t.Fatal(err)
	}
	if err := r.HTML(&h); err != nil {
		t.Fatal(err)
	}
	validateJSON(t, "audit.schema.json", j.Bytes())
	return j.String(), m.String(), h.String()
}

// TestVerdictStates: a release with another branch's packages is a pass
// with caveats in every format, drawn apart from a clean pass; its
// single-base row names the branches it saw; a policy that makes other
// branches failures fails it.
func TestVerdictStates(t *testing.T) {
	check := func(what, doc string, want, unwanted []string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(doc, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, doc)
			}
		}
		for _, u := range unwanted {
			if strings.Contains(doc, u) {
				t.Errorf("%s has %q", what, u)
			}
		}
	}

	clean := judged(t, nil, "p11+1.100.1.1", "p11+2.100.1.1")
	js, md, html := rendered(t, clean)
	if clean.Verdict != "pass" || clean.Outcome != OutcomePass || clean.Policy.Base.Result != OutcomePass || len(clean.Caveats) != 0 {
		t.Errorf("a clean release: %s, %s, row %s, caveats %q", clean.Verdict, clean.Outcome, clean.Policy.Base.Result, clean.Caveats)
	}
	check("clean json", js, []string{`"verdict": "pass"`, `"outcome": "pass"`}, nil)
	check("clean md", md, []string{"## Verdict: PASS\n\n**pass**: every check passed, with no caveat.",
		`- single base "p11": pass: 2 of 2 packages from repository "p11"; built for p11 (2 packages)` + "\n"}, []string{"caveat "})
	check("clean html", html, []string{`<div id="verdict" class="pass">`, `class="result-pass">pass</span>`}, []string{`class="pass-with-caveats"`})

	mixed := judged(t, nil, "sisyphus+9.100.1.1", "p11+1.100.1.1", "p11+2.100.1.1", "sisyphus+8.100.1.1")
	js, md, html = rendered(t, mixed)
	if mixed.Verdict != "pass" || mixed.Outcome != OutcomeCaveats || mixed.Policy.Base.Result != OutcomeCaveats || len(mixed.Caveats) != 2 {
		t.Errorf("another branch's packages: %s, %s, row %s, caveats %q", mixed.Verdict, mixed.Outcome, mixed.Policy.Base.Result, mixed.Caveats)
	}
	var doc struct {
		Verdict, Outcome string
		Policy           struct{ SingleBase BaseCheck }
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	if b := doc.Policy.SingleBase; doc.Verdict != "pass" || doc.Outcome != "pass-with-caveats" || b.Result != "pass-with-caveats" ||
		fmt.Sprint(b.Branches) != "[{p11 2} {sisyphus 2}]" || fmt.Sprint(b.OtherBranch) != "[pkg0-1-alt1.x86_64 pkg3-1-alt1.x86_64]" {
		t.Errorf("json: %s, %s, single base %+v", doc.Verdict, doc.Outcome, b)
	}
	const row = `4 of 4 packages from repository "p11"; built for p11 (2 packages), sisyphus (2 packages); not the release's branch p11: pkg0-1-alt1.x86_64, pkg3-1-alt1.x86_64`
	check("md", md, []string{"## Verdict: PASS with 2 caveats\n\n**pass with caveats**: no check failed, but 2 caveats below need a certifier's judgement: this is not a clean pass.",
		`- single base "p11": pass with caveats: ` + mdEscape(row), mdEscape("pkg0-1-alt1.x86_64 was built for branch sisyphus")}, []string{"every check passed"})
	check("html", html, []string{`<div id="verdict" class="pass-with-caveats">Verdict: PASS with 2 caveats`, "pass with caveats: no check failed, but 2 caveats",
		`<span id="single-base" class="result-pass-with-caveats">pass with caveats</span>: ` + template.HTMLEscapeString(row), `#verdict.pass-with-caveats{background:#8a5300}`},
		[]string{`class="pass"`, "every check passed", "Every check passed"})

	strict := judged(t, &release.Policy{ForeignBranch: release.FindingFail}, "sisyphus+9.100.1.1", "p11+1.100.1.1")
	_, md, html = rendered(t, strict)
	if strict.Verdict != "fail" || strict.Outcome != OutcomeFail || strict.Policy.Base.Result != OutcomeFail {
		t.Errorf("other branches as failures: %s, %s, row %s", strict.Verdict, strict.Outcome, strict.Policy.Base.Result)
	}
	check("strict md", md, []string{"## Verdict: FAIL\n", `- single base "p11": FAIL: 2 of 2 packages`}, []string{"**pass"})
	check("strict html", html, []string{`<div id="verdict" class="fail">`, `class="result-fail">FAIL</span>`}, nil)
}

// TestReproductionLikeWithLike: the reproduction check names the
// compressors both builds used; a second build whose compressors are not
// the release's (a builder built without cgo) is no evidence either way,
// a caveat and never a failure, while a difference between builds with
// the same compressors fails; host tools of other versions are named.
func TestReproductionLikeWithLike(t *testing.T) {
	cgo := map[string]string{"squashfs zstd": "github.com/DataDog/zstd@v1.5.7", "layers gzip": "github.com/klauspost/compress@v1.20.4"}
	noCgo := map[string]string{"squashfs zstd": "github.com/klauspost/compress@v1.20.4", "layers gzip": "github.com/klauspost/compress@v1.20.4"}
	rep := func(compressors map[string]string, rootfs string) *report.Report {
		return &report.Report{LockSHA256: strings.Repeat("1", 64), Architectures: map[string]*report.ArchReport{}, Generators: map[string]string{},
			Compressors: compressors, Artifacts: map[string]report.ArtifactInfo{"x86_64/rootfs.sqsh": {SHA256: rootfs}}}
	}
	withTool := func(r *report.Report, iso string) *report.Report {
		r.Tools = map[string]string{"iso": iso}
		return r
	}
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, c := range []struct {
		name          string
		second        *report.Report
		like, says    string
		fails, caveat bool
	}{
		{"same compressors, same bytes", rep(cgo, a), "same", "pass: 3 digests compared with second/report.json; the same compressors in both builds (layers gzip: github.com/klauspost/compress@v1.20.4, squashfs zstd: github.com/DataDog/zstd@v1.5.7)", false, false},
		{"same compressors, other bytes", rep(cgo, b), "same", "FAIL: 3 digests compared", true, false},
		{"other compressors, other bytes", rep(noCgo, b), "different", "no evidence: the second build (second/report.json) used other compressors, so its digests are not compared with the release's: squashfs zstd: github.com/DataDog/zstd@v1.5.7 here, github.com/klauspost/compress@v1.20.4 in the second build", false, true},
		{"other compressors, same bytes", rep(noCgo, a), "different", "pass: 3 digests compared with second/report.json; identical although the compressors differ", false, false},
		{"a report without compressors", rep(nil, a), "unrecorded", "the compressors are not named by both reports", false, false},
		{"another xorriso, other bytes", withTool(rep(cgo, b), "xorriso 1.5.6"), "same", "FAIL: 3 digests compared with second/report.json; the same compressors in both builds (layers gzip: github.com/klauspost/compress@v1.20.4, squashfs zstd: github.com/DataDog/zstd@v1.5.7); the host tools' versions differ: iso: xorriso 1.5.4 here, xorriso 1.5.6 in the second build", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := judgedAgainst(t, nil, withTool(rep(cgo, a), "xorriso 1.5.4"), c.second, "p11+1.100.1.1")
			ev := r.Policy.Reproducibility
			if ev.Like != c.like || !strings.Contains(ev.Summary(), c.says) {
				t.Errorf("like %q, summary %q; want %q saying %q", ev.Like, ev.Summary(), c.like, c.says)
			}
			failed := slices.ContainsFunc(r.Reasons, func(s string) bool { return strings.HasPrefix(s, "not reproduced") })
			caveat := slices.ContainsFunc(r.Caveats, func(s string) bool { return strings.Contains(s, "compressors are not the release's") })
			if failed != c.fails || caveat != c.caveat {
				t.Errorf("failed %v, caveat %v: reasons %q, caveats %q", failed, caveat, r.Reasons, r.Caveats)
			}
			js, md, html := rendered(t, r)
			for what, doc := range map[string]string{"json": js, "markdown": md, "html": html} {
				if !strings.Contains(doc, "squashfs zstd") && c.like != "unrecorded" {
					t.Errorf("%s does not name the compressors", what)
				}
			}
		})
	}
}

// TestBuildReportOfPublished: a lock released twice carries two build
// reports; the one of the published boot index is the release's, and a
// lock whose reports name none of it fails saying so.
func TestBuildReportOfPublished(t *testing.T) {
	old := &report.Report{OCIIndex: "sha256:" + strings.Repeat("1", 64)}
	cur := &report.Report{OCIIndex: "sha256:" + strings.Repeat("2", 64)}
	if got, err := buildReport([]*report.Report{old, cur}, cur.OCIIndex); err != nil || got != cur {
		t.Errorf("two reports: %v, %v", got, err)
	}
	if got, err := buildReport([]*report.Report{old}, cur.OCIIndex); err != nil || got != old {
		t.Errorf("one report (the artifact checks judge it): %v, %v", got, err)
	}
	if got, err := buildReport(nil, cur.OCIIndex); err != nil || got != nil {
		t.Errorf("no report: %v, %v", got, err)
	}
	if _, err := buildReport([]*report.Report{old, old}, cur.OCIIndex); err == nil || !strings.Contains(err.Error(), "2 build report attestations, none of the published boot index sha256:2222") {
		t.Errorf("no report of the published boot index: %v", err)
	}
}

// TestProvenanceOfReport: the provenance beside the chosen build report
// is the one its builder version made.
func TestProvenanceOfReport(t *testing.T) {
	prov := func(v string) *provenance.Predicate {
		p := &provenance.Predicate{}
		p.RunDetails.Builder.Version = map[string]string{"nodeforge-builder": v}
		return p
	}
	a, b := prov("a1"), prov("b2")
	if got := provenanceOf([]*provenance.Predicate{a, b}, &report.Report{Builder: "b2"}); got != b {
		t.Errorf("got %v", got)
	}
	if got := provenanceOf([]*provenance.Predicate{a, b}, &report.Report{Builder: "c3"}); got != a {
		t.Errorf("no match: got %v", got)
	}
	if got := provenanceOf(nil, nil); got != nil {
		t.Errorf("none: got %v", got)
	}
}
