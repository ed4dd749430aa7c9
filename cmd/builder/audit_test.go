package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sigstore/cosign/v2/pkg/oci/static"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/certification"
	"github.com/nodeforge/builder/internal/testbrowser"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/release"
)

// runAudit runs builder audit into a new directory and reads audit.json.
func runAudit(t *testing.T, args ...string) (*certification.Report, string, string, error) {
	t.Helper()
	return auditWith(t, runBuilder, args...)
}

// auditChild is runAudit in a child process.
func auditChild(t *testing.T, args ...string) (*certification.Report, string, string, error) {
	t.Helper()
	return auditWith(t, builderProcess, args...)
}

func auditWith(t *testing.T, run func(*testing.T, ...string) (string, error), args ...string) (*certification.Report, string, string, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "audit")
	stdout, err := run(t, append([]string{"audit", "-o", out}, args...)...)
	b, rerr := os.ReadFile(filepath.Join(out, "audit.json"))
	if rerr != nil {
		t.Fatalf("no audit.json (%v): %v\n%s", err, rerr, stdout)
	}
	var rep certification.Report
	if jerr := json.Unmarshal(b, &rep); jerr != nil {
		t.Fatal(jerr)
	}
	return &rep, out, stdout, err
}

// TestAuditDemo: the demo release passes with 0 unowned files, but with
// caveats (Sisyphus builds in a p11 release), and says so in every format;
// the JSON follows the documented schema, the Markdown states the JSON's
// figures, and headless Chromium renders the HTML with the verdict in its
// own colour and the charts.
func TestAuditDemo(t *testing.T) {
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(d.dir, "release", "dev")
	rep, out, stdout, err := runAudit(t, "--key", d.devPub, layout)
	if err != nil || rep.Verdict != "pass" || rep.Outcome != certification.OutcomeCaveats || rep.Policy.Base.Result != certification.OutcomeCaveats {
		t.Fatalf("audit of the demo release: %v, verdict %s (%s, single base %s): %v\n%s", err, rep.Verdict, rep.Outcome, rep.Policy.Base.Result, rep.Reasons, stdout)
	}
	if rep.Files.Unowned != 0 || rep.Files.Total == 0 || rep.Files.Packaged+rep.Files.Generated != rep.Files.Total {
		t.Errorf("files: %+v", rep.Files.Total)
	}
	// The published root filesystem was unpacked and every path of it
	// compared with the report's.
	rootfs := 0
	for _, f := range rep.Files.List {
		if strings.HasPrefix(f.Artifact, "rootfs/") {
			rootfs++
		}
	}
	if rep.Files.Unpacked == 0 || rep.Files.Unpacked != rootfs {
		t.Errorf("%d paths unpacked from rootfs.sqsh, the report lists %d", rep.Files.Unpacked, rootfs)
	}
	if len(rep.Packages) == 0 || len(rep.Artifacts) < 13 || rep.Identity.LockSHA256 == "" || rep.Identity.Channel != "dev" || len(rep.Identity.Base) == 0 {
		t.Errorf("report: %d packages, %d artifacts, identity %+v", len(rep.Packages), len(rep.Artifacts), rep.Identity)
	}
	for _, p := range rep.Packages {
		if p.Repository != "demo" || p.SignedBy == "" || p.SHA256 == "" {
			t.Errorf("package %+v", p)
		}
	}
	t.Logf("demo audit: %d artifacts, %d packages, %d files (%d from packages, %d from generators), %d scriptlets",
		len(rep.Artifacts), len(rep.Packages), rep.Files.Total, rep.Files.Packaged, rep.Files.Generated, len(rep.Policy.Scriptlets))

	// The JSON follows docs/audit.schema.json.
	c := jsonschema.NewCompiler()
	schema, err := c.Compile(filepath.Join(testutil.RepoRoot(), "docs", "audit.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(out, "audit.json"))
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Errorf("audit.json does not follow docs/audit.schema.json: %v", err)
	}

	// The Markdown states the same figures.
	md, _ := os.ReadFile(filepath.Join(out, "audit.md"))
	s := rep.Summary()
	for _, want := range []string{
		fmt.Sprintf("## Verdict: PASS with %d caveats\n\n**pass with caveats**: no check failed", len(rep.Caveats)),
		`- single base "demo": pass with caveats: `,
		"; built for p11 (",
		" packages), sisyphus (",
		fmt.Sprintf("## Artifacts (%d)", s.Artifacts),
		fmt.Sprintf("## Packages (%d)", s.Packages),
		fmt.Sprintf("%d files in all: %d from packages, %d from builder generators, **%d unowned**. %d paths of the published root filesystem images", s.Files, s.FromPackages, s.FromGenerators, s.Unowned, s.Unpacked),
		fmt.Sprintf("## Licenses (%d)", s.Licenses),
		fmt.Sprintf("- scriptlets: %d, none executed", s.Scriptlets),
	} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("audit.md lacks %q", want)
		}
	}
	if n := strings.Count(string(md), "\n| ") - strings.Count(string(md), "\n| ---"); n < s.Packages+s.Artifacts {
		t.Errorf("audit.md has %d table rows, fewer than the %d packages and %d artifacts", n, s.Packages, s.Artifacts)
	}

	checkHTMLInChromium(t, filepath.Join(out, "audit.html"), certification.OutcomeCaveats)
	checkLayoutInChromium(t, filepath.Join(out, "audit.html"))
	checkCaveats(t, d, layout, rep)
}

