package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/internal/testbase"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/locker"
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
	code := testutil.NeedFile(t, "/usr/share/OVMF/OVMF_CODE_4M.fd", "ovmf")
	vb, err := os.ReadFile(testutil.NeedFile(t, "/usr/share/OVMF/OVMF_VARS_4M.fd", "ovmf"))
	if err != nil {
		t.Fatal(err)
	}
	baseTime := time.Since(t0)

	t1 := time.Now()
	s, err := specs.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	c := &cache.Cache{Dir: t.TempDir()}
	l, err := locker.Create(context.Background(), s, locker.Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	lockBytes, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schematic.Parse([]byte("customization:\n  systemExtensions:\n    officialExtensions: [cri, btrfs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	rep, err := Build(context.Background(), Options{Spec: s, Lock: l, LockBytes: lockBytes, Out: out, Cache: c, Version: "test", Schematic: sch})
	if err != nil {
		t.Fatal(err)
	}
	buildTime := time.Since(t1)
	for name, e := range rep.Architectures["x86_64"].Extensions {
		t.Logf("extension %s %s: packages %v, %d files", name, e.Version, e.Packages, len(e.Files))
	}

	id, _ := sch.ID()
	iso := filepath.Join(out, "media", id, "metal-x86_64.iso")
	dir := t.TempDir()
	vars := filepath.Join(dir, "vars.fd")
	if err := os.WriteFile(vars, vb, 0o644); err != nil {
		t.Fatal(err)
	}
	// The scratch disk: sparse, above mkfs.btrfs's minimum.
	scratch := filepath.Join(dir, "scratch.img")
	if err := os.WriteFile(scratch, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(scratch, 256<<20); err != nil {
		t.Fatal(err)
	}
	image := filepath.Join(filepath.Dir(specPath), testbase.HelloImage)
	want := "NODEFORGE-BOOT-OK PRETTY_NAME=" + s.Image.OS.PrettyName
	lines := []string{
		"nodeforge-init:   extensions  btrfs 6.2, cri 1.6.20",
		"nodeforge-init: [cri 1/5] containerd 1.6.20",
		"nodeforge-init: [cri 3/5] runc version 1.1.5",
		"nodeforge-init: [cri 4/5] image " + testbase.HelloImageName + " imported from /dev/vd",
		"nodeforge-init: container printed: hello from a container: pid 1,",
		"nodeforge-init: [cri 5/5] container nodeforge-hello",
		"nodeforge-init: [btrfs 1/4] module btrfs loaded",
		"nodeforge-init: [btrfs 2/4] /dev/vd",
		"nodeforge-init: [btrfs 3/4] btrfs mounted",
		"nodeforge-init: [btrfs 4/4] btrfs file read back: /var/mnt/scratch/hello.txt: written by nodeforge-init on btrfs",
		"nodeforge-init: zfs, nvidia: not in this base",
		"nodeforge-init: [7/7] boot complete",
	}
	res := bootAndCheck(t, qemu, "ISO with cri and btrfs under OVMF", want, extensionsBootTimeout(t), []string{
		"-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "1",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
		"-cdrom", iso,
		"-drive", "if=none,id=images,format=raw,readonly=on,file=" + image,
		"-device", "virtio-blk-pci,drive=images,serial=nodeforge-images",
		"-drive", "if=none,id=scratch,format=raw,file=" + scratch,
		"-device", "virtio-blk-pci,drive=scratch,serial=nodeforge-scratch",
	}, lines...)
	for _, l := range res.Lines {
		if strings.Contains(l, "nodeforge-init: [cri ") || strings.Contains(l, "nodeforge-init: [btrfs ") || strings.Contains(l, "container printed") {
			t.Log(l)
		}
	}
	if fi, err := os.Stat(iso); err == nil {
		t.Logf("ISO: %d MB", fi.Size()>>20)
	}
	t.Logf("timings: base %s, lock and build %s, boot to marker %s (qemu ran %s)", baseTime.Round(time.Millisecond),
		buildTime.Round(time.Millisecond), res.ToMarker.Round(time.Millisecond), res.Total.Round(time.Millisecond))
}

// extensionsBootTimeout bounds the boot: containerd under TCG takes tens
// of seconds; NODEFORGE_BOOT_TIMEOUT overrides it.
func extensionsBootTimeout(t *testing.T) time.Duration {
	if v := os.Getenv("NODEFORGE_BOOT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("NODEFORGE_BOOT_TIMEOUT: %v", err)
		}
		return d
	}
	return 2 * bootTimeout
}
