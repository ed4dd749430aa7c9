package build

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testbase"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestBootExtensions proves the extensions work, not only that they are
// stacked: a base with the cri and btrfs extensions made from Debian's
// containerd, runc, CNI plugins and btrfs-progs (internal/testbase,
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
	t0 := time.Now()
	specPath := testbase.ForTest(t, testbase.Options{Extensions: true})
	qemu := testutil.NeedTool(t, "qemu-system-x86_64")
	baseTime := time.Since(t0)

	t1 := time.Now()
	d := lockSpec(t, specPath)
	s := d.spec
	_, rep, media := d.buildSchematic(t, "customization:\n  systemExtensions:\n    officialExtensions: [cri, btrfs]\n")
	buildTime := time.Since(t1)
	for name, e := range rep.Architectures["x86_64"].Extensions {
		t.Logf("extension %s %s: packages %v, %d files", name, e.Version, e.Packages, len(e.Files))
	}

	iso := filepath.Join(media, "metal-x86_64.iso")
	want := "NODEFORGE-BOOT-OK PRETTY_NAME=" + s.Image.OS.PrettyName
	args := append(append(append(append([]string{}, testutil.TCG...), testutil.OVMF(t)...), "-cdrom", iso), testbase.ExtensionDisks(t, specPath)...)
	res := testutil.BootCheck(t, qemu, "ISO with cri and btrfs under OVMF", want, testutil.BootTimeout(t, 2*testutil.BootTimeoutDefault), args, testbase.ExtensionBootLines...)
	testbase.LogExtensionSteps(t, "ISO with cri and btrfs", res)
	if fi, err := os.Stat(iso); err == nil {
		t.Logf("ISO: %d MB", fi.Size()>>20)
	}
	t.Logf("timings: base %s, lock and build %s, boot to marker %s (qemu ran %s)", baseTime.Round(time.Millisecond),
		buildTime.Round(time.Millisecond), res.ToMarker.Round(time.Millisecond), res.Total.Round(time.Millisecond))
}