// checkHTMLInChromium renders the page headless: no console message, the
// DOM holds the verdict and both charts, and the screenshot shows the
// verdict's colour and the chart's bars.
func checkHTMLInChromium(t *testing.T, page, verdict string) {
	t.Helper()
	dom, run := renderInChromium(t, page)
	if run == nil {
		return
	}
	for _, want := range []string{`id="verdict" class="` + verdict + `"`, `id="chart-packages"`, `id="chart-artifacts"`, `id="chart-dirs"`, "<rect"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	shot := filepath.Join(t.TempDir(), "audit.png")
	run("--screenshot="+shot, "--window-size=1280,2600")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	colour := map[string][3]uint32{"pass": {0x1f, 0x8a, 0x3b}, "pass-with-caveats": {0x8a, 0x53, 0x00}, "fail": {0xb3, 0x26, 0x1e}}[verdict]
	bars := [3]uint32{0x3b, 0x6f, 0xd4}
	var verdictPixels, barPixels int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			px := [3]uint32{r >> 8, g >> 8, bl >> 8}
			if px == colour {
				verdictPixels++
			}
			if px == bars {
				barPixels++
			}
		}
	}
	if verdictPixels < 500 || barPixels < 100 {
		t.Errorf("screenshot: %d pixels of the %s verdict's colour, %d of the chart's bars", verdictPixels, verdict, barPixels)
	}
}

