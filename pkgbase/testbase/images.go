package testbase

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodeforge/builder/pkgbase/debext"
	"github.com/nodeforge/builder/pkgbase/debpkg"
)

// The container images' base (Options.Images): Debian's packages wrapped
// into RPMs of the same names, each with the shared-library provides and
// requires rpm's elfdeps writes (LIB()(64bit), LIB(VERSION)(64bit)), so
// that an image's packages pull in the libraries they load as they do
// from a distribution's base.
var (
	// XorrisoDebs are xorriso and the libraries it loads: the factory's
	// image carries them (the ISO is written by xorriso).
	XorrisoDebs = []string{"xorriso", "libisoburn1", "libburn4", "libisofs6", "libjte2", "libreadline8",
		"libtinfo6", "libacl1", "libbz2-1.0", "zlib1g", "libc6"}
	// ImageDebs are the other packages: libc-bin (Debian keeps
	// /etc/ld.so.conf there, where ALT's glibc-core has it), the CA
	// certificates, and busybox-static and etcd-server for images of
	// their own.
	ImageDebs = []string{"libc-bin", "ca-certificates", "busybox-static", "etcd-server"}
)

// ImageDebDir is the cache directory's subdirectory of the images'
// Debian packages (scripts/fetch-test-kernel.sh fetches them).
const ImageDebDir = "image-debs"

// findImageDebs finds every image package in the cache directory, less
// those the extensions' base wraps already.
func findImageDebs(opts Options) ([]string, error) {
	dir := filepath.Join(opts.CacheDir, ImageDebDir)
	var debs []string
	for _, name := range append(append([]string{}, XorrisoDebs...), ImageDebs...) {
		if opts.Extensions && slices.Contains(debext.Names(), name) {
			continue
		}
		p := debpkg.Newest(dir, name+"_*_amd64.deb")
		if p == "" {
			p = debpkg.Newest(dir, name+"_*_all.deb")
		}
		if p == "" {
			return nil, fmt.Errorf("%w: no %s_*_amd64.deb (or _all) in %s (scripts/fetch-test-kernel.sh fetches it)", ErrNoDebs, name, dir)
		}
		debs = append(debs, p)
	}
	return debs, nil
}

// imageSpecs wraps the image packages into RPMs, their trees in stage.
func imageSpecs(debs []string, stage string) ([]rpmSpec, error) {
	var out []rpmSpec
	for _, deb := range debs {
		s, err := debSpec(deb, stage)
		if err != nil {
			return nil, err
		}
		if err := mergeUsr(s.Root); err != nil {
			return nil, err
		}
		if s.Files, err = treeFiles(s.Root); err != nil {
			return nil, err
		}
		if arch, _ := debpkg.Field(deb, "Architecture"); arch == "all" {
			s.Arch = "noarch"
		}
		s.Summary = strings.Replace(s.Summary, "the nodeforge extensions' boot test", "the nodeforge container images' test", 1)
		if s.Provides, s.Requires, err = elfDeps(s.Root); err != nil {
			return nil, fmt.Errorf("testbase: %s: %w", filepath.Base(deb), err)
		}
		out = append(out, s)
	}
	return out, nil
}

// mergeUsr moves a package's /bin and /sbin into /usr, as Debian's
// usrmerge lays them: the base's filesystem links /bin and /sbin there,
// and a path through a link is refused.
func mergeUsr(root string) error {
	for _, d := range []string{"bin", "sbin"} {
		from, to := filepath.Join(root, d), filepath.Join(root, "usr", d)
		entries, err := os.ReadDir(from)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.MkdirAll(to, 0o755); err != nil {
			return err
		}
		for _, e := range entries {
			if _, err := os.Lstat(filepath.Join(to, e.Name())); err == nil {
				return fmt.Errorf("testbase: %s: /%s/%s is in /usr/%s too", filepath.Base(root), d, e.Name(), d)
			}
			if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				return err
			}
		}
		if err := os.Remove(from); err != nil {
			return err
		}
	}
	return nil
}

// elfDeps reads a tree's ELF files as rpm's elfdeps does: a shared
// library with a DT_SONAME provides SONAME()(64bit) and SONAME(V)(64bit)
// for each version it defines; every ELF file requires LIB()(64bit) for
// each DT_NEEDED library and LIB(V)(64bit) for each version it asks of
// one. What the tree provides itself is not required; both lists sorted.
func elfDeps(root string) (provides, requires []string, err error) {
	err = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		f, err := elf.Open(p)
		if err != nil {
			return nil // not ELF
		}
		defer f.Close()
		if f.Class != elf.ELFCLASS64 {
			return nil
		}
		prov, req, err := fileDeps(f)
		if err != nil {
			return fmt.Errorf("%s: %w", strings.TrimPrefix(p, root), err)
		}
		provides, requires = append(provides, prov...), append(requires, req...)
		return nil
	})
	slices.Sort(provides)
	provides = slices.Compact(provides)
	slices.Sort(requires)
	requires = slices.DeleteFunc(slices.Compact(requires), func(r string) bool { _, ok := slices.BinarySearch(provides, r); return ok })
	return provides, requires, err
}

// fileDeps are one ELF file's provides and requires.
func fileDeps(f *elf.File) (provides, requires []string, err error) {
	if sonames, _ := f.DynString(elf.DT_SONAME); len(sonames) == 1 {
		provides = append(provides, sonames[0]+"()(64bit)")
		var vers []elf.DynamicVersion
		if f.SectionByType(elf.SHT_GNU_VERDEF) != nil {
			if vers, err = f.DynamicVersions(); err != nil {
				return nil, nil, err
			}
		}
		for _, v := range vers {
			if v.Flags&elf.VER_FLG_BASE == 0 {
				provides = append(provides, sonames[0]+"("+v.Name+")(64bit)")
			}
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, nil, err
	}
	for _, l := range libs {
		requires = append(requires, l+"()(64bit)")
	}
	var needs []elf.DynamicVersionNeed
	if f.SectionByType(elf.SHT_GNU_VERNEED) != nil {
		if needs, err = f.DynamicVersionNeeds(); err != nil {
			return nil, nil, err
		}
	}
	for _, n := range needs {
		for _, v := range n.Needs {
			requires = append(requires, n.Name+"("+v.Dep+")(64bit)")
		}
	}
	return provides, requires, nil
}
