package builder

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// TestBootExtensions proves the extensions work, not only that they are
// stacked: a base with the cri and btrfs extensions made from Debian's
// containerd, runc, CNI plugins and btrfs-progs (pkgbase/testbase,
// Options.Extensions) is locked and built for a schematic asking for both,
// and its ISO boots under OVMF (TCG) with two more virtio disks: one
// holding a container image (the init in hello mode, an OCI archive
// written raw) and a blank scratch disk. The node init starts containerd
// from the cri extension, imports the image, runs it with ctr and runc and
// prints what the container printed; it formats the scratch disk with the
// btrfs extension's mkfs.btrfs, mounts it with the kernel's btrfs module
// (signature enforced), writes a file and reads it back.
func TestBootExtensions(t *testing.T) {
	testutil.Slow(t)
	testutil.NoRace(t)
	t0 := time.Now()
	specPath := testbase.ForTest(t, testbase.Options{Extensions: true})
	qemu := testutil.NeedTool(t, "qemu-system-x86_64")
	baseTime := time.Since(t0)

	t1 := time.Now()
	d := lockSpec(t, specPath)
	s := d.spec
	_, rep, media := d.buildSchematic(t, "customization:\n  systemExtensions:\n    officialExtensions: [cri, btrfs]\n")
	id := rep.Media.Schematic
	buildTime := time.Since(t1)
	for name, e := range rep.Architectures["x86_64"].Extensions {
		t.Logf("extension %s %s: packages %v, %d files", name, e.Version, e.Packages, len(e.Files))
	}
	checkRelocated(t, rep, "x86_64")

	iso := filepath.Join(media, "metal-x86_64.iso")
	want := "NODEFORGE-BOOT-OK PRETTY_NAME=" + s.Image.OS.PrettyName
	args := append(append(append(append([]string{}, testutil.TCG...), testutil.OVMF(t)...), "-cdrom", iso), testbase.ExtensionDisks(t, specPath)...)
	lines := append([]string{testbase.SchematicLine(id)}, testbase.ExtensionBootLines...)
	res := testutil.BootCheck(t, qemu, "ISO with cri and btrfs under OVMF", want, testutil.BootTimeout(t, 2*testutil.BootTimeoutDefault), args, lines...)
	testbase.LogExtensionSteps(t, "ISO with cri and btrfs", res)
	if fi, err := os.Stat(iso); err == nil {
		t.Logf("ISO: %d MB", fi.Size()>>20)
	}
	t.Logf("timings: base %s, lock and build %s, boot to marker %s (qemu ran %s)", baseTime.Round(time.Millisecond),
		buildTime.Round(time.Millisecond), res.ToMarker.Round(time.Millisecond), res.Total.Round(time.Millisecond))
}

// checkRelocated: in the report of a build with the cri and btrfs
// extensions, Debian's layout is placed by the definitions' rules: each
// relocated file of an architecture keeps its package and the path it had
// there; links are the builder's.
func checkRelocated(t *testing.T, rep *report.Report, arch string) {
	t.Helper()
	for ext, want := range map[string]map[string]string{
		"cri":   {"/usr/local/bin/containerd": "/usr/bin/containerd", "/usr/local/lib/cni/bin/loopback": "/usr/lib/cni/loopback"},
		"btrfs": {"/usr/local/sbin/mkfs.btrfs": "/sbin/mkfs.btrfs", "/usr/local/sbin/btrfs": "generator extension-link"},
	} {
		for _, f := range rep.Architectures[arch].Extensions[ext].Files {
			if w, ok := want[f.Path]; ok {
				if got := f.Origin.Path; got != w && f.Origin.String() != "builder "+w || got != "" && f.Origin.Package == "" {
					t.Errorf("%s: extension %s: %s has origin %+v, want %s", arch, ext, f.Path, f.Origin, w)
				}
				delete(want, f.Path)
			}
		}
		if len(want) > 0 {
			t.Errorf("%s: extension %s lacks %v", arch, ext, want)
		}
	}
}
