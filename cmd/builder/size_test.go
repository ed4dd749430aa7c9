package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/certification"
)

// checkSize runs builder size on a build directory: the per-package
// installed bytes equal the report's file sizes summed here, the squashfs
// column sums to the image's data (everything between the superblock and
// the inode table, read from the image's own superblock), the JSON
// validates against its schema, and the HTML renders in Chromium without
// a console error.
func checkSize(t *testing.T, out string) {
	t.Helper()
	js, err := runBuilder(t, "size", "--format", "json", "--top", "0", out)
	if err != nil {
		t.Fatal(err)
	}
	validateSchema(t, "size.schema.json", []byte(js))
	var sr certification.SizeReport
	if err := json.Unmarshal([]byte(js), &sr); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{} // package -> bytes of its rootfs files
	for _, f := range rep.Architectures["x86_64"].Rootfs {
		if f.Type == "file" && f.Origin.Package != "" {
			want[f.Origin.Package] += f.Size
		}
	}
	var rootfs *certification.SizeArtifact
	for i := range sr.Artifacts {
		if sr.Artifacts[i].Name == "x86_64/rootfs.sqsh" {
			rootfs = &sr.Artifacts[i]
		}
	}
	if rootfs == nil {
		t.Fatalf("no rootfs in %s", js)
	}
	got := map[string]int64{}
	var installed, stored int64
	for _, r := range rootfs.ByPackage {
		if !strings.HasPrefix(r.Name, "generator:") {
			got[r.Name] = r.Installed
		}
		installed += r.Installed
		stored += r.Squashfs
	}
	if len(got) != len(want) {
		t.Errorf("%d packages, the report has %d", len(got), len(want))
	}
	for p, n := range want {
		if got[p] != n {
			t.Errorf("%s: %d bytes, the report's files sum to %d", p, got[p], n)
		}
	}
	img, err := os.ReadFile(filepath.Join(out, "x86_64", "rootfs.sqsh"))
	if err != nil {
		t.Fatal(err)
	}
	data := int64(binary.LittleEndian.Uint64(img[64:72])) - 96 // inode_table_start
	if installed != rootfs.Installed || stored != rootfs.Squashfs || stored != data || rootfs.Image != int64(len(img)) {
		t.Errorf("sums: installed %d of %d, squashfs %d of %d, the image's data %d, image %d of %d bytes",
			installed, rootfs.Installed, stored, rootfs.Squashfs, data, rootfs.Image, len(img))
	}
	html, err := runBuilder(t, "size", "--format", "html", out)
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "size.html")
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	if dom, run := renderInChromium(t, page); run != nil && (!strings.Contains(dom, "<rect") || !strings.Contains(dom, "x86_64/rootfs.sqsh")) {
		t.Errorf("the size page rendered without its charts")
	}
	checkLayoutInChromium(t, page)
}
