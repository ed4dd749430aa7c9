package kernel

import (
	"bytes"
	"maps"
	"os/exec"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/nodeforge/builder/internal/testutil"
)

// Every file Depmod returns is compared byte for byte with what Debian's
// depmod (kmod 30) writes for the same tree.

func TestDepmodMatchesDebianFullTree(t *testing.T) {
	tr := debianKernel(t)
	in := Input{KernelVersion: tr.kver, Files: tr.files, Builtin: tr.builtin, BuiltinModinfo: tr.bmodinf, Order: tr.order}
	ours, err := Depmod(in)
	if err != nil {
		t.Fatal(err)
	}
	compareOutputs(t, ours, tr.outputs)
}

func TestDepmodMatchesDebianCompressedSubset(t *testing.T) {
	c := compressedCase(t)
	if n := len(c.in.Files); n < 200 {
		t.Fatalf("subset has %d modules, want a few hundred", n)
	}
	compareOutputs(t, c.ours, c.theirs)
	// The override and the extra module must have taken effect.
	dep := string(c.ours["modules.dep"])
	for _, want := range []string{"\nupdates/virtio/virtio_ring.ko.zst:", "\nextra/crc-itu-t2.ko.xz:", "extra/crc-itu-t2.ko.xz\n"} {
		if !strings.Contains(dep, want) {
			t.Errorf("modules.dep lacks %q", want)
		}
	}
	if strings.Contains(dep, "kernel/drivers/virtio/virtio_ring.ko") {
		t.Error("modules.dep still names the overridden virtio_ring")
	}
}

// Without modules.order every module is emitted in kmod's hash order, and
// depmod writes empty builtin indexes.
func TestDepmodMatchesDebianWithoutOrder(t *testing.T) {
	tr := debianKernel(t)
	in := Input{KernelVersion: tr.kver, Files: tr.testSubset()}
	ours, err := Depmod(in)
	if err != nil {
		t.Fatal(err)
	}
	_, theirs := runDebianDepmod(t, in)
	compareOutputs(t, ours, theirs)
	if len(ours["modules.builtin.bin"]) != 0 || len(ours["modules.builtin.alias.bin"]) != 0 {
		t.Error("builtin indexes without input are not empty")
	}
}

// A modules.order whose last line lacks its newline is ignored by depmod.
func TestDepmodMatchesDebianTruncatedOrder(t *testing.T) {
	tr := debianKernel(t)
	in := Input{KernelVersion: tr.kver, Files: tr.subset("kernel/drivers/virtio/", "kernel/drivers/block/"),
		Order: bytes.TrimSuffix(tr.order, []byte("\n")), Builtin: tr.builtin[:len(tr.builtin)/2]}
	ours, err := Depmod(in)
	if err != nil {
		t.Fatal(err)
	}
	_, theirs := runDebianDepmod(t, in)
	compareOutputs(t, ours, theirs)
}

// libkmod must read our indexes as it reads depmod's: modprobe resolves
// names, aliases, symbols and builtins through the .bin files.
func TestModprobeReadsOurIndexes(t *testing.T) {
	c := compressedCase(t)
	testutil.NeedTool(t, "modprobe")
	queries := []string{"squashfs", "overlay", "loop", "virtio_blk", "virtio-pci", "ext4", "btrfs",
		"fs-overlay", "fs-squashfs", "virtio:d00000002v00001AF4", "block-major-7-0", "devname:loop-control",
		"pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00", "symbol:virtio_check_driver_offered_feature",
		"crc-itu-t", "no-such-module"}
	// A builtin module and a builtin alias, from the package's own lists.
	queries = append(queries, ModuleName(strings.SplitN(string(c.in.Builtin), "\n", 2)[0]))
	for _, e := range bytes.Split(c.in.BuiltinModinfo, []byte{0}) {
		if _, alias, ok := strings.Cut(string(e), ".alias="); ok {
			queries = append(queries, alias)
			break
		}
	}
	for _, q := range queries {
		ours := showDepends(t, c.ourRoot, c.in.KernelVersion, q)
		theirs := showDepends(t, c.theirRoot, c.in.KernelVersion, q)
		if ours != theirs {
			t.Errorf("modprobe --show-depends %s:\nwith our files:\n%s\nwith depmod's:\n%s", q, ours, theirs)
		}
		if q != "no-such-module" && !strings.Contains(theirs, "insmod ") && !strings.Contains(theirs, "builtin ") {
			t.Errorf("modprobe --show-depends %s found nothing:\n%s", q, theirs)
		}
	}
}

