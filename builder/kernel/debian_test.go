package kernel

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// The independent judge is Debian's own depmod (kmod 30) run on a real
// Debian kernel. The kernel package is about 70 MB, so it is fetched once
// into a cache directory and extracted once per test binary.

// TestKernelPackage is the Debian package the tests download when no
// kernel .deb is cached; .ci/run fetches the same one.
const TestKernelPackage = "linux-image-6.1.0-57-amd64"

// kernelCacheDir holds downloaded kernel packages between runs.
const kernelCacheDir = "/var/cache/nodeforge"

var (
	kernelOnce sync.Once
	kernelTree *debTree
	kernelErr  string // why the kernel is unavailable
	kernelTmp  string // removed by TestMain
)

// debTree is an extracted kernel package.
type debTree struct {
	deb     string
	kver    string
	modDir  string            // <tmp>/lib/modules/<kver>
	files   map[string][]byte // every module, by path relative to modDir
	builtin []byte
	bmodinf []byte
	order   []byte
	dep     map[string][]string // the full tree's modules.dep, by Debian's depmod
	outputs map[string][]byte   // what Debian's depmod wrote for the full tree
}

func TestMain(m *testing.M) {
	code := m.Run()
	if kernelTmp != "" {
		os.RemoveAll(kernelTmp)
	}
	os.Exit(code)
}

// findKernelDeb returns a cached kernel package, downloading it if needed.
func findKernelDeb() (string, string) {
	if p := os.Getenv("NODEFORGE_TEST_KERNEL_DEB"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", "NODEFORGE_TEST_KERNEL_DEB: " + err.Error()
		}
		return p, ""
	}
	glob := func() string {
		m, _ := filepath.Glob(filepath.Join(kernelCacheDir, "linux-image-6.1.0-*-amd64_*.deb"))
		sort.Strings(m)
		for i := len(m) - 1; i >= 0; i-- {
			// cloud and rt flavours match the pattern too; they carry fewer modules.
			if b := filepath.Base(m[i]); !strings.Contains(b, "-cloud-") && !strings.Contains(b, "-rt-") {
				return m[i]
			}
		}
		return ""
	}
	if p := glob(); p != "" {
		return p, ""
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return "", "kernel package (no .deb in " + kernelCacheDir + " and no apt-get)"
	}
	if err := os.MkdirAll(kernelCacheDir, 0o755); err != nil {
		return "", "kernel package: " + err.Error()
	}
	cmd := exec.Command(apt, "download", TestKernelPackage)
	cmd.Dir = kernelCacheDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "kernel package (apt-get download " + TestKernelPackage + ": " + err.Error() + ": " + string(out) + ")"
	}
	if p := glob(); p != "" {
		return p, ""
	}
	return "", "kernel package (download left no .deb in " + kernelCacheDir + ")"
}

// debianKernel extracts the kernel package and runs Debian's depmod over
// the whole tree once, or skips (fails in CI) when anything is missing.
func debianKernel(t testing.TB) *debTree {
	t.Helper()
	for _, tool := range []string{"dpkg-deb", "depmod"} {
		testutil.NeedTool(t, tool)
	}
	kernelOnce.Do(func() {
		deb, why := findKernelDeb()
		if deb == "" {
			kernelErr = why
			return
		}
		tmp, err := os.MkdirTemp("", "kernel-test-")
		if err != nil {
			kernelErr = err.Error()
			return
		}
		kernelTmp = tmp
		root := filepath.Join(tmp, "deb")
		if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			kernelErr = "dpkg-deb -x " + deb + ": " + err.Error() + ": " + string(out)
			return
		}
		vers, _ := filepath.Glob(filepath.Join(root, "lib", "modules", "*"))
		if len(vers) != 1 {
			kernelErr = "kernel package " + deb + " holds " + strings.Join(vers, ", ") + ", want one module directory"
			return
		}
		tr := &debTree{deb: deb, kver: filepath.Base(vers[0]), modDir: vers[0], files: map[string][]byte{}}
		tr.builtin, _ = os.ReadFile(filepath.Join(tr.modDir, "modules.builtin"))
		tr.bmodinf, _ = os.ReadFile(filepath.Join(tr.modDir, "modules.builtin.modinfo"))
		tr.order, _ = os.ReadFile(filepath.Join(tr.modDir, "modules.order"))
		err = filepath.WalkDir(filepath.Join(tr.modDir, "kernel"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(tr.modDir, p)
			data, err := os.ReadFile(p)
			tr.files[filepath.ToSlash(rel)] = data
			return err
		})
		if err != nil {
			kernelErr = err.Error()
			return
		}
		out, err := exec.Command("depmod", "-b", root, tr.kver).CombinedOutput()
		if err != nil {
			kernelErr = "depmod on the full tree: " + err.Error() + ": " + string(out)
			return
		}
		tr.outputs = map[string][]byte{}
		for _, name := range OutputFiles {
			if tr.outputs[name], err = os.ReadFile(filepath.Join(tr.modDir, name)); err != nil {
				kernelErr = "depmod on the full tree: " + err.Error()
				return
			}
		}
		if tr.dep, err = ParseModulesDep(tr.outputs["modules.dep"]); err != nil {
			kernelErr = err.Error()
			return
		}
		kernelTree = tr
	})
	if kernelTree == nil {
		testutil.Missing(t, kernelErr)
	}
	return kernelTree
}