// checkCaveats: the demo's pass comes with what a certifier must know (no
// second build compared; cni-plugins is a Sisyphus build in a p11
// release); a policy that allows only some licenses adds each package
// under another as a caveat or, by default, a failure, and one that makes
// foreign branches failures fails on cni-plugins.
func checkCaveats(t *testing.T, d *demoRelease, layout string, rep *certification.Report) {
	t.Helper()
	has := func(list []string, sub string) bool {
		return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, sub) })
	}
	const foreign = "cni-plugins-1.6.2-alt1.x86_64 was built for branch sisyphus (disttag sisyphus+385500.100.1.1), not the release's p11"
	if !has(rep.Caveats, "no reproducibility evidence") || !has(rep.Caveats, foreign) || rep.VerdictText() != fmt.Sprintf("PASS with %d caveats", len(rep.Caveats)) {
		t.Errorf("caveats of the demo: %q (%s)", rep.Caveats, rep.VerdictText())
	}
	var licensed string // a license some demo package is under
	for _, p := range rep.Packages {
		if p.Name == "containerd" {
			licensed = p.License
		}
	}
	policy := func(body string) string {
		p := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caveat := policy("licenses:\n  allowed: [" + licensed + "]\n  otherwise: caveat\n")
	got, _, _, err := runAudit(t, "--key", d.devPub, "--policy", caveat, layout)
	if err != nil || got.Verdict != "pass" || !has(got.Caveats, "which the policy does not allow") || !has(got.Caveats, foreign) {
		t.Errorf("licenses as caveats: %v, %s, %q", err, got.Verdict, got.Caveats)
	}
	strict := policy("licenses:\n  allowed: [" + licensed + "]\nforeign-branch: fail\n")
	got, _, stdout, err := runAudit(t, "--key", d.devPub, "--policy", strict, layout)
	if err == nil || got.Verdict != "fail" || !has(got.Reasons, "which the policy does not allow") || !has(got.Reasons, foreign) || has(got.Caveats, foreign) {
		t.Errorf("licenses and branches as failures: %v, %s, reasons %q\n%s", err, got.Verdict, got.Reasons, stdout)
	}
	if _, err := runBuilder(t, "audit", "-o", t.TempDir(), "--key", d.devPub, "--policy", policy("foreign-branch: maybe\n"), layout); err == nil || !strings.Contains(err.Error(), `foreign-branch "maybe": want fail or caveat`) {
		t.Errorf("a policy with a bad finding: %v", err)
	}
}

// checkLayoutInChromium loads a report page in a 1280 px window, on
// screen and as printed: the page is no wider than the window, no table
// is wider than its box (no clipped column), and it prints to PDF.
func checkLayoutInChromium(t *testing.T, page string) {
	t.Helper()
	chromium := testbrowser.Need(t)
	if chromium == "" {
		return
	}
	b := testbrowser.Start(t, chromium)
	b.Navigate(t, "file://"+page)
	const measure = `JSON.stringify({page: document.documentElement.scrollWidth - window.innerWidth,
		tables: [...document.querySelectorAll("table")].filter(t => t.scrollWidth > t.clientWidth + 1 || t.getBoundingClientRect().right > window.innerWidth).length})`
	for _, media := range []string{"screen", "print"} {
		b.Call(t, "Emulation.setEmulatedMedia", map[string]any{"media": media}, nil)
		var s string
		b.Eval(t, measure, &s)
		var got struct{ Page, Tables int }
		if err := json.Unmarshal([]byte(s), &got); err != nil {
			t.Fatal(err)
		}
		if got.Page > 0 || got.Tables > 0 {
			t.Errorf("%s (%s, 1280 px): %d px wider than the window, %d tables wider than their box", filepath.Base(page), media, got.Page, got.Tables)
		}
	}
	var pdf struct{ Data string }
	b.Call(t, "Page.printToPDF", map[string]any{"printBackground": true}, &pdf)
	if len(pdf.Data) < 1000 {
		t.Errorf("%s printed to %d bytes of PDF", filepath.Base(page), len(pdf.Data))
	}
	for _, e := range b.TakeProblems() {
		t.Errorf("%s: console: %s", filepath.Base(page), e)
	}
}

