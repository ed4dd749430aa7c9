package kernel

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestDepmodMatchesArm64Kmod: for Debian's arm64 kernel, every module
// (3,600 of them, aarch64 ELF), Depmod writes the same index files byte
// for byte as arm64 kmod's own depmod, run here under qemu-user.
func TestDepmodMatchesArm64Kmod(t *testing.T) {
	testutil.Slow(t)
	// 3,600 modules against kmod under qemu-user; Depmod's parallel
	// reading is TestDepmodMatchesDebianFullTree's and the compressed
	// subset's, under -race.
	testutil.NoRace(t)
	testutil.NeedTool(t, "dpkg-deb")
	debs, _ := filepath.Glob(filepath.Join(kernelCacheDir, "linux-image-6.1.0-*-arm64_*_arm64.deb"))
	if len(debs) == 0 {
		testutil.Missing(t, "Debian's arm64 kernel package in "+kernelCacheDir+" (scripts/fetch-test-kernel.sh fetches it)")
	}
	sysroot := testutil.Arm64Sysroot(t)
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", debs[len(debs)-1], root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	vers, _ := filepath.Glob(filepath.Join(root, "lib", "modules", "*"))
	if len(vers) != 1 {
		t.Fatalf("module directories %v", vers)
	}
	modDir, kver := vers[0], filepath.Base(vers[0])
	in := Input{KernelVersion: kver, Files: map[string][]byte{}}
	read := func(name string) []byte { b, _ := os.ReadFile(filepath.Join(modDir, name)); return b }
	in.Builtin, in.BuiltinModinfo, in.Order = read("modules.builtin"), read("modules.builtin.modinfo"), read("modules.order")
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(modDir, p)
		data, err := os.ReadFile(p)
		in.Files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := Depmod(in)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := testutil.Arm64Command(sysroot, "depmod", "bin/kmod", "-b", root, kver).CombinedOutput(); err != nil {
		t.Fatalf("arm64 depmod -b: %v\n%s", err, out)
	}
	theirs := map[string][]byte{}
	for _, name := range OutputFiles {
		if theirs[name] = read(name); theirs[name] == nil {
			t.Fatalf("arm64 depmod wrote no %s", name)
		}
	}
	compareOutputs(t, ours, theirs)
	if !strings.HasSuffix(kver, "-arm64") || len(in.Files) < 3000 {
		t.Errorf("kernel %s with %d modules: not the arm64 package", kver, len(in.Files))
	}
	t.Logf("%s: %d modules, %d index files identical to arm64 kmod's", kver, len(in.Files), len(OutputFiles))
}
