package demobase

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodeforge/builder/pkgbase/debext"
)

// The bootable base's cri and btrfs extensions, when the cache holds
// Debian's packages for them (debext: those the boot tests' base wraps
// too): containerd, runc, containernetworking-plugins and btrfs-progs
// wrapped unchanged under their Debian names in place of the stand-ins,
// the libraries they load in the root filesystem (libc6 in glibc-core's
// place), the definitions that place Debian's layout where the extension
// contract allows (the spec's extensions-dir), and the container image
// the node init runs (the spec's images section: ImageName, of
// InitPackage).

// ExtensionsDir is the bootable base's extensions-dir, beside the spec,
// with its cri and btrfs definitions when they are Debian's packages.
const ExtensionsDir = "extensions"

// ImageName is the container image of the spec of a base whose cri
// extension is Debian's: the node init (InitPackage) run as
// "init hello", which prints one line. The release publishes it as
// images/hello; make demo-boot exports it (builder image --release --kind
// container) and attaches the archive as the disk with serial
// nodeforge-images.
const ImageName = "hello"

// debReplaces are the stand-ins Debian's packages take the place of:
// those of the same names, the CNI plugins, glibc-core (libc6 provides
// what it provided) and the libraries only the stand-in programs needed.
var debReplaces = []string{"glibc-core", "containerd", "runc", "cni-plugins", "btrfs-progs", "libbtrfs", "libseccomp"}

// libcProvides are what libc6 provides in glibc-core's place: its
// provides, less the symbol versions of a newer glibc than Debian's.
func libcProvides(glibc *pkgDef) []dep {
	return slices.DeleteFunc(slices.Clone(glibc.provides), func(d dep) bool { return d.name == "libc.so.6(GLIBC_2.38)(64bit)" })
}

// loadExtDebs wraps the Debian packages (unpacked under stage).
func (r *realParts) loadExtDebs(debs []string, stage string) error {
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	for _, deb := range debs {
		p, ver, err := debPackage(deb, stage)
		if err != nil {
			return err
		}
		r.ext = append(r.ext, p)
		r.extDebs = append(r.extDebs, p.name+" "+ver)
	}
	return nil
}

// debPackage is a Debian package wrapped unchanged (its documentation
// left out) into a package of the base of the same name; it returns the
// package and Debian's version.
func debPackage(deb, stage string) (*pkgDef, string, error) {
	root := filepath.Join(stage, "deb-"+filepath.Base(deb))
	name, ver, err := debext.Unpack(deb, root)
	if err != nil {
		return nil, "", err
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, "", err
	}
	var tops []string
	for _, e := range ents {
		tops = append(tops, "/"+e.Name())
	}
	files, err := treeFiles(root, tops...)
	if err != nil {
		return nil, "", fmt.Errorf("demo base: %s: %w", filepath.Base(deb), err)
	}
	files = slices.DeleteFunc(files, func(f file) bool { return f.kind == kindDir && debext.Skeleton[f.path] })
	v, rel := rpmVR(ver)
	group := "System/Configuration/Other"
	if strings.HasPrefix(name, "lib") {
		group = "System/Libraries"
	}
	return &pkgDef{
		name: name, version: v, release: rel, arch: Arch, src: name, disttag: "p11+389200.100.1.1",
		group: group, license: "Debian: see its copyright file", url: "https://packages.debian.org/bookworm/" + name,
		summary: "Debian's " + name + " " + ver + " for the demo",
		desc: "The files of Debian's " + name + " " + ver + " as Debian ships them\n" +
			"(documentation left out), wrapped for the NodeForge demo package base.",
		files:      files,
		compressor: "zstd",
	}, ver, nil
}

// withDebs puts the Debian packages in the place of the stand-ins they
// replace.
func (r *realParts) withDebs(ps []*pkgDef) []*pkgDef {
	if len(r.ext) == 0 {
		return ps
	}
	for _, p := range ps {
		if p.name == "glibc-core" {
			for _, e := range r.ext {
				if e.name == "libc6" {
					e.provides = libcProvides(p)
				}
			}
		}
	}
	ps = slices.DeleteFunc(ps, func(p *pkgDef) bool { return slices.Contains(debReplaces, p.name) })
	return append(ps, r.ext...)
}