// renderInChromium renders a page headless and fails the test on a
// console message or an outside asset; it returns the rendered DOM and a
// function running chromium again with more flags (nil when there is no
// chromium here).
func renderInChromium(t *testing.T, page string) (string, func(extra ...string) (string, string)) {
	t.Helper()
	chromium := testbrowser.Need(t)
	if chromium == "" {
		return "", nil
	}
	html, _ := os.ReadFile(page)
	for _, forbidden := range []string{"<script", "https://fonts", "<link"} {
		if bytes.Contains(html, []byte(forbidden)) {
			t.Errorf("%s is not self-contained: it has %q", filepath.Base(page), forbidden)
		}
	}
	dir := t.TempDir()
	args := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--enable-logging=stderr", "--v=0", "--hide-scrollbars"}
	run := func(extra ...string) (string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, chromium, append(append(args, extra...), "file://"+page)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium: %v\n%s", err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	dom, stderr := run("--dump-dom")
	if regexp.MustCompile(`CONSOLE|Uncaught|ERROR:.*(console|javascript)`).MatchString(stderr) {
		t.Errorf("chromium logged console errors:\n%s", stderr)
	}
	return dom, run
}

// TestAuditFails: a package from a second, foreign repository fails the
// audit naming that package; a tampered signature fails it naming the image.
func TestAuditFails(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	t.Run("foreign package", func(t *testing.T) {
		d := newDemoRelease(t)
		moveToForeignRepo(t, d, "ca-certificates")
		if _, err := d.publish(t); err != nil {
			t.Fatal(err)
		}
		rep, out, stdout, err := runAudit(t, "--key", d.devPub, filepath.Join(d.dir, "release", "dev"))
		if err == nil || rep.Verdict != "fail" || !strings.Contains(strings.Join(rep.Reasons, "\n"), "ca-certificates") ||
			!strings.Contains(strings.Join(rep.Policy.Base.Outside, " "), "ca-certificates") {
			t.Errorf("audit with a foreign package: %v, %s: %v\n%s", err, rep.Verdict, rep.Reasons, stdout)
		}
		checkHTMLInChromium(t, filepath.Join(out, "audit.html"), "fail")
	})
	t.Run("tampered signature", func(t *testing.T) {
		d := newDemoRelease(t)
		if _, err := d.publish(t); err != nil {
			t.Fatal(err)
		}
		layout := filepath.Join(d.dir, "release", "dev")
		st, err := oci.OpenLayout(layout)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		inst, err := st.Head(ctx, "extensions/zfs", demoVersion)
		if err != nil {
			t.Fatal(err)
		}
		// Flip one bit of the signature, keeping the payload.
		sigs, err := st.Image(ctx, "extensions/zfs", oci.SigTag(inst.Digest))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := sigs.Manifest()
		l, _ := sigs.LayerByDigest(m.Layers[0].Digest)
		rc, _ := l.Compressed()
		var payload bytes.Buffer
		payload.ReadFrom(rc)
		rc.Close()
		sig, _ := base64.StdEncoding.DecodeString(m.Layers[0].Annotations["dev.cosignproject.cosign/signature"])
		sig[len(sig)/2] ^= 1
		tampered, err := static.NewSignature(payload.Bytes(), base64.StdEncoding.EncodeToString(sig))
		if err != nil {
			t.Fatal(err)
		}
		empty, _ := signing.EmptySignatures()
		ann, _ := tampered.Annotations()
		img, err := mutate.Append(empty, mutate.Addendum{Layer: tampered, Annotations: ann})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteImage(ctx, "extensions/zfs", oci.SigTag(inst.Digest), img); err != nil {
			t.Fatal(err)
		}
		rep, _, stdout, err := runAudit(t, "--key", d.devPub, layout)
		if err == nil || rep.Verdict != "fail" || !strings.Contains(strings.Join(rep.Reasons, "\n"), "extensions/zfs") {
			t.Errorf("audit with a tampered signature: %v, %s: %v\n%s", err, rep.Verdict, rep.Reasons, stdout)
		}
		for _, a := range rep.Artifacts {
			if a.Repository == "extensions/zfs" && a.Digest == inst.Digest.String() && a.Verified {
				t.Errorf("the tampered image is marked verified: %+v", a)
			}
		}
	})
}

// moveToForeignRepo moves the noarch package named name out of the demo
// base into a second repository, "foreign", that the spec lists after it.
func moveToForeignRepo(t *testing.T, d *demoRelease, name string) {
	t.Helper()
	noarch := filepath.Join(d.dir, "alt", "noarch", "RPMS.classic")
	entries, err := os.ReadDir(noarch)
	if err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(d.dir, "foreign", "noarch", "RPMS.classic")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	var keep, moved, all []string
	for _, e := range entries {
		p := filepath.Join(noarch, e.Name())
		if strings.HasPrefix(e.Name(), name+"-") {
			q := filepath.Join(foreign, e.Name())
			if err := os.Rename(p, q); err != nil {
				t.Fatal(err)
			}
			moved = append(moved, q)
		} else {
			keep = append(keep, p)
		}
	}
	if len(moved) == 0 {
		t.Fatalf("no %s in the demo base", name)
	}
	for _, dir := range []string{filepath.Join(d.dir, "alt", "x86_64", "RPMS.classic"), noarch, foreign} {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			all = append(all, filepath.Join(dir, e.Name()))
		}
	}
	required, err := repo.RPMFileRequires(all)
	if err != nil {
		t.Fatal(err)
	}
	key, err := demobase.Key()
	if err != nil {
		t.Fatal(err)
	}
	for dir, files := range map[string][]string{filepath.Join(d.dir, "alt", "noarch"): keep, filepath.Join(d.dir, "foreign", "noarch"): moved} {
		if err := os.RemoveAll(filepath.Join(dir, "base")); err != nil {
			t.Fatal(err)
		}
		err := repo.WriteALTDist(repo.ALTDist{Dir: dir, Components: map[string][]string{"classic": files}, Archs: []string{"x86_64", "noarch"},
			Date: time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC), Signer: key, RequiredPaths: required})
		if err != nil {
			t.Fatal(err)
		}
	}
	spec, err := os.ReadFile(d.spec)
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := demobase.Fingerprint()
	pin := "    fingerprints: [" + fp + "]\n"
	if !bytes.Contains(spec, []byte(pin)) {
		t.Fatalf("spec has no %q", pin)
	}
	spec = bytes.Replace(spec, []byte(pin), []byte(pin+"  - name: foreign\n    url: foreign\n    format: alt\n    dists: [noarch]\n    components: [classic]\n    keyring: [keys/demo.asc]\n"+pin), 1)
	if err := os.WriteFile(d.spec, spec, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAuditPrevious: --previous lists exactly the package differences of
// the two locks.
func TestAuditPrevious(t *testing.T) {
	testutil.Slow(t)
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	// The next release is a new version without the nvidia extension, so
	// its packages leave the lock.
	spec, _ := os.ReadFile(d.spec)
	const v2 = "1.11.1-demo"
	nvidia := "  nvidia:\n    kind: extension\n    packages: [kernel-modules-nvidia-std-def, nvidia-modprobe]\n"
	if !bytes.Contains(spec, []byte(nvidia)) {
		t.Fatalf("the demo spec has no %q", nvidia)
	}
	spec = bytes.Replace(spec, []byte(nvidia), nil, 1)
	os.WriteFile(d.spec, bytes.Replace(spec, []byte("version: "+demoVersion), []byte("version: "+v2), 1), 0o644)
	os.Remove(filepath.Join(d.dir, "demo.lock.json"))
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(d.dir, "release", "dev")
	rep, _, stdout, err := runAudit(t, "--key", d.devPub, "--version", v2, "--previous", layout, layout)
	if err != nil || rep.Changes == nil {
		t.Fatalf("audit --previous: %v\n%s", err, stdout)
	}
	// What the locks say differs.
	st, _ := oci.OpenLayout(layout)
	want := lockDiff(t, st, demoVersion, v2)
	got := fmt.Sprintf("added %v removed %v updated %d", rep.Changes.Added, rep.Changes.Removed, len(rep.Changes.Updated))
	if got != want || len(rep.Changes.Removed) == 0 {
		t.Errorf("changes: %s; the locks differ by: %s", got, want)
	}
	if !strings.Contains(rep.Changes.Previous, demoVersion) {
		t.Errorf("previous = %s", rep.Changes.Previous)
	}
	t.Logf("changes from %s: %s; files +%d -%d ~%d", demoVersion, got, rep.Changes.FilesAdded, rep.Changes.FilesRemoved, rep.Changes.FilesChanged)
}

// lockDiff compares two releases' locks by package NEVRA and sha256.
func lockDiff(t *testing.T, st oci.Store, a, b string) string {
	t.Helper()
	read := func(v string) map[string]string {
		raw, err := release.LockBytes(context.Background(), st, v)
		if err != nil {
			t.Fatal(err)
		}
		var l struct {
			Architectures map[string]struct {
				Packages []struct{ Name, Arch, NEVRA, SHA256 string }
			}
		}
		json.Unmarshal(raw, &l)
		out := map[string]string{}
		for _, ar := range l.Architectures {
			for _, p := range ar.Packages {
				out[p.Name+"."+p.Arch] = p.NEVRA + " " + p.SHA256
			}
		}
		return out
	}
	old, cur := read(a), read(b)
	var added, removed []string
	updated := 0
	for k, v := range cur {
		w, ok := old[k]
		switch {
		case !ok:
			added = append(added, strings.Fields(v)[0])
		case w != v:
			updated++
		}
	}
	for k, w := range old {
		if _, ok := cur[k]; !ok {
			removed = append(removed, strings.Fields(w)[0])
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	if added == nil {
		added = []string{}
	}
	if removed == nil {
		removed = []string{}
	}
	return fmt.Sprintf("added %v removed %v updated %s", added, removed, strconv.Itoa(updated))
}

// TestAuditRegistryVSA audits a release in a registry (REF form) and
// publishes the verdict as a signed SLSA verification summary, which the
// stock cosign finds and verifies.
func TestAuditRegistryVSA(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	target := reg.Host + "/nodeforge/p11"
	if _, err := d.publish(t, "--registry", target); err != nil {
		t.Fatal(err)
	}
	rep, _, stdout, err := runAudit(t, "--key", d.devPub, "--version", demoVersion, "--attest-key", d.devKey, "docker://"+target)
	if err != nil || rep.Verdict != "pass" || rep.Files.Unowned != 0 {
		t.Fatalf("audit of the registry release: %v: %v\n%s", err, rep.Reasons, stdout)
	}
	out := judge(t, "cosign", "verify-attestation", "--key", d.devPub, "--insecure-ignore-tlog", "--allow-http-registry",
		"--type", certification.PredicateVSA, target+"/installer:"+demoVersion)
	if !strings.Contains(out, `"payloadType":"application/vnd.in-toto+json"`) {
		t.Errorf("cosign found no verification summary:\n%s", out)
	}
	// The release still verifies with the summary attached.
	if out, err := runBuilder(t, "verify", "--key", d.devPub, "--version", demoVersion, "docker://"+target); err != nil {
		t.Errorf("verify after the summary: %v\n%s", err, out)
	}

	// Promoted to prod, the audit with the prod key lists the promotions.
	prod := reg.Host + "/nodeforge/prod/p11"
	if out, err := runBuilder(t, "promote", "--spec", d.spec, "--from-registry", target, "--from-key", d.devPub,
		"--to-registry", prod, "--key", d.prodKey, demoVersion); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	rep, _, stdout, err = runAudit(t, "--key", d.prodPub, "--version", demoVersion, "docker://"+prod)
	if err != nil || rep.Verdict != "pass" {
		t.Fatalf("audit of prod: %v: %v\n%s", err, rep.Reasons, stdout)
	}
	if len(rep.Promotions) < 7 {
		t.Errorf("%d promotions listed, want one per image at least: %+v", len(rep.Promotions), rep.Promotions)
	}
	for _, p := range rep.Promotions {
		if p.From != "dev" || p.To != "prod" || p.Key == "" || p.Time == "" {
			t.Errorf("promotion %+v", p)
		}
	}
}
