package builder

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// TestBootDebianKernel is the end-to-end test: a package base made from
// Debian's real kernel (wrapped into RPMs with Debian's rpmbuild) and a
// tiny static init (cmd/nodeforge-init) is locked and built, and qemu boots
// the result: the init loads the boot modules from the initramfs, mounts
// rootfs.sqsh under a tmpfs overlay and prints the root's PRETTY_NAME.
// It prints the command line it was given too: the schematic's media
// carry Talos's platform arguments and its META value
// (talos.environment=INSTALLER_META_BASE64), which it decodes.
// The base is cached (see pkgbase/testbase); NODEFORGE_BOOT_INITRAMFS=xz
// boots an xz initramfs instead of the default zstd one.
func TestBootDebianKernel(t *testing.T) {
	testutil.Slow(t)
	testutil.NoRace(t)
	t0 := time.Now()
	specPath := testbase.ForTest(t, testbase.Options{InitramfsCompression: os.Getenv("NODEFORGE_BOOT_INITRAMFS")})
	qemu := testutil.NeedTool(t, "qemu-system-x86_64")
	baseTime := time.Since(t0)
	if info, err := testbase.ReadInfo(specPath); err == nil {
		t.Logf("base: %s %s (kernel %s, %d modules), RPMs %v", info.DebPackage, info.DebVersion, info.KernelVersion, len(info.Modules), info.RPMs)
	}

	t1 := time.Now()
	d := lockSpec(t, specPath)
	s, l, lockBytes, c := d.spec, d.lock, d.lockBytes, d.cache
	lockTime := time.Since(t1)
	t2 := time.Now()
	// The schematic adds boot media with the base's extension appended, and
	// a META value (the upstream factory's test value), which the command
	// line of the PXE and ISO media carries as Talos's does.
	schYAML := "customization:\n  systemExtensions:\n    officialExtensions: [testext]\n  meta:\n    - key: 0xa\n      value: '{\"externalIPs\":[\"1.2.3.4\"]}'\n"
	out, rep, media := d.buildSchematic(t, schYAML)
	sch, err := schematic.Parse([]byte(schYAML))
	if err != nil {
		t.Fatal(err)
	}
	id, err := sch.ID()
	if err != nil {
		t.Fatal(err)
	}
	buildTime := time.Since(t2)
	ar := rep.Architectures["x86_64"]
	t.Logf("built: kernel %s, %d modules, boot modules %v; initramfs.xz (%s) %d bytes, rootfs.sqsh %d bytes",
		ar.Kernel.Version, ar.Kernel.Modules, ar.Kernel.BootModules, s.Image.InitramfsCompression,
		rep.Artifacts["x86_64/initramfs.xz"].Size, rep.Artifacts["x86_64/rootfs.sqsh"].Size)

	dir := filepath.Join(out, "x86_64")
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	want := "NODEFORGE-BOOT-OK PRETTY_NAME=" + s.Image.OS.PrettyName
	timeout := testutil.BootTimeout(t, testutil.BootTimeoutDefault)
	direct := func(initrd, cmdline string) []string {
		return []string{"-kernel", filepath.Join(dir, "vmlinuz"), "-initrd", initrd, "-append", cmdline}
	}
	boot := func(what string, media []string, lines ...string) *testutil.BootResult {
		t.Helper()
		res := testutil.BootCheck(t, qemu, what, want, timeout, append(append([]string{}, testutil.TCG...), media...), lines...)
		// Without the cri and btrfs extensions the init starts neither
		// (TestBootExtensions boots with them).
		testbase.NoHandover(t, what, res)
		t.Logf("%s: timings: base %s, lock %s, build %s, boot to marker %s (qemu ran %s)", what,
			baseTime.Round(time.Millisecond), lockTime.Round(time.Millisecond), buildTime.Round(time.Millisecond),
			res.ToMarker.Round(time.Millisecond), res.Total.Round(time.Millisecond))
		return res
	}
	// The release's own initramfs names no schematic.
	boot("initramfs.xz", direct(filepath.Join(dir, "initramfs.xz"), strings.TrimSpace(string(cmdline))), testbase.NoSchematicLine)

	// The same kernel with the schematic's initramfs: the extension layer is
	// stacked on the root and its file is visible there.
	mcmd, err := os.ReadFile(filepath.Join(media, "cmdline-metal-x86_64"))
	if err != nil {
		t.Fatal(err)
	}
	// The init reads the platform's Talos arguments (metal's console
	// first, the release's beside it) and the META value back.
	// The node init's banner names the release, the schematic (its layer,
	// after the extension's) and the extension, and every step reports.
	extLines := []string{"nodeforge-init: extension layer 0.sqsh", "nodeforge-init: extension layer 1.sqsh", "nodeforge-init: check testext: " + testbase.ExtCheckContent,
		`nodeforge-init: META 0xa={"externalIPs":["1.2.3.4"]}`,
		"nodeforge-init:   release     " + s.Image.OS.PrettyName, testbase.SchematicLine(id), "nodeforge-init:   extensions  testext",
		"nodeforge-init: [6/7] banner printed", "nodeforge-init: [7/7] boot complete"}
	talosArgs := func(what string, res *testutil.BootResult) {
		t.Helper()
		got := res.Find("nodeforge-init: cmdline: ")
		for _, a := range []string{" talos.platform=metal console=tty0 console=ttyS0 ", " talos.environment=INSTALLER_META_BASE64=MHhhPXsiZXh0ZXJuYWxJUHMiOlsiMS4yLjMuNCJdfQ=="} {
			if !strings.Contains(got+" ", a) {
				t.Errorf("%s: the init's command line lacks %q: %s", what, strings.TrimSpace(a), got)
			}
		}
	}
	if strings.HasSuffix(string(mcmd), "\n") {
		t.Error("cmdline-metal-x86_64 ends in a newline")
	}
	talosArgs("initramfs with testext appended", boot("initramfs with testext appended", direct(filepath.Join(media, "initramfs-x86_64.xz"), string(mcmd)), extLines...))

	// The ISO under UEFI firmware (Debian's OVMF): systemd-boot from the
	// base loads the same kernel and initramfs from the El Torito image.
	talosArgs("ISO under OVMF", boot("ISO under OVMF", append(testutil.OVMF(t), "-cdrom", filepath.Join(media, "metal-x86_64.iso")), extLines...))
	// The same ISO as a disk (written to a USB stick with dd): the
	// firmware finds the EFI system partition in its GPT.
	boot("ISO as a disk under OVMF", append(testutil.OVMF(t), "-drive", "if=virtio,format=raw,readonly=on,file="+filepath.Join(media, "metal-x86_64.iso")), extLines...)
	// Secure Boot: the same kernel, initramfs and command line as a UKI,
	// signed, under firmware that enforces it (issue 21).
	bootUKISecure(t, qemu, filepath.Join(dir, "vmlinuz"), filepath.Join(media, "initramfs-x86_64.xz"), strings.TrimSpace(string(mcmd)), want, timeout)

	// The builder's own Secure Boot media: enrolled in setup mode (with
	// Microsoft's certificates, secureboot.includeWellKnownCertificates),
	// then booted with Secure Boot on.
	sbSch := *sch
	sbSch.Customization.SecureBoot.IncludeWellKnownCertificates = true
	bootSecureBootMedia(t, qemu, Options{Spec: s, Lock: l, LockBytes: lockBytes, Out: filepath.Join(t.TempDir(), "out"), Cache: c, Version: "test", Schematic: &sbSch}, want, timeout)

	fd, err := exec.Command(testutil.NeedTool(t, "fdisk"), "-l", filepath.Join(media, "metal-x86_64.iso")).CombinedOutput()
	if err != nil || !strings.Contains(string(fd), "Disklabel type: gpt") || !strings.Contains(string(fd), "EFI System") {
		t.Errorf("fdisk -l finds no EFI system partition on the ISO: %v\n%s", err, fd)
	}
}
