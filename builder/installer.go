package builder

import (
	"bytes"
	"strconv"

	"github.com/nodeforge/builder/pkgbase/lock"
	"github.com/nodeforge/builder/rootfs"
	"github.com/nodeforge/builder/sbom"
	"github.com/nodeforge/builder/specs"
)

// nodeSBOM is the SBOM of what the node OS of one architecture holds,
// every package laid into the root filesystem and the kernel: SPDX 2.3 and
// CycloneDX 1.5 JSON.
func nodeSBOM(s *specs.Spec, a *lock.Arch, arch string, packages []string, lockSHA string, sde int64, tool string) (spdx, cdx []byte, err error) {
	byNEVRA := map[string]*lock.Package{}
	for i := range a.Packages {
		byNEVRA[a.Packages[i].NEVRA] = &a.Packages[i]
	}
	d := sbom.Document{Name: s.Name + "-" + s.Version + "-" + arch, Version: s.Version, Branch: s.Branch, Vendor: "altlinux",
		Tool: tool, LockSHA256: lockSHA, SourceDateEpoch: sde}
	for _, nevra := range packages {
		p := byNEVRA[nevra]
		if p == nil {
			continue
		}
		epoch := ""
		if p.Epoch != nil {
			epoch = strconv.Itoa(*p.Epoch)
		}
		d.Packages = append(d.Packages, sbom.Package{Name: p.Name, Epoch: epoch, Version: p.Version, Release: p.Release, Arch: p.Arch,
			NEVRA: p.NEVRA, SourceRPM: p.SourceRPM, License: p.License, SHA256: p.SHA256, Repository: p.Repository})
	}
	if spdx, err = sbom.SPDX(d); err != nil {
		return nil, nil, err
	}
	if cdx, err = sbom.CycloneDX(d); err != nil {
		return nil, nil, err
	}
	return spdx, cdx, nil
}

// installerLayer is the installer image's layer for one architecture:
// usr/install/<arch>/{vmlinuz,initramfs.xz,<name>.spdx.json} and the
// installer binary of the base at usr/bin/installer.
func installerLayer(arch, name string, vmlinuz, initramfs, spdx, bin []byte, binPkg string, sde int64) ([]byte, error) {
	t := rootfs.New()
	dir := "/usr/install/" + arch + "/"
	for _, f := range []struct {
		path string
		data []byte
		mode uint32
		o    rootfs.Origin
	}{
		{dir + "vmlinuz", vmlinuz, 0o644, generated("vmlinuz")},
		{dir + "initramfs.xz", initramfs, 0o644, generated("initramfs")},
		{dir + name + ".spdx.json", spdx, 0o644, generated("sbom")},
		{"/usr/bin/installer", bin, 0o755, rootfs.Origin{Package: binPkg}},
	} {
		if err := t.Add(&rootfs.Node{Path: f.path, Kind: rootfs.KindFile, Mode: f.mode, User: "root", Group: "root", Data: f.data, Digest: digest(f.data), Origin: f.o}); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	if err := t.WriteTar(&b, rootfs.Owners{Users: map[string]int{"root": 0}, Groups: map[string]int{"root": 0}}, sde); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
