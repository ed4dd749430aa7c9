package certification

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/release"
)

// JSON writes audit.json.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Summary are the figures every format states, so they agree.
type Summary struct {
	Packages, Artifacts, Files, FromPackages, FromGenerators, Unowned, Unpacked int
	Licenses, Scriptlets, ScriptletsNotHandled, Promotions                      int
}

// Summary computes the report's headline figures.
func (r *Report) Summary() Summary {
	s := Summary{Packages: len(r.Packages), Artifacts: len(r.Artifacts), Files: r.Files.Total, FromPackages: r.Files.Packaged,
		FromGenerators: r.Files.Generated, Unowned: r.Files.Unowned, Unpacked: r.Files.Unpacked, Licenses: len(r.Licenses), Scriptlets: len(r.Policy.Scriptlets),
		Promotions: len(r.Promotions)}
	for _, sc := range r.Policy.Scriptlets {
		if !sc.Handled {
			s.ScriptletsNotHandled++
		}
	}
	return s
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "*", `\*`, "_", `\_`).Replace(s)
}

// Markdown writes audit.md.
func (r *Report) Markdown(w io.Writer) error {
	var b bytes.Buffer
	s := r.Summary()
	id := r.Identity
	fmt.Fprintf(&b, "# Certification audit: %s %s\n\n", id.Name, id.Version)
	fmt.Fprintf(&b, "## Verdict: %s\n\n", r.VerdictText())
	if line := r.VerdictLine(); line != "" {
		fmt.Fprintf(&b, "**%s**: %s\n\n", outcomeText(r.Outcome), line)
	}
	for _, reason := range r.Reasons {
		fmt.Fprintf(&b, "- %s\n", mdEscape(reason))
	}
	if len(r.Reasons) > 0 {
		b.WriteString("\n")
	}
	if len(r.Caveats) > 0 {
		b.WriteString("### What a certifier must know\n\n")
		for _, c := range r.Caveats {
			fmt.Fprintf(&b, "- %s\n", mdEscape(c))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Identity\n\n| field | value |\n|---|---|\n")
	for _, kv := range [][2]string{{"version", id.Version}, {"branch", id.Branch}, {"channel", id.Channel}, {"store", id.Store},
		{"spec sha256", id.SpecSHA256}, {"lock sha256", id.LockSHA256}, {"lock artifact", id.LockDigest},
		{"builder", id.BuilderID + " " + id.BuilderVersion}, {"builder sha256", id.BuilderSHA256},
		{"SOURCE_DATE_EPOCH", fmt.Sprint(id.SourceDateEpoch)}} {
		fmt.Fprintf(&b, "| %s | %s |\n", kv[0], mdEscape(kv[1]))
	}
	b.WriteString("\n### Package base\n\n| repository | url | release | signing keys |\n|---|---|---|---|\n")
	for _, rp := range id.Base {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdEscape(rp.Name), mdEscape(rp.URL), rp.Release, strings.Join(rp.Fingerprints, ", "))
	}
	fmt.Fprintf(&b, "\n## Artifacts (%d)\n\n| repository | kind | platform | digest | size | signed by | attestations | verified |\n|---|---|---|---|---|---|---|---|\n", s.Artifacts)
	for _, a := range r.Artifacts {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s | %s | %s |\n", mdEscape(a.Repository), a.Kind, mdEscape(strings.TrimSpace(a.Platform+" "+a.Name)), a.Digest, a.Size,
			shortKeys(a.SignedBy), attSummary(a.Attestations), yesNo(a.Verified))
	}
	imagesMarkdown(&b, r.Images)
	fmt.Fprintf(&b, "\n## Packages (%d)\n\n| NEVRA | disttag | source RPM | repository | sha256 | signed by | license | in |\n|---|---|---|---|---|---|---|---|\n", s.Packages)
	for _, p := range r.Packages {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", mdEscape(p.NEVRA), mdEscape(p.Disttag), mdEscape(p.SourceRPM), mdEscape(p.Repository),
			p.SHA256, p.SignedBy, mdEscape(p.License), mdEscape(strings.Join(p.In, ", ")))
	}
	fmt.Fprintf(&b, "\n## File traceability\n\n%d files in all: %d from packages, %d from builder generators, **%d unowned**. %d paths of the published root filesystem images and container image layers were unpacked and compared with the build report.\n\n", s.Files, s.FromPackages, s.FromGenerators, s.Unowned, s.Unpacked)
	b.WriteString(relocatedLine(r.Files.Relocated))
	b.WriteString("| generator | what it writes |\n|---|---|\n")
	if len(r.Files.Generators) == 0 {
		b.WriteString("| none | |\n")
	}
	for _, g := range slices.Sorted(maps.Keys(r.Files.Generators)) {
		fmt.Fprintf(&b, "| %s | %s |\n", g, mdEscape(r.Files.Generators[g]))
	}
	if s.Unowned > 0 {
		b.WriteString("\n### Unowned files\n\n| artifact | path | problem |\n|---|---|---|\n")
		for _, f := range r.Files.List {
			if f.Problem != "" {
				fmt.Fprintf(&b, "| %s | %s | %s |\n", f.Artifact, mdEscape(f.Path), mdEscape(f.Problem))
			}
		}
	}
	b.WriteString("\nThe full list (every file, its package and the RPM's recorded digest, or its generator) is in audit.json.\n")
	p := r.Policy
	b.WriteString("\n## Policy checks\n\n")
	fmt.Fprintf(&b, "- single base %q: %s: %s", p.Base.Base, outcomeText(p.Base.Result), mdEscape(p.Base.Saw()))
	fmt.Fprintf(&b, "\n- signatures: %s (%d packages and %d repositories signed by pinned keys)\n", okText(p.Signatures.OK), p.Signatures.Packages, p.Signatures.Repositories)
	fmt.Fprintf(&b, "- scriptlets: %d, none executed; %d handled declaratively, %d not handled\n", s.Scriptlets, s.Scriptlets-s.ScriptletsNotHandled, s.ScriptletsNotHandled)
	fmt.Fprintf(&b, "- setuid kept: %d, setuid stripped: %d, capabilities: %d, world-writable: %d (each against the spec's allowlist at build time)\n",
		len(p.Setuid), len(p.SetuidStripped), len(p.Capabilities), len(p.WorldWritable))
	if p.Reproducibility.Evidence == "none" {
		b.WriteString("- reproducibility: no second build given (builder audit --reproduced REPORT)\n")
	} else {
		fmt.Fprintf(&b, "- reproducibility: %s\n", mdEscape(p.Reproducibility.Summary()))
	}
	if len(p.Scriptlets) == 0 {
		b.WriteString("\nScriptlets: none.\n")
	} else {
		b.WriteString("\n| arch | package | scriptlet | handled | how / not handled |\n|---|---|---|---|---|\n")
		for _, sc := range p.Scriptlets {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", sc.where(), mdEscape(sc.Package), sc.Kind, yesNo(sc.Handled), mdEscape(strings.Join(append(sc.How, sc.Pending...), "; ")))
		}
	}
	fmt.Fprintf(&b, "\n## Licenses (%d)\n\n| license | packages |\n|---|---|\n", s.Licenses)
	for _, l := range r.Licenses {
		fmt.Fprintf(&b, "| %s | %d |\n", mdEscape(l.License), l.Packages)
	}
	if len(r.UKIs) > 0 {
		fmt.Fprintf(&b, "\n## Secure Boot: signed UKIs (%d)\n\n| arch | UKI | stub | kernel | initramfs | signed by | unsigned sha256 | checks |\n|---|---|---|---|---|---|---|---|\n", len(r.UKIs))
		for _, u := range r.UKIs {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s (sha256 %s) | %s | %s |\n", u.Arch, u.Digest, mdEscape(u.Stub), mdEscape(u.Kernel), u.Initramfs,
				mdEscape(u.SigningCert), u.SigningCertSHA256, u.UnsignedSHA256, mdEscape(strings.Join(u.Checks, "; ")))
		}
	}
	if c := r.Changes; c != nil {
		fmt.Fprintf(&b, "\n## Changes since %s\n\n%d added, %d removed, %d updated; files: %d added, %d removed, %d changed.\n\n",
			mdEscape(c.Previous), len(c.Added), len(c.Removed), len(c.Updated), c.FilesAdded, c.FilesRemoved, c.FilesChanged)
		if len(c.Added)+len(c.Removed)+len(c.Updated) == 0 {
			b.WriteString("No package changed.\n")
		}
		for _, n := range c.Added {
			fmt.Fprintf(&b, "- added %s\n", mdEscape(n))
		}
		for _, n := range c.Removed {
			fmt.Fprintf(&b, "- removed %s\n", mdEscape(n))
		}
		for _, u := range c.Updated {
			fmt.Fprintf(&b, "- updated %s.%s %s -> %s (%+d bytes)\n", mdEscape(u.Name), u.Arch, u.From, u.To, u.SizeDelta)
		}
	}
	fmt.Fprintf(&b, "\n## Promotions (%d)\n\n", s.Promotions)
	if len(r.Promotions) == 0 {
		b.WriteString("None.\n")
	}
	for _, pr := range r.Promotions {
		fmt.Fprintf(&b, "- %s@%s: %s -> %s, key %s, %s\n", mdEscape(pr.Repository), pr.Digest, pr.From, pr.To, pr.Key, pr.Time)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// VerdictText is the verdict as the reports state it: "PASS", "PASS with
// 2 caveats", "FAIL".
func (r *Report) VerdictText() string {
	v := strings.ToUpper(r.Verdict)
	switch len(r.Caveats) {
	case 0:
		return v
	case 1:
		return v + " with 1 caveat"
	}
	return fmt.Sprintf("%s with %d caveats", v, len(r.Caveats))
}

// VerdictLine is the sentence under the verdict: a pass with caveats
// says it is not a clean pass (a fail lists its reasons instead).
func (r *Report) VerdictLine() string {
	switch r.Outcome {
	case OutcomePass:
		return "every check passed, with no caveat."
	case OutcomeCaveats:
		need := "need"
		if len(r.Caveats) == 1 {
			need = "needs"
		}
		return fmt.Sprintf("no check failed, but %s below %s a certifier's judgement: this is not a clean pass.", counted(len(r.Caveats), "caveat"), need)
	}
	return ""
}

// outcomeText is a verdict's state in words.
func outcomeText(outcome string) string {
	switch outcome {
	case OutcomePass:
		return "pass"
	case OutcomeCaveats:
		return "pass with caveats"
	}
	return "FAIL"
}

func counted(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Saw says what the single-base check saw: the packages' repository and
// the branches they were built for.
func (b BaseCheck) Saw() string {
	total := 0
	var branches []string
	for _, c := range b.Branches {
		total += c.Packages
		name := c.Branch
		if name == "" {
			name = "no disttag"
		}
		branches = append(branches, fmt.Sprintf("%s (%s)", name, counted(c.Packages, "package")))
	}
	s := fmt.Sprintf("%d of %d packages from repository %q", total-len(b.Outside), total, b.Base)
	if len(b.Outside) > 0 {
		s += "; outside it: " + strings.Join(b.Outside, ", ")
	}
	if len(branches) > 0 {
		s += "; built for " + strings.Join(branches, ", ")
	}
	if len(b.OtherBranch) > 0 {
		s += fmt.Sprintf("; not the release's branch %s: %s", b.Branch, strings.Join(b.OtherBranch, ", "))
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// Summary is the evidence of a second build in one line, as audit.md and
// audit.html give it: its verdict, what it compared with, and whether its
// compressors were the release's.
func (e ReproducibleEvid) Summary() string {
	if !e.OK && !e.Comparable() {
		return fmt.Sprintf("no evidence: the second build (%s) used other compressors, so its digests are not compared with the release's: %s", e.Evidence, strings.Join(e.Compressors, "; "))
	}
	s := fmt.Sprintf("%s: %d digests compared with %s", okText(e.OK), e.Compared, e.Evidence)
	switch e.Like {
	case "same":
		s += "; the same compressors in both builds (" + strings.Join(e.Compressors, ", ") + ")"
	case "different":
		s += "; identical although the compressors differ (" + strings.Join(e.Compressors, "; ") + ")"
	case "unrecorded":
		s += "; the compressors are not named by both reports"
	}
	return s + e.toolsNote()
}

func okText(b bool) string {
	if b {
		return "pass"
	}
	return "FAIL"
}

func shortKeys(ids []string) string {
	var out []string
	for _, id := range ids {
		out = append(out, strings.TrimPrefix(id, "sha256:")[:min(16, len(strings.TrimPrefix(id, "sha256:")))])
	}
	return strings.Join(out, ", ")
}

// predicateNames are short names of the predicate types, as cosign's
// --type names them where it has one.
var predicateNames = map[string]string{
	signing.PredicateSPDX: "spdx", signing.PredicateCycloneDX: "cyclonedx", signing.PredicateSLSA: "slsa-provenance",
	signing.PredicateBuildReport: "build-report", signing.PredicatePromotion: "promotion",
}

func attSummary(m map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		name := predicateNames[k]
		if name == "" {
			name = k
		}
		out = append(out, fmt.Sprintf("%s×%d", name, m[k]))
	}
	return strings.Join(out, " ")
}

// bar is one bar of a chart.
type bar struct {
	Label string
	Value int64
	Y     int
	Width int
}

// chart lays out a horizontal bar chart of the largest values (the rest
// summed into one bar).
func chart(values map[string]int64, most int) []bar {
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range values {
		if v > 0 {
			all = append(all, kv{k, v})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].v != all[j].v {
			return all[i].v > all[j].v
		}
		return all[i].k < all[j].k
	})
	if len(all) > most {
		var rest int64
		for _, x := range all[most-1:] {
			rest += x.v
		}
		all = append(all[:most-1], kv{fmt.Sprintf("%d others", len(all)-most+1), rest})
	}
	var max int64 = 1
	for _, x := range all {
		if x.v > max {
			max = x.v
		}
	}
	out := make([]bar, len(all))
	for i, x := range all {
		out[i] = bar{Label: x.k, Value: x.v, Y: i * 22, Width: int(x.v * 400 / max)}
	}
	return out
}

// HTML writes audit.html: one self-contained page (no scripts, no
// external assets), with the size charts drawn as inline SVG.
func (r *Report) HTML(w io.Writer) error {
	byPkg := map[string]int64{}
	for _, p := range r.Packages {
		byPkg[p.Name+" ("+p.Arch+")"] += p.Size
	}
	byArt := map[string]int64{}
	for _, a := range r.Artifacts {
		if a.Kind == "index" || (a.Repository == release.RepoBoot && a.Kind != "boot-asset") {
			continue // an index holds its children; the boot artifact its assets
		}
		label := strings.TrimSpace(strings.Join([]string{a.Repository, a.Platform, a.Name}, " "))
		byArt[label] += a.Size
	}
	data := struct {
		R          *Report
		S          Summary
		PkgChart   []bar
		ArtChart   []bar
		DirChart   []bar
		DirHeight  int
		PkgHeight  int
		ArtHeight  int
		Generators []string
	}{R: r, S: r.Summary(), PkgChart: chart(byPkg, 20), ArtChart: chart(byArt, 20), Generators: slices.Sorted(maps.Keys(r.Files.Generators))}
	data.PkgHeight, data.ArtHeight = len(data.PkgChart)*22+4, len(data.ArtChart)*22+4
	// Where the root filesystems' bytes go, as builder size sums them.
	byDir := map[string]int64{}
	for _, f := range r.Files.List {
		if arch, ok := strings.CutPrefix(f.Artifact, "rootfs/"); ok && f.Type == "file" {
			byDir[dirOf(f.Path, 2)+" ("+arch+")"] += f.Size
		}
	}
	data.DirChart = chart(byDir, 20)
	data.DirHeight = len(data.DirChart)*22 + 4
	return page.Execute(w, data)
}

var page = template.Must(template.New("audit").Funcs(template.FuncMap{
	"upper": strings.ToUpper, "join": strings.Join, "outcome": outcomeText, "keys": shortKeys, "atts": attSummary, "yes": yesNo, "ok": okText,
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"add":   func(a, b int) int { return a + b },
	"print": func() template.CSS { return template.CSS(printCSS) },
	"list": func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, ", ")
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Certification audit: {{.R.Identity.Name}} {{.R.Identity.Version}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#1d2330;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #ccd;padding-bottom:.2em}
table{border-collapse:collapse;width:100%;margin:.6em 0;font-size:12.5px}
th,td{border:1px solid #d5d8e0;padding:3px 6px;text-align:left;vertical-align:top}
td{overflow-wrap:anywhere}
svg{max-width:100%;height:auto}
#caveats{margin-top:.8em;padding:.8em 1.4em;border-radius:6px;background:#fff4d6;border:1px solid #e0b84a}
.none{color:#667;font-style:italic}
th{background:#eef0f5}
#verdict{padding:1em 1.4em;border-radius:6px;font-size:1.3em;font-weight:600;color:#fff}
#verdict.pass{background:#1f8a3b}#verdict.pass-with-caveats{background:#8a5300}#verdict.fail{background:#b3261e}
.result-pass{color:#1f8a3b;font-weight:600}.result-pass-with-caveats{color:#8a5300;font-weight:600}.result-fail{color:#b3261e;font-weight:600}
#verdict ul{font-size:.75em;font-weight:400}
.figures{display:flex;gap:1em;flex-wrap:wrap}.figures div{background:#eef0f5;border-radius:6px;padding:.6em 1em}
.figures b{display:block;font-size:1.4em}
svg text{font:12px system-ui,sans-serif;fill:#1d2330}
.bad{color:#b3261e;font-weight:600}
{{print}}
</style></head>
<body>
<h1>Certification audit: {{.R.Identity.Name}} {{.R.Identity.Version}}</h1>
<div id="verdict" class="{{.R.Outcome}}">Verdict: {{.R.VerdictText}}
{{if .R.Reasons}}<ul>{{range .R.Reasons}}<li>{{.}}</li>{{end}}</ul>{{else}}<div style="font-size:.7em;font-weight:400">{{outcome .R.Outcome}}: {{.R.VerdictLine}}</div>{{end}}
</div>
{{if .R.Caveats}}<div id="caveats"><b>What a certifier must know</b><ul>{{range .R.Caveats}}<li>{{.}}</li>{{end}}</ul></div>{{end}}
<div class="figures">
<div><b id="fig-packages">{{.S.Packages}}</b>packages</div>
<div><b id="fig-artifacts">{{.S.Artifacts}}</b>artifacts</div>
<div><b id="fig-files">{{.S.Files}}</b>files</div>
<div><b id="fig-unowned">{{.S.Unowned}}</b>unowned files</div>
<div><b>{{.S.Licenses}}</b>licenses</div>
<div><b>{{.S.Promotions}}</b>promotions</div>
</div>

<h2>Identity</h2>
<table>
<tr><th>version</th><td>{{.R.Identity.Version}}</td></tr>
<tr><th>branch</th><td>{{.R.Identity.Branch}}</td></tr>
<tr><th>channel</th><td>{{.R.Identity.Channel}}</td></tr>
<tr><th>store</th><td>{{.R.Identity.Store}}</td></tr>
<tr><th>spec sha256</th><td>{{.R.Identity.SpecSHA256}}</td></tr>
<tr><th>lock sha256</th><td>{{.R.Identity.LockSHA256}}</td></tr>
<tr><th>lock artifact</th><td>{{.R.Identity.LockDigest}}</td></tr>
<tr><th>builder</th><td>{{.R.Identity.BuilderID}} {{.R.Identity.BuilderVersion}} (sha256 {{.R.Identity.BuilderSHA256}})</td></tr>
<tr><th>SOURCE_DATE_EPOCH</th><td>{{.R.Identity.SourceDateEpoch}}</td></tr>
</table>
<table><tr><th>repository</th><th>url</th><th>release</th><th>indexes</th><th>signing keys</th></tr>
{{range .R.Identity.Base}}<tr><td>{{.Name}}</td><td>{{.URL}}</td><td>{{.Release}}</td><td>{{join .Indexes "; "}}</td><td>{{join .Fingerprints ", "}}</td></tr>{{else}}<tr><td colspan="5" class="none">none</td></tr>{{end}}
</table>

<h2>Size by package</h2>
<svg id="chart-packages" width="760" height="{{.PkgHeight}}" role="img" aria-label="size by package">
{{range .PkgChart}}<g transform="translate(0,{{.Y}})"><text x="0" y="15">{{.Label}}</text><rect x="300" y="3" width="{{.Width}}" height="16" fill="#3b6fd4"/><text x="{{add .Width 306}}" y="15">{{bytes .Value}}</text></g>
{{end}}</svg>
<h2>Size of the root filesystem by directory</h2>
<svg id="chart-dirs" width="760" height="{{.DirHeight}}" role="img" aria-label="size by directory">
{{range .DirChart}}<g transform="translate(0,{{.Y}})"><text x="0" y="15">{{.Label}}</text><rect x="300" y="3" width="{{.Width}}" height="16" fill="#2f8f83"/><text x="{{add .Width 306}}" y="15">{{bytes .Value}}</text></g>
{{end}}</svg>
<h2>Size by artifact</h2>
<svg id="chart-artifacts" width="760" height="{{.ArtHeight}}" role="img" aria-label="size by artifact">
{{range .ArtChart}}<g transform="translate(0,{{.Y}})"><text x="0" y="15">{{.Label}}</text><rect x="300" y="3" width="{{.Width}}" height="16" fill="#7a4fc4"/><text x="{{add .Width 306}}" y="15">{{bytes .Value}}</text></g>
{{end}}</svg>

<h2>Artifacts</h2>
<table><tr><th>repository</th><th>kind</th><th>platform</th><th>digest</th><th>size</th><th>signed by</th><th>attestations</th><th>verified</th></tr>
{{range .R.Artifacts}}<tr><td>{{.Repository}}</td><td>{{.Kind}}</td><td>{{.Platform}} {{.Name}}</td><td>{{.Digest}}</td><td>{{bytes .Size}}</td><td>{{keys .SignedBy}}</td><td>{{atts .Attestations}}</td><td{{if not .Verified}} class="bad"{{end}}>{{yes .Verified}}</td></tr>{{else}}<tr><td colspan="8" class="none">none</td></tr>{{end}}
</table>
{{if .R.Images}}
<h2>Container images</h2>
<table id="images"><tr><th>image</th><th>index</th><th>arch</th><th>image manifest</th><th>layer</th><th>packages</th><th>files</th><th>unpacked and compared</th><th>verified</th></tr>
{{range .R.Images}}{{$im := .}}{{range .Architectures}}<tr><td>{{$im.Ref}}</td><td>{{$im.Digest}}</td><td>{{.Arch}}</td><td>{{.Digest}}</td><td>{{.Layer}}</td><td>{{.Packages}}</td><td>{{.Files}}</td><td>{{.Unpacked}}</td><td{{if not $im.Verified}} class="bad"{{end}}>{{yes $im.Verified}}</td></tr>{{end}}{{end}}
</table>
{{end}}
<h2>Packages</h2>
<table><tr><th>NEVRA</th><th>disttag</th><th>source RPM</th><th>repository</th><th>sha256</th><th>signed by</th><th>license</th><th>in</th></tr>
{{range .R.Packages}}<tr><td>{{.NEVRA}}</td><td>{{.Disttag}}</td><td>{{.SourceRPM}}</td><td>{{.Repository}}</td><td>{{.SHA256}}</td><td>{{.SignedBy}}</td><td>{{.License}}</td><td>{{join .In ", "}}</td></tr>{{else}}<tr><td colspan="8" class="none">none</td></tr>{{end}}
</table>

<h2>File traceability</h2>
<p>{{.S.Files}} files in all: {{.S.FromPackages}} from packages, {{.S.FromGenerators}} from builder generators, <b{{if .S.Unowned}} class="bad"{{end}}>{{.S.Unowned}} unowned</b>. {{.S.Unpacked}} paths of the published root filesystem images and container image layers were unpacked and compared with the build report.</p>
<table><tr><th>generator</th><th>what it writes</th></tr>
{{range .Generators}}<tr><td>{{.}}</td><td>{{index $.R.Files.Generators .}}</td></tr>{{else}}<tr><td colspan="2" class="none">none</td></tr>{{end}}
</table>
<details><summary>Every file ({{.S.Files}})</summary>
<table><tr><th>artifact</th><th>path</th><th>type</th><th>sha256</th><th>package</th><th>RPM digest</th><th>generator</th><th>problem</th></tr>
{{range .R.Files.List}}<tr><td>{{.Artifact}}</td><td>{{.Path}}</td><td>{{.Type}}</td><td>{{.SHA256}}</td><td>{{.Package}}</td><td>{{.RPMDigest}}</td><td>{{.Generator}}</td><td class="bad">{{.Problem}}</td></tr>{{else}}<tr><td colspan="8" class="none">none</td></tr>{{end}}
</table></details>

<h2>Policy checks</h2>
<table>
<tr><th>single base</th><td><span id="single-base" class="result-{{.R.Policy.Base.Result}}">{{outcome .R.Policy.Base.Result}}</span>: {{.R.Policy.Base.Saw}}</td></tr>
<tr><th>signatures</th><td>{{ok .R.Policy.Signatures.OK}}: {{.R.Policy.Signatures.Packages}} packages and {{.R.Policy.Signatures.Repositories}} repositories signed by pinned keys</td></tr>
<tr><th>scriptlets</th><td>{{.S.Scriptlets}}, none executed; {{.S.ScriptletsNotHandled}} not handled</td></tr>
<tr><th>setuid</th><td>kept: {{list .R.Policy.Setuid}}; stripped: {{list .R.Policy.SetuidStripped}}</td></tr>
<tr><th>capabilities</th><td>{{list .R.Policy.Capabilities}}</td></tr>
<tr><th>world-writable</th><td>{{list .R.Policy.WorldWritable}}</td></tr>
<tr><th>reproducibility</th><td>{{if eq .R.Policy.Reproducibility.Evidence "none"}}no second build given{{else}}{{.R.Policy.Reproducibility.Summary}}{{end}}</td></tr>
</table>
<table><tr><th>arch</th><th>package</th><th>scriptlet</th><th>handled</th><th>how</th><th>not handled</th></tr>
{{range .R.Policy.Scriptlets}}<tr><td>{{.Arch}}{{with .Image}} (image {{.}}){{end}}</td><td>{{.Package}}</td><td>{{.Kind}}</td><td>{{yes .Handled}}</td><td>{{join .How "; "}}</td><td>{{join .Pending "; "}}</td></tr>{{else}}<tr><td colspan="6" class="none">none</td></tr>{{end}}
</table>

<h2>Licenses</h2>
<table><tr><th>license</th><th>packages</th></tr>
{{range .R.Licenses}}<tr><td>{{.License}}</td><td>{{.Packages}}</td></tr>{{else}}<tr><td colspan="2" class="none">none</td></tr>{{end}}
</table>
{{if .R.UKIs}}
<h2>Secure Boot: signed UKIs</h2>
<table><tr><th>arch</th><th>UKI</th><th>stub</th><th>kernel</th><th>initramfs</th><th>signed by</th><th>unsigned sha256</th><th>checks</th></tr>
{{range .R.UKIs}}<tr><td>{{.Arch}}</td><td>{{.Digest}}</td><td>{{.Stub}}</td><td>{{.Kernel}}</td><td>{{.Initramfs}}</td><td>{{.SigningCert}}<br><span>sha256 {{.SigningCertSHA256}}</span></td><td>{{.UnsignedSHA256}}</td><td>{{join .Checks "; "}}</td></tr>{{end}}
</table>
{{end}}{{with .R.Changes}}
<h2>Changes since {{.Previous}}</h2>
<p>{{len .Added}} added, {{len .Removed}} removed, {{len .Updated}} updated; files: {{.FilesAdded}} added, {{.FilesRemoved}} removed, {{.FilesChanged}} changed.</p>
<table><tr><th>change</th><th>package</th><th>from</th><th>to</th><th>size change (bytes)</th></tr>
{{range .Added}}<tr><td>added</td><td>{{.}}</td><td>—</td><td>—</td><td>—</td></tr>{{end}}
{{range .Removed}}<tr><td>removed</td><td>{{.}}</td><td>—</td><td>—</td><td>—</td></tr>{{end}}
{{range .Updated}}<tr><td>updated</td><td>{{.Name}}.{{.Arch}}</td><td>{{.From}}</td><td>{{.To}}</td><td>{{printf "%+d" .SizeDelta}}</td></tr>{{end}}
</table>
{{end}}
<h2>Promotions</h2>
<table><tr><th>repository</th><th>digest</th><th>from</th><th>to</th><th>key</th><th>time</th></tr>
{{range .R.Promotions}}<tr><td>{{.Repository}}</td><td>{{.Digest}}</td><td>{{.From}}</td><td>{{.To}}</td><td>{{.Key}}</td><td>{{.Time}}</td></tr>{{else}}<tr><td colspan="6" class="none">none</td></tr>{{end}}
</table>
</body></html>
`))

// imagesMarkdown writes the container images section of audit.md.
func imagesMarkdown(b *bytes.Buffer, images []ContainerImage) {
	if len(images) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Container images (%d)\n\n| image | index | arch | image manifest | layer | packages | files | unpacked and compared | verified |\n|---|---|---|---|---|---|---|---|---|\n", len(images))
	for _, im := range images {
		for _, a := range im.Architectures {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d | %d | %d | %s |\n", mdEscape(im.Ref), im.Digest, a.Arch, a.Digest, a.Layer, a.Packages, a.Files, a.Unpacked, yesNo(im.Verified))
		}
	}
}

// where is the scriptlet's architecture, and its image when an image's.
func (s Scriptlet) where() string {
	if s.Image != "" {
		return s.Arch + " (image " + s.Image + ")"
	}
	return s.Arch
}

// relocatedLine says how many extension files their definitions relocated
// (nothing when none were).
func relocatedLine(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d files of extensions were relocated by their definitions; each is counted with its package and lists where the package put it (relocatedFrom).\n\n", n)
}
