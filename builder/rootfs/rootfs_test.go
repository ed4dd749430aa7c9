package rootfs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/demobase"
)

// demoTree lays every x86_64 and noarch demo package (newest versions
// only) into a tree.
func demoTree(t *testing.T) *Tree {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "alt", "*", "RPMS.classic", "*.rpm"))
	tr := New()
	for _, f := range files {
		b := filepath.Base(f)
		if strings.Contains(b, "6.12.30") || strings.Contains(b, "396318") {
			continue // the older kernel and its module: a second kernel would not conflict, but keep one
		}
		if _, err := tr.AddRPM(f, report.Origin{Package: b}, LayOptions{}); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	return tr
}

func owners() Owners {
	return Owners{Users: map[string]int{"root": 0, "containerd": 990}, Groups: map[string]int{"root": 0, "containerd": 990}}
}

func TestSquashfsReproducibleAndListed(t *testing.T) {
	testutil.NeedTool(t, "tar2sqfs")
	unsq := testutil.NeedTool(t, "unsquashfs")
	tr := demoTree(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.sqsh"), filepath.Join(dir, "b.sqsh")
	if err := tr.WriteSquashfs(context.Background(), a, owners(), 1700000000, SquashfsOptions{Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tr.WriteSquashfs(context.Background(), b, owners(), 1700000000, SquashfsOptions{Jobs: 4}); err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Fatal("squashfs differs between 1 and 4 compressor jobs")
	}
	out, err := exec.Command(unsq, "-lls", "-n", a).CombinedOutput()
	if err != nil {
		t.Fatalf("unsquashfs: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "squashfs-root/usr/libexec/talos/init") {
		t.Errorf("listing lacks talos init:\n%s", out)
	}
}
