package certification

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/testutil"
)

// An image made by mksquashfs (the independent writer) unpacks to what
// was put in; a report that differs from it in any field is caught.
func TestUnpackedMatchesReport(t *testing.T) {
	mksquashfs := testutil.NeedTool(t, "mksquashfs")
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "usr", "bin"), 0o755)
	content := []byte("#!/bin/sh\necho hello\n")
	os.WriteFile(filepath.Join(src, "usr", "bin", "hello"), content, 0o755)
	os.Chmod(filepath.Join(src, "usr", "bin", "hello"), 0o755|fs.ModeSetuid)
	os.Symlink("hello", filepath.Join(src, "usr", "bin", "hi"))
	img := filepath.Join(t.TempDir(), "root.sqsh")
	if out, err := exec.Command(mksquashfs, src, img, "-noappend", "-all-root", "-quiet", "-comp", "zstd").CombinedOutput(); err != nil {
		t.Fatalf("mksquashfs: %v\n%s", err, out)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := listSquashfs(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	rootMode := got["/"].mode // t.TempDir's own mode
	want := []report.FileEntry{
		{Path: "/", Type: "dir", Mode: rootMode},
		{Path: "/usr", Type: "dir", Mode: "0755"},
		{Path: "/usr/bin", Type: "dir", Mode: "0755"},
		{Path: "/usr/bin/hello", Type: "file", Mode: "4755", Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])},
		{Path: "/usr/bin/hi", Type: "symlink", Mode: "0777", Target: "hello"},
	}
	if d := compareTree(got, want); len(d) > 0 {
		t.Fatalf("an untouched image differs: %v", d)
	}
	for _, tc := range []struct {
		name   string
		change func(w []report.FileEntry) []report.FileEntry
		want   string
	}{
		{"content", func(w []report.FileEntry) []report.FileEntry { w[3].SHA256 = strings.Repeat("0", 64); return w }, "/usr/bin/hello: content"},
		{"mode", func(w []report.FileEntry) []report.FileEntry { w[3].Mode = "0755"; return w }, "mode 4755, report 0755"},
		{"owner", func(w []report.FileEntry) []report.FileEntry { w[2].UID = 1000; return w }, "owner 0:0, report 1000:0"},
		{"target", func(w []report.FileEntry) []report.FileEntry { w[4].Target = "other"; return w }, `target "hello", report "other"`},
		{"missing from the image", func(w []report.FileEntry) []report.FileEntry {
			return append(w, report.FileEntry{Path: "/etc", Type: "dir", Mode: "0755"})
		}, "/etc: in the report, not in the image"},
		{"missing from the report", func(w []report.FileEntry) []report.FileEntry { return w[:4] }, "/usr/bin/hi: in the image, not in the report"},
	} {
		w := tc.change(append([]report.FileEntry(nil), want...))
		d := compareTree(got, w)
		if len(d) != 1 || !strings.Contains(d[0], tc.want) {
			t.Errorf("%s: %v, want one difference naming %q", tc.name, d, tc.want)
		}
	}
}
