package testbase

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// ExtensionBootLines are the console lines a boot of the extensions'
// base with the cri and btrfs extensions (and ExtensionDisks) shows: the
// node init started containerd from the cri extension, ran the image with
// runc, printed what the container printed, and made, mounted and used a
// btrfs file system with the btrfs extension's tools.
var ExtensionBootLines = []string{
	"nodeforge-init:   extensions  btrfs 6.2, cri 1.6.20",
	"nodeforge-init: [cri 1/5] containerd 1.6.20",
	"nodeforge-init: [cri 3/5] runc version 1.1.5",
	"nodeforge-init: [cri 4/5] image " + HelloImageName + " imported from /dev/vd",
	"nodeforge-init: container printed: hello from a container: pid 1,",
	"nodeforge-init: [cri 5/5] container nodeforge-hello",
	"nodeforge-init: [btrfs 1/4] module btrfs loaded",
	"nodeforge-init: [btrfs 2/4] /dev/vd",
	"nodeforge-init: [btrfs 3/4] btrfs mounted",
	"nodeforge-init: [btrfs 4/4] btrfs file read back: /var/mnt/scratch/hello.txt: written by nodeforge-init on btrfs",
	"nodeforge-init: zfs, nvidia: not in this base",
	"nodeforge-init: [7/7] boot complete",
}

// HandoverLine is what the node init prints when it hands over to the cri
// or btrfs extension: a boot without them never shows it.
const HandoverLine = "nodeforge-init: switched into the stacked root"

// ExtensionDisks returns qemu's arguments for the two virtio disks of an
// extensions' boot, found by the init by serial number: the base's
// container image (HelloImage beside specPath, read-only) and a blank
// scratch disk (sparse, 256 MB: above mkfs.btrfs's minimum), fresh for
// each call.
func ExtensionDisks(t testing.TB, specPath string) []string {
	t.Helper()
	scratch := filepath.Join(t.TempDir(), "scratch.img")
	if err := os.WriteFile(scratch, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(scratch, 256<<20); err != nil {
		t.Fatal(err)
	}
	return []string{
		"-drive", "if=none,id=images,format=raw,readonly=on,file=" + filepath.Join(filepath.Dir(specPath), HelloImage),
		"-device", "virtio-blk-pci,drive=images,serial=nodeforge-images",
		"-drive", "if=none,id=scratch,format=raw,file=" + scratch,
		"-device", "virtio-blk-pci,drive=scratch,serial=nodeforge-scratch",
	}
}

// LogExtensionSteps logs the boot's cri and btrfs step lines.
func LogExtensionSteps(t testing.TB, what string, res *testutil.BootResult) {
	t.Helper()
	for _, l := range res.Lines {
		if strings.Contains(l, "nodeforge-init: [cri ") || strings.Contains(l, "nodeforge-init: [btrfs ") || strings.Contains(l, "container printed") {
			t.Logf("%s: %s", what, l)
		}
	}
}

// NoHandover fails the test when a boot without the cri and btrfs
// extensions handed over to them.
func NoHandover(t testing.TB, what string, res *testutil.BootResult) {
	t.Helper()
	if l := res.Find(HandoverLine); l != "" {
		t.Errorf("%s: the init handed over without the cri or btrfs extension: %s", what, l)
	}
}
