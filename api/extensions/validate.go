package extensions

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nodeforge/builder/api/target"
)

// Entry is one path of an extension image as validation sees it.
type Entry struct {
	// Path is relative to the image root, without a leading "/":
	// "manifest.yaml", "rootfs/usr/local/bin/x".
	Path string
	Type EntryType
	Mode uint32 // permission bits (07777)
}

// EntryType is a file type.
type EntryType byte

// Entry types.
const (
	TypeFile EntryType = iota
	TypeDir
	TypeSymlink
	TypeHardlink
	TypeCharDev
	TypeBlockDev
	TypeFifo
	TypeSocket
)

func (t EntryType) String() string {
	return [...]string{"file", "directory", "symlink", "hard link", "character device", "block device", "fifo", "socket"}[t]
}

// AllowedPrefixes are the directories extension files may live in.
var AllowedPrefixes = []string{
	"/usr/local/",
	"/usr/lib/firmware/",
	"/usr/lib/modules/",
	"/usr/lib/udev/rules.d/",
	"/etc/cri/conf.d/",
	"/usr/share/glvnd/",
	"/usr/share/egl/",
	"/etc/vulkan/",
}

// AllowedFiles are single files extensions may ship outside those
// directories: the glibc loaders of every target architecture
// (api/target) and ldconfig with their configuration, NVIDIA's container
// helpers, nvme.
var AllowedFiles = withLoaders(map[string]bool{
	"/sbin/ldconfig":                         true,
	"/usr/sbin/ldconfig":                     true,
	"/usr/bin/ldconfig":                      true,
	"/etc/ld.so.conf":                        true,
	"/etc/ld.so.cache":                       true,
	"/usr/bin/nvidia-ctk":                    true,
	"/usr/bin/nvidia-cdi-hook":               true,
	"/usr/bin/nvidia-container-runtime":      true,
	"/usr/bin/nvidia-container-runtime-hook": true,
	"/usr/bin/nvidia-container-toolkit":      true,
	"/usr/bin/nvidia-persistenced":           true,
	"/usr/sbin/nvme":                         true,
})

// withLoaders adds the dynamic loaders of the target architectures.
func withLoaders(files map[string]bool) map[string]bool {
	for _, name := range target.Names() {
		a, _ := target.Lookup(name)
		for _, l := range a.Loaders {
			files[l] = true
		}
	}
	return files
}

// Allowed reports whether an extension may ship a non-directory at p
// (absolute, inside rootfs/).
func Allowed(p string) bool {
	if AllowedFiles[p] {
		return true
	}
	for _, pre := range AllowedPrefixes {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// Validate checks an extension image's entries and its manifest (nil when
// the image has none) against the contract, and returns every violation,
// sorted; none means valid.
func Validate(entries []Entry, manifest []byte) []string {
	var v []string
	bad := func(f string, a ...any) { v = append(v, fmt.Sprintf(f, a...)) }
	hasManifest, hasRootfs := false, false
	for _, e := range entries {
		p := strings.TrimSuffix(strings.TrimPrefix(e.Path, "./"), "/")
		if p == "" || p == "." {
			continue
		}
		top, rest, _ := strings.Cut(p, "/")
		switch {
		case p == "manifest.yaml":
			hasManifest = true
			if e.Type != TypeFile {
				bad("manifest.yaml is a %s, not a file", e.Type)
			}
			continue
		case top == "rootfs":
			hasRootfs = true
			if rest == "" {
				if e.Type != TypeDir {
					bad("rootfs is a %s, not a directory", e.Type)
				}
				continue
			}
		default:
			bad("/%s: top-level entries other than manifest.yaml and rootfs/ are not allowed", p)
			continue
		}
		abs := "/" + rest
		switch e.Type {
		case TypeFile, TypeDir, TypeSymlink, TypeHardlink:
		default:
			bad("%s: a %s; extensions hold only files, directories and symlinks", abs, e.Type)
		}
		if e.Type != TypeSymlink && e.Mode&0o002 != 0 {
			bad("%s: world-writable (mode %04o)", abs, e.Mode)
		}
		if e.Type != TypeDir && !Allowed(abs) {
			bad("%s: outside the allowed paths", abs)
		}
	}
	if !hasManifest {
		bad("manifest.yaml is missing")
	} else if manifest != nil {
		_, errs := ParseManifest(manifest)
		v = append(v, errs...)
	}
	if !hasRootfs {
		bad("rootfs/ is missing")
	}
	sort.Strings(v)
	return v
}

// Hints say how to mend the violations Validate found; they are not
// violations themselves.
func Hints(violations []string) []string {
	out := []string{}
	if strings.Contains(strings.Join(violations, "\n"), "outside the allowed paths") {
		out = append(out, "allowed: below "+strings.Join(AllowedPrefixes, ", ")+", or the glibc loader, ldconfig, /etc/ld.so.conf, /etc/ld.so.cache, NVIDIA's container helpers and nvme")
	}
	return out
}
