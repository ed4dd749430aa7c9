package builder

import (
	"bytes"
	"maps"
	"slices"
	"strconv"

	"github.com/nodeforge/builder/pkgbase/lock"
	"github.com/nodeforge/builder/rootfs"
	"github.com/nodeforge/builder/sbom"
	"github.com/nodeforge/builder/specs"
)

// nodeSBOM is the SBOM of what the node OS of one architecture holds,
// every package laid into the root filesystem and the kernel: SPDX 2.3 and
// CycloneDX 1.5 JSON.
func nodeSBOM(s *specs.Spec, l *lock.Lock, arch string, packages []string, lockSHA string, sde int64, tool string) (spdx, cdx []byte, err error) {
	d := SBOMDocument(s, l, s.Name+"-"+s.Version+"-"+arch, map[string][]string{arch: packages}, lockSHA, sde, tool)
	if spdx, err = sbom.SPDX(d); err != nil {
		return nil, nil, err
	}
	if cdx, err = sbom.CycloneDX(d); err != nil {
		return nil, nil, err
	}
	return spdx, cdx, nil
}

// SBOMDocument describes the packages (NEVRAs, per architecture) of the
// lock that an artifact holds.
func SBOMDocument(s *specs.Spec, l *lock.Lock, name string, packages map[string][]string, lockSHA string, sde int64, tool string) sbom.Document {
	d := sbom.Document{Name: name, Version: s.Version, Branch: s.Branch, Vendor: "altlinux",
		Tool: tool, LockSHA256: lockSHA, SourceDateEpoch: sde}
	seen := map[string]bool{}
	for _, arch := range slices.Sorted(maps.Keys(packages)) {
		a := l.Architectures[arch]
		if a == nil {
			continue
		}
		byNEVRA := map[string]*lock.Package{}
		for i := range a.Packages {
			byNEVRA[a.Packages[i].NEVRA] = &a.Packages[i]
		}
		for _, nevra := range packages[arch] {
			p := byNEVRA[nevra]
			if p == nil || seen[p.SHA256] {
				continue
			}
			seen[p.SHA256] = true
			epoch := ""
			if p.Epoch != nil {
				epoch = strconv.Itoa(*p.Epoch)
			}
			d.Packages = append(d.Packages, sbom.Package{Name: p.Name, Epoch: epoch, Version: p.Version, Release: p.Release, Arch: p.Arch,
				NEVRA: p.NEVRA, SourceRPM: p.SourceRPM, License: p.License, SHA256: p.SHA256, Repository: p.Repository})
		}
	}
	return d
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
	// Sized once: the files and a few KiB of tar headers (growing the
	// buffer by doubling costs more than writing it).
	var b bytes.Buffer
	b.Grow(len(vmlinuz) + len(initramfs) + len(spdx) + len(bin) + 64<<10)
	if err := t.WriteTar(&b, rootfs.Owners{Users: map[string]int{"root": 0}, Groups: map[string]int{"root": 0}}, sde); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