// showDepends runs modprobe --show-depends on a root, with the root's
// path replaced so outputs for two roots compare.
func showDepends(t *testing.T, root, kver, q string) string {
	t.Helper()
	out, err := exec.Command("modprobe", "-d", root, "-S", kver, "--show-depends", q).CombinedOutput()
	s := strings.ReplaceAll(string(out), root, "ROOT")
	if err != nil {
		s += "\nexit: " + err.Error()
	}
	return s
}

// compressedResult is the shared fixture of the subset tests.
type compressedResult struct {
	in                 Input
	ours, theirs       map[string][]byte
	ourRoot, theirRoot string
}

var (
	compressedOnce sync.Once
	compressed     *compressedResult
)

// compressedCase is the test subset with a third of the modules as .ko.xz
// and a third as .ko.zst, virtio_ring overridden from updates/, and an
// extra module outside modules.order that takes over crc-itu-t's symbols.
// Both depmods run once per test binary.
func compressedCase(t testing.TB) *compressedResult {
	tr := debianKernel(t)
	compressedOnce.Do(func() {
		sub := tr.testSubset()
		in := Input{KernelVersion: tr.kver, Files: map[string][]byte{}, Builtin: tr.builtin, BuiltinModinfo: tr.bmodinf, Order: tr.order}
		paths := slices.Sorted(maps.Keys(sub))
		for i, p := range paths {
			switch i % 3 {
			case 0:
				in.Files[p] = sub[p]
			case 1:
				in.Files[p+".xz"] = xzCLIBytes(t, sub[p])
			case 2:
				in.Files[p+".zst"] = zstdBytes(t, sub[p])
			}
		}
		in.Files["updates/virtio/virtio_ring.ko.zst"] = zstdBytes(t, tr.files["kernel/drivers/virtio/virtio_ring.ko"])
		in.Files["extra/crc-itu-t2.ko.xz"] = xzBytes(t, tr.files["kernel/lib/crc-itu-t.ko"])
		in.Files["kernel/fs/README"] = []byte("not a module\n")
		ours, err := Depmod(in)
		if err != nil {
			t.Fatal(err)
		}
		r := &compressedResult{in: in, ours: ours}
		r.theirRoot, r.theirs = runDebianDepmodShared(t, in)
		r.ourRoot = writeOutputsShared(t, in, ours)
		compressed = r
	})
	if compressed == nil {
		t.Fatal("the compressed subset fixture failed earlier")
	}
	return compressed
}

// xzCLIBytes compresses as the kernel's modules_install does, with the xz
// tool when it is there (much faster than the Go writer under -race).
func xzCLIBytes(t testing.TB, data []byte) []byte {
	if _, err := exec.LookPath("xz"); err != nil {
		return xzBytes(t, data)
	}
	// The kernel uses xz's default preset; 1 is quicker and as valid.
	cmd := exec.Command("xz", "--check=crc32", "--lzma2=preset=1,dict=1MiB", "-c")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xz: %v", err)
	}
	return out
}

func xzBytes(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	// The kernel's own settings (scripts/Makefile.modinst).
	w, err := xz.WriterConfig{CheckSum: xz.CRC32, DictCap: 1 << 20}.NewWriter(&b)
	if err == nil {
		_, err = w.Write(data)
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zstdBytes(t testing.TB, data []byte) []byte {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(data, nil)
}

// moduleRel turns a modprobe insmod line's path back into a modules.dep path.
func moduleRel(line, kver string) (string, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "insmod" {
		return "", false
	}
	_, rel, ok := strings.Cut(f[1], "/lib/modules/"+kver+"/")
	return path.Clean(rel), ok
}
