package builder

import (
	"bytes"
	"io"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/attest/sbom"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/rootfs"
)

// nodeSBOM is the SBOM of what the node OS of one architecture holds,
// every package laid into the root filesystem and the kernel: SPDX 2.3 and
// CycloneDX 1.5 JSON.
func nodeSBOM(s *specs.Spec, l *lock.Lock, arch string, packages []string, lockSHA string, sde int64, tool string) (spdx, cdx []byte, err error) {
	d := sbom.FromLock(s, l, s.Name+"-"+s.Version+"-"+arch, map[string][]string{arch: packages}, lockSHA, sde, tool)
	if spdx, err = sbom.SPDX(d); err != nil {
		return nil, nil, err
	}
	if cdx, err = sbom.CycloneDX(d); err != nil {
		return nil, nil, err
	}
	return spdx, cdx, nil
}

// installerFiles are the base's files an installer image carries: its
// installer binary, the EFI boot manager it puts on the disk (nil when
// the lock has none) and talosctl (nil unless the spec names one), with
// their packages.
type installerFiles struct {
	bin, bootloader, stub, talosctl             []byte
	binPkg, bootloaderPkg, stubPkg, talosctlPkg string
}

// installerLayers are the installer image's layers for one architecture,
// as Talos's imager lays them out: the installer, usr/bin/installer from
// the base, then the boot assets it installs, compose.InstallDir(arch)
// {vmlinuz,initramfs.xz,<name>.spdx.json,systemd-boot.efi,systemd-stub.efi,
// vmlinuz.efi} (the last three when the base has them: uki is the plain
// UKI). A schematic's installer shares the first and replaces the second.
// The second is returned as the writer of its tar: it is as large as the
// initramfs and the UKI together, and streams into its layer's file.
func installerLayers(arch, name string, vmlinuz, initramfs, spdx []byte, uki rootfs.Body, base installerFiles, sde int64) (bin []byte, assets func(io.Writer) error, err error) {
	dir := "/" + compose.InstallDir(arch)
	type file struct {
		path string
		data []byte
		mode uint32
		o    report.Origin
	}
	files := []file{
		{dir + "vmlinuz", vmlinuz, 0o644, generated("vmlinuz")},
		{dir + "initramfs.xz", initramfs, 0o644, generated("initramfs")},
		{dir + name + ".spdx.json", spdx, 0o644, generated("sbom")},
	}
	if base.bootloader != nil {
		files = append(files, file{dir + compose.BootloaderName, base.bootloader, 0o644, report.Origin{Package: base.bootloaderPkg}})
	}
	if base.stub != nil {
		files = append(files, file{dir + compose.StubName, base.stub, 0o644, report.Origin{Package: base.stubPkg}})
	}
	// The UKI is written from where it is laid out (uki.Image): it is
	// mostly the initramfs, which is not copied again.
	var bodies map[string]rootfs.Body
	if uki != nil {
		files = append(files, file{dir + compose.UKIName, nil, 0o644, generated("uki")})
		bodies = map[string]rootfs.Body{dir + compose.UKIName: uki}
	}
	tree := func(files []file) (*rootfs.Tree, int, error) {
		t := rootfs.New()
		size := 64 << 10
		// No digests: the tree only becomes a tar, and the initramfs alone
		// would cost a hash of its 150 MB (the report has its digest).
		for _, f := range files {
			size += len(f.data)
			if err := t.Add(&rootfs.Node{Path: f.path, Kind: rootfs.KindFile, Mode: f.mode, User: "root", Group: "root", Data: f.data, Origin: f.o}); err != nil {
				return nil, 0, err
			}
		}
		return t, size, nil
	}
	owners := rootfs.Owners{Users: map[string]int{"root": 0}, Groups: map[string]int{"root": 0}}
	binFiles := []file{{"/usr/bin/installer", base.bin, 0o755, report.Origin{Package: base.binPkg}}}
	if base.talosctl != nil {
		// The factory serves it from here (factory.TalosctlPath).
		binFiles = append(binFiles, file{"/usr/bin/talosctl", base.talosctl, 0o755, report.Origin{Package: base.talosctlPkg}})
	}
	bt, size, err := tree(binFiles)
	if err != nil {
		return nil, nil, err
	}
	// Sized once: the files and a few KiB of tar headers (growing the
	// buffer by doubling costs more than writing it).
	var b bytes.Buffer
	b.Grow(size)
	if err := bt.WriteTar(&b, owners, sde); err != nil {
		return nil, nil, err
	}
	at, _, err := tree(files)
	if err != nil {
		return nil, nil, err
	}
	return b.Bytes(), func(w io.Writer) error { return at.WriteTarBodies(w, owners, sde, bodies) }, nil
}
