// Package debext is what the bootable demo base (pkgbase/demobase) and the
// boot tests' base (pkgbase/testbase) make their cri and btrfs extensions
// of: Debian's containerd, runc, CNI plugins and btrfs-progs and the
// libraries they load (which packages, where the cache keeps them, their
// trees as the RPMs wrapping them carry them), the definitions that place
// Debian's layout where the extension contract allows, and the container
// image the node init runs from the cri extension.
package debext

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeforge/builder/pkgbase/debpkg"
)

// The packages, by Debian name: the RPMs wrapping them keep the names.
var (
	// CRIDebs make the cri extension.
	CRIDebs = []string{"containerd", "runc", "containernetworking-plugins"}
	// BtrfsDebs make the btrfs extension.
	BtrfsDebs = []string{"btrfs-progs"}
	// LibDebs go into the root filesystem: what the extensions' programs
	// load (their Depends less iptables, which nothing here runs).
	LibDebs = []string{"libc6", "libgcc-s1", "libseccomp2", "libblkid1", "libcom-err2", "libext2fs2",
		"liblzo2-2", "libudev1", "libuuid1", "libzstd1", "zlib1g"}
)

// DebDir is the cache directory's subdirectory of the amd64 packages
// (scripts/fetch-test-kernel.sh fetches them, with --demo too); Dir names
// another architecture's.
const DebDir = "extension-debs"

// Dir is the cache directory's subdirectory of a Debian architecture's
// packages: DebDir for amd64, DebDir-ARCH (extension-debs-arm64) else.
func Dir(debArch string) string {
	if debArch == "amd64" {
		return DebDir
	}
	return DebDir + "-" + debArch
}

// ErrNoDebs is wrapped by Find's error when a package is not cached.
var ErrNoDebs = errors.New("no cached Debian package")

// Names are every package: CRIDebs, BtrfsDebs, then LibDebs.
func Names() []string {
	return append(append(append([]string{}, CRIDebs...), BtrfsDebs...), LibDebs...)
}

// Find finds every package of a Debian architecture (amd64, arm64) in
// the cache directory's Dir, in Names' order: the newest of each.
func Find(cacheDir, debArch string) ([]string, error) {
	dir := filepath.Join(cacheDir, Dir(debArch))
	var debs []string
	for _, name := range Names() {
		p := debpkg.Newest(dir, name+"_*_"+debArch+".deb")
		if p == "" {
			return nil, fmt.Errorf("%w: no %s_*_%s.deb in %s (scripts/fetch-test-kernel.sh fetches it)", ErrNoDebs, name, debArch, dir)
		}
		debs = append(debs, p)
	}
	return debs, nil
}

// Skeleton are the directories a root's filesystem package owns (or
// links): a wrapped package does not own them again.
var Skeleton = map[string]bool{"/bin": true, "/sbin": true, "/etc": true, "/lib": true, "/usr": true, "/usr/bin": true,
	"/usr/lib": true, "/usr/sbin": true, "/usr/share": true, "/usr/libexec": true, "/var": true, "/var/lib": true}

// undocumented are what Unpack leaves out below /usr/share: documentation
// and what only a Debian system reads.
var undocumented = []string{"doc", "man", "lintian", "bash-completion", "zsh", "initramfs-tools", "bug"}

// Unpack extracts a package into root, less its documentation, and
// returns its Debian name and version.
func Unpack(deb, root string) (name, version string, err error) {
	if name, err = debpkg.Field(deb, "Package"); err != nil {
		return "", "", err
	}
	if version, err = debpkg.Field(deb, "Version"); err != nil {
		return "", "", err
	}
	if err := debpkg.Extract(deb, root); err != nil {
		return "", "", err
	}
	for _, d := range undocumented {
		if err := os.RemoveAll(filepath.Join(root, "usr", "share", d)); err != nil {
			return "", "", err
		}
	}
	return name, version, nil
}
