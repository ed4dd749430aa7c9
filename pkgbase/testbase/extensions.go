package testbase

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/pkgbase/debext"
	"github.com/nodeforge/builder/pkgbase/debpkg"
)

// ExtDebDir is the cache directory's subdirectory of the extensions'
// Debian packages (scripts/fetch-test-kernel.sh fetches them); their arm64
// builds, for an aarch64 extensions' base, are in ExtDebDir+"-arm64"
// (debext.Dir).
const ExtDebDir = debext.DebDir

// HelloImage is the extensions' base's container image (an OCI archive
// beside the spec): the init, run as "nodeforge-init hello".
const HelloImage = "hello-image.tar"

// HelloImageName is the image's name in the archive.
const HelloImageName = "docker.io/nodeforge/hello:test"

// ErrNoDebs is wrapped by Build's error when an extension package is not
// cached: tests skip on a workstation, fail in CI.
var ErrNoDebs = debext.ErrNoDebs

// findExtDebs finds every extension package of each of the base's
// architectures in the cache directory.
func findExtDebs(opts Options) ([]string, error) {
	var debs []string
	for _, in := range opts.inputs {
		found, err := debext.Find(opts.CacheDir, in.arch.OCI)
		if err != nil {
			return nil, err
		}
		debs = append(debs, found...)
	}
	return debs, nil
}

// extSpecs wraps the extension packages into RPMs, their trees in stage.
func extSpecs(debs []string, stage string) ([]rpmSpec, error) {
	var out []rpmSpec
	for _, deb := range debs {
		s, err := debSpec(deb, stage)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// debSpec extracts a Debian package (less its documentation) and
// describes its RPM: the same name, version and files, for the
// architecture of the package (amd64: x86_64, arm64: aarch64).
func debSpec(deb, stage string) (rpmSpec, error) {
	arch, err := rpmArch(deb)
	if err != nil {
		return rpmSpec{}, err
	}
	root := filepath.Join(stage, "deb-"+strings.TrimSuffix(filepath.Base(deb), ".deb"))
	name, ver, err := debext.Unpack(deb, root)
	if err != nil {
		return rpmSpec{}, err
	}
	files, err := treeFiles(root)
	if err != nil {
		return rpmSpec{}, fmt.Errorf("testbase: %s: %w", filepath.Base(deb), err)
	}
	v, r := debpkg.RPMVersion(ver)
	return rpmSpec{
		Name: name, Version: v, Release: r, Arch: arch, License: "Debian: see /usr/share/doc/" + name + "/copyright",
		Summary:     fmt.Sprintf("Debian's %s %s, wrapped for the nodeforge extensions' boot test", name, ver),
		Description: fmt.Sprintf("The files of Debian's %s %s as Debian ships them, documentation left out.", name, ver),
		Root:        root, Files: files,
		// Tens of MB of Go programs: a fast level, the base is cached.
		Payload: "w3.zstdio",
	}, nil
}

// rpmArch is the RPM architecture of a Debian package's: the target
// whose Debian name it has (all: x86_64, as the images' packages were).
func rpmArch(deb string) (string, error) {
	debArch, err := debpkg.Field(deb, "Architecture")
	if err != nil {
		return "", err
	}
	if debArch == "all" {
		return "x86_64", nil
	}
	a, err := target.Lookup(debArch) // Debian's names are Go's
	if err != nil {
		return "", fmt.Errorf("testbase: %s: %w", filepath.Base(deb), err)
	}
	return a.RPM, nil
}

// treeFiles lists a tree's %files lines: its files and links, and its
// directories other than the skeleton's.
func treeFiles(root string) ([]string, error) {
	var lines []string
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return err
		}
		rel := "/" + filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		if strings.ContainsAny(rel, " \t\n\"'*?[]{}%\\") {
			return fmt.Errorf("%s: a path rpmbuild's %%files would misread", rel)
		}
		switch {
		case fi.IsDir() && debext.Skeleton[rel]:
		case fi.IsDir():
			lines = append(lines, "%dir "+rel)
		default:
			lines = append(lines, rel)
		}
		return nil
	})
	sort.Strings(lines)
	return lines, err
}

// extComponents are the extensions' base's spec lines: its root's
// libraries and the two extension components.
func extComponents() (rootfs []string, components string) {
	return LibDebs, `  # Debian's packages as Debian ships them (definitions in extensions/).
  cri:
    kind: extension
  btrfs:
    kind: extension
`
}