// subset returns the modules whose paths start with one of prefixes, plus
// everything they depend on, by path.
func (tr *debTree) subset(prefixes ...string) map[string][]byte {
	out := map[string][]byte{}
	for p := range tr.files {
		for _, pre := range prefixes {
			if strings.HasPrefix(p, pre) {
				out[p] = tr.files[p]
				for _, d := range tr.dep[p] {
					out[d] = tr.files[d]
				}
			}
		}
	}
	return out
}

// testSubset is the module set most tests use: filesystems, virtio, block
// devices and library modules with their dependencies (a few hundred).
func (tr *debTree) testSubset() map[string][]byte {
	return tr.subset("kernel/fs/", "kernel/drivers/virtio/", "kernel/drivers/block/", "kernel/lib/")
}

// runDebianDepmod lays the input out under a fresh root, runs Debian's
// depmod on it and returns the root and what depmod wrote.
func runDebianDepmod(t testing.TB, in Input) (string, map[string][]byte) {
	t.Helper()
	root := t.TempDir()
	return root, runDebianDepmodIn(t, root, in)
}

// runDebianDepmodShared is runDebianDepmod with a root that outlives the
// test, for fixtures shared by several tests.
func runDebianDepmodShared(t testing.TB, in Input) (string, map[string][]byte) {
	t.Helper()
	root := sharedDir(t)
	return root, runDebianDepmodIn(t, root, in)
}

func runDebianDepmodIn(t testing.TB, root string, in Input) map[string][]byte {
	t.Helper()
	dir := layOut(t, root, in)
	for name, data := range map[string][]byte{"modules.builtin": in.Builtin, "modules.builtin.modinfo": in.BuiltinModinfo, "modules.order": in.Order} {
		if data != nil {
			writeFile(t, filepath.Join(dir, name), data)
		}
	}
	if out, err := exec.Command("depmod", "-b", root, in.KernelVersion).CombinedOutput(); err != nil {
		t.Fatalf("depmod -b %s %s: %v\n%s", root, in.KernelVersion, err, out)
	}
	got := map[string][]byte{}
	for _, name := range OutputFiles {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("depmod wrote no %s: %v", name, err)
		}
		got[name] = data
	}
	return got
}

// writeOutputsShared lays the input out with our Depmod output beside it,
// so that modprobe can be pointed at it.
func writeOutputsShared(t testing.TB, in Input, ours map[string][]byte) string {
	t.Helper()
	root := sharedDir(t)
	dir := layOut(t, root, in)
	for name, data := range ours {
		writeFile(t, filepath.Join(dir, name), data)
	}
	return root
}

func sharedDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp(kernelTmp, "root-")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// layOut writes the module files under root/lib/modules/<kver>.
func layOut(t testing.TB, root string, in Input) string {
	t.Helper()
	dir := filepath.Join(root, "lib", "modules", in.KernelVersion)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, data := range in.Files {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(p)), data)
	}
	return dir
}

func writeFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// compareOutputs fails for every file that differs from depmod's.
func compareOutputs(t *testing.T, ours, theirs map[string][]byte) {
	t.Helper()
	if len(ours) != len(OutputFiles) {
		t.Errorf("Depmod returned %d files, want %d", len(ours), len(OutputFiles))
	}
	for _, name := range OutputFiles {
		a, b := ours[name], theirs[name]
		if bytes.Equal(a, b) {
			continue
		}
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		lo := max(0, i-120)
		t.Errorf("%s differs from depmod's at byte %d (ours %d bytes, depmod %d)\nours:   %q\ndepmod: %q",
			name, i, len(a), len(b), a[lo:min(len(a), i+120)], b[lo:min(len(b), i+120)])
	}
}
