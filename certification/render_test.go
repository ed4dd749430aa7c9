package certification

import (
	"bytes"
	"strings"
	"testing"
)

func sampleReport() *Report {
	return &Report{
		SchemaVersion: SchemaVersion, Verdict: "fail", Outcome: OutcomeFail, Reasons: []string{"package evil-1-1.noarch comes from repository \"foreign\""},
		Identity: Identity{Name: "p11", Version: "1.0", Base: []Repo{}},
		Packages: []Package{
			{NEVRA: "evil-1-1.noarch", Name: "<script>alert(1)</script>", Arch: "noarch", Repository: "foreign", Size: 10, In: []string{"rootfs/x86_64"}},
			{NEVRA: "bash-5-1.x86_64", Name: "bash", Arch: "x86_64", Repository: "p11", Size: 1000, In: []string{"rootfs/x86_64"}},
		},
		Files: Files{Total: 2, Packaged: 1, Unowned: 1, Generators: map[string]string{"os-release": "/etc/os-release"},
			List: []File{{Artifact: "rootfs/x86_64", Path: "/bin/bash", Package: "bash-5-1.x86_64"}, {Artifact: "rootfs/x86_64", Path: "/x|y", Problem: "no package and no generator"}}},
		Policy:   PolicyChecks{Base: BaseCheck{Base: "p11", Outside: []string{"evil-1-1.noarch"}}},
		Licenses: []License{{License: "GPL", Packages: 2}},
	}
}

func TestRenderings(t *testing.T) {
	r := sampleReport()
	var md, html bytes.Buffer
	if err := r.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := r.HTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Verdict: FAIL", "**1 unowned**", `/x\|y`, "### Unowned files", "## Packages (2)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	h := html.String()
	if strings.Contains(h, "<script>") {
		t.Error("a package name reached the HTML unescaped")
	}
	for _, want := range []string{`id="verdict" class="fail"`, `id="chart-packages"`, "&lt;script&gt;", "comes from repository &#34;foreign&#34;"} {
		if !strings.Contains(h, want) {
			t.Errorf("html lacks %q", want)
		}
	}
}

func TestChart(t *testing.T) {
	values := map[string]int64{}
	for i := range 30 {
		values[string(rune('a'+i%26))+strings.Repeat("x", i/26)] = int64(i + 1)
	}
	bars := chart(values, 20)
	if len(bars) != 20 || bars[19].Label != "11 others" || bars[0].Value != 30 {
		t.Errorf("chart: %d bars, last %+v, first %+v", len(bars), bars[len(bars)-1], bars[0])
	}
	var sum int64
	widest := 0
	for _, b := range bars {
		sum += b.Value
		widest = max(widest, b.Width)
	}
	if widest != 400 {
		t.Errorf("the largest bar is %d wide, want 400", widest)
	}
	if sum != 30*31/2 {
		t.Errorf("bars sum to %d", sum)
	}
}
