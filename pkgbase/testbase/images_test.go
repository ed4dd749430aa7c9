package testbase

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestImagesBase: the images' packages carry the shared-library provides
// and requires rpm's elfdeps would write, as rpm -qp reads them: libc6
// provides libc.so.6 and its symbol versions, xorriso requires the
// libraries it loads and not what it provides itself, busybox-static
// (static) and ca-certificates (no ELF) require nothing.
func TestImagesBase(t *testing.T) {
	rpmTool := testutil.NeedTool(t, "rpm")
	spec := ForTest(t, Options{Images: true})
	q := func(name, tag string) string {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(filepath.Dir(spec), RepoDir, "RPMS", name+"-[0-9]*.rpm"))
		if len(files) != 1 {
			t.Fatalf("%s: %v", name, files)
		}
		out, err := exec.Command(rpmTool, "-qp", "--nosignature", "--qf", "[%{"+tag+"}\n]", files[0]).CombinedOutput()
		if err != nil {
			t.Fatalf("rpm -qp %s: %v\n%s", name, err, out)
		}
		return string(out)
	}
	if p := q("libc6", "PROVIDENAME"); !strings.Contains(p, "libc.so.6()(64bit)\n") || !strings.Contains(p, "libc.so.6(GLIBC_2.34)(64bit)\n") || !strings.Contains(p, "ld-linux-x86-64.so.2()(64bit)\n") {
		t.Errorf("libc6 provides:\n%s", p)
	}
	if r := q("libc6", "REQUIRENAME"); strings.Contains(r, "libc.so.6") {
		t.Errorf("libc6 requires what it provides:\n%s", r)
	}
	if r := q("xorriso", "REQUIRENAME"); !strings.Contains(r, "libisoburn.so.1()(64bit)\n") || !strings.Contains(r, "libc.so.6(GLIBC_2.34)(64bit)\n") {
		t.Errorf("xorriso requires:\n%s", r)
	}
	if r := q("libisoburn1", "REQUIRENAME"); !strings.Contains(r, "libreadline.so.8()(64bit)\n") {
		t.Errorf("libisoburn1 requires:\n%s", r)
	}
	for _, name := range []string{"busybox-static", "ca-certificates"} {
		if r := q(name, "REQUIRENAME"); strings.Contains(r, "()(64bit)") {
			t.Errorf("%s requires:\n%s", name, r)
		}
	}
}
