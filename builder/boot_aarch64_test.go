package builder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// TestBootAarch64 builds a node OS for x86_64 and aarch64 on this x86_64
// host from Debian's amd64 and arm64 kernels (nothing runs emulated: the
// builder executes no target binary) and boots the aarch64 ISO and raw
// disk under qemu-system-aarch64 (virt, TCG) with Debian's AAVMF: the
// firmware finds EFI/BOOT/BOOTAA64.EFI (the base's arm64 systemd-boot),
// the init loads its modules, signature enforcement on, through the
// module indexes the builder wrote, and stacks the extensions. The base
// is the extensions' one for both architectures (Debian's arm64
// containerd, runc, CNI plugins and btrfs-progs wrapped as aarch64 RPMs):
// the ISO boots the testext schematic, the raw disk the cri and btrfs
// one, with the image and scratch disks, to every marker of
// TestBootExtensions (testbase.ExtensionBootLines).
func TestBootAarch64(t *testing.T) {
	testutil.Slow(t)
	testutil.NoRace(t)
	t0 := time.Now()
	specPath := testbase.ForTest(t, testbase.Options{Arches: []string{"x86_64", "aarch64"}, Extensions: true})
	a, _ := target.Lookup("aarch64")
	qemu := testutil.NeedTool(t, a.QEMU.Binary)
	code := testutil.NeedFile(t, "/usr/share/AAVMF/AAVMF_CODE.fd", "qemu-efi-aarch64")
	varsTemplate, err := os.ReadFile(testutil.NeedFile(t, "/usr/share/AAVMF/AAVMF_VARS.fd", "qemu-efi-aarch64"))
	if err != nil {
		t.Fatal(err)
	}
	baseTime := time.Since(t0)
	d := lockSpec(t, specPath)
	s := d.spec
	// Talos's metal arguments on arm64 end in console=tty0, a screen (the
	// kernel's /dev/console is the last console named); the test reads the
	// serial port, so the schematics name it, as a Talos user does: a
	// schematic's console= replaces the platform's.
	build := func(exts, format string) (*report.Report, string, string, time.Duration) {
		t.Helper()
		sch, err := schematic.Parse([]byte("customization:\n  extraKernelArgs: [console=ttyAMA0]\n  systemExtensions:\n    officialExtensions: [" + exts + "]\n"))
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		out := filepath.Join(t.TempDir(), "out")
		rep, err := Build(context.Background(), Options{Spec: s, Lock: d.lock, LockBytes: d.lockBytes, Out: out, Cache: d.cache, Version: "test", Schematic: sch,
			DiskFormats: []string{format}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Architectures["aarch64"] == nil || rep.Architectures["x86_64"] == nil {
			t.Fatalf("the report has architectures %v", rep.Architectures)
		}
		id, _ := sch.ID()
		media := filepath.Join(out, "media", id, "metal-aarch64."+format)
		return rep, media, testbase.SchematicLine(id), time.Since(t1)
	}
	rep, iso, isoSchematic, isoBuild := build("testext", "iso")
	ar := rep.Architectures["aarch64"]
	if !strings.HasSuffix(ar.Kernel.Version, "-arm64") || ar.Kernel.Modules == 0 {
		t.Errorf("aarch64 kernel: %+v", ar.Kernel)
	}
	extRep, raw, rawSchematic, rawBuild := build("cri, btrfs", "raw")
	checkRelocated(t, extRep, "aarch64")
	want := "NODEFORGE-BOOT-OK PRETTY_NAME=" + s.Image.OS.PrettyName
	modules := "nodeforge-init: [2/7] boot modules loaded from " + ar.Kernel.Version + ": "
	// Debian's arm64 kernel signs its return addresses (pointer
	// authentication): TCG's QARMA5 costs most of a boot, its
	// implementation-defined algorithm runs the same code faster.
	machine := []string{"-M", a.QEMU.Machine, "-accel", "tcg", "-cpu", a.QEMU.CPU + ",pauth-impdef=on", "-m", "1024", "-smp", "2"}
	for _, c := range []struct {
		what    string
		build   time.Duration
		timeout time.Duration
		media   []string
		lines   []string
	}{
		{"aarch64 ISO (testext) under AAVMF", isoBuild, testutil.BootTimeoutDefault, []string{"-device", "virtio-scsi-pci", "-device", "scsi-cd,drive=cd",
			"-drive", "if=none,id=cd,media=cdrom,readonly=on,file=" + iso}, []string{modules, isoSchematic, "nodeforge-init: check testext: " + testbase.ExtCheckContent}},
		{"aarch64 raw disk (cri, btrfs) under AAVMF", rawBuild, 2 * testutil.BootTimeoutDefault,
			append([]string{"-drive", "if=virtio,format=raw,snapshot=on,file=" + raw}, testbase.ExtensionDisks(t, specPath)...),
			append([]string{modules, rawSchematic}, testbase.ExtensionBootLines...)},
	} {
		vars := filepath.Join(t.TempDir(), "vars.fd")
		if err := os.WriteFile(vars, varsTemplate, 0o644); err != nil {
			t.Fatal(err)
		}
		firmware := []string{"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code, "-drive", "if=pflash,format=raw,unit=1,file=" + vars}
		res := testutil.BootCheck(t, qemu, c.what, want, testutil.BootTimeout(t, c.timeout), append(append(machine, firmware...), c.media...), c.lines...)
		testbase.LogExtensionSteps(t, c.what, res)
		t.Logf("%s: base %s, build of both architectures %s, boot to marker %s (qemu ran %s)", c.what,
			baseTime.Round(time.Millisecond), c.build.Round(time.Millisecond), res.ToMarker.Round(time.Millisecond), res.Total.Round(time.Millisecond))
	}
	refuseWrongMachine(t, d)
}

// refuseWrongMachine: with the x86_64 kernel package in the aarch64
// kernel component (a lock edited by hand), the build refuses, naming a
// module file of it and its package, before anything is written.
func refuseWrongMachine(t *testing.T, d *demoRelease) {
	t.Helper()
	l, err := lock.Parse(d.lockBytes, "lock")
	if err != nil {
		t.Fatal(err)
	}
	var x86 *lock.Package
	for i, p := range l.Architectures["x86_64"].Packages {
		if p.Name == testbase.KernelPackage {
			x86 = &l.Architectures["x86_64"].Packages[i]
		}
	}
	arm := l.Architectures["aarch64"]
	for i, p := range arm.Packages {
		if p.Name == testbase.KernelPackage {
			for c, list := range arm.Components {
				for j, n := range list {
					if n == p.NEVRA {
						arm.Components[c][j] = x86.NEVRA
					}
				}
			}
			arm.Packages[i] = *x86
		}
	}
	b, _ := l.Marshal()
	out := filepath.Join(t.TempDir(), "out")
	_, err = Build(context.Background(), Options{Spec: d.spec, Lock: l, LockBytes: b, Out: out, Cache: d.cache, Version: "test"})
	var wm *rootfs.WrongMachineError
	if !errors.As(err, &wm) || !strings.HasSuffix(wm.Path, ".ko") || wm.Package != x86.NEVRA || !strings.Contains(err.Error(), "aarch64") {
		t.Fatalf("an x86_64 kernel in the aarch64 component: %v", err)
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Errorf("the refused build left %s", out)
	}
	t.Logf("refused: %v", err)
}
