package factory

import (
	"fmt"
	"regexp"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/compose"
)

// Artifact is one downloadable file of a schematic's media, as its URL
// names it (the upstream Image Factory's names).
type Artifact struct {
	name        string // as requested
	kind        string // kernel, initramfs, cmdline, disk, uki or installer (a tarball)
	platform    string // cmdline, disk, uki; installer: "" for installer-ARCH.tar
	Arch        string // as requested: amd64 or x86_64
	format      string // disk: iso, raw, qcow2, vhd, raw.tar.gz, ova
	compression string // disk: "", xz, zst or gz
	SecureBoot  bool   // disk, uki and installer: the Secure Boot ones
}

var (
	kernelRE    = regexp.MustCompile(`^kernel-([a-z0-9_]+)$`)
	initramfsRE = regexp.MustCompile(`^initramfs-([a-z0-9_]+)\.xz$`)
	cmdlineRE   = regexp.MustCompile(`^cmdline-(` + platform.NamePattern + `)-([a-z0-9_]+)$`)
	diskRE      = regexp.MustCompile(`^(` + platform.NamePattern + `)-([a-z0-9_]+)(-secureboot)?\.(raw\.tar\.gz|iso|raw|qcow2|vhd|ova)(?:\.(xz|zst|gz))?$`)
	ukiRE       = regexp.MustCompile(`^(` + platform.NamePattern + `)-([a-z0-9_]+)(-secureboot)?-uki\.efi$`)
	// installer-ARCH[-secureboot].tar, PLATFORM-installer-ARCH[-secureboot].tar:
	// the installer image of one architecture as a docker tarball.
	// A repository name is lower case: equinixMetal has no installer.
	installerTarRE = regexp.MustCompile(`^(?:(` + installerPlatform + `)-)?installer-([a-z0-9_]+)(-secureboot)?\.tar$`)
)

// ParseArtifact reads an artifact name strictly: nothing else reaches the
// composer (and no name ever reaches the file system). Whether the
// platform is one of the release's is the composer's to say.
func ParseArtifact(name string) (Artifact, error) {
	a := Artifact{name: name}
	switch {
	case kernelRE.MatchString(name):
		a.kind, a.Arch = "kernel", kernelRE.FindStringSubmatch(name)[1]
	case initramfsRE.MatchString(name):
		a.kind, a.Arch = "initramfs", initramfsRE.FindStringSubmatch(name)[1]
	case cmdlineRE.MatchString(name):
		m := cmdlineRE.FindStringSubmatch(name)
		a.kind, a.platform, a.Arch = "cmdline", m[1], m[2]
	case installerTarRE.MatchString(name):
		m := installerTarRE.FindStringSubmatch(name)
		a.kind, a.platform, a.Arch, a.SecureBoot = "installer", m[1], m[2], m[3] != ""
	case diskRE.MatchString(name):
		m := diskRE.FindStringSubmatch(name)
		a.kind, a.platform, a.Arch, a.SecureBoot, a.format, a.compression = "disk", m[1], m[2], m[3] != "", m[4], m[5]
		if a.compression != "" && a.format == "raw.tar.gz" {
			return a, fmt.Errorf("%s: %s images are not compressed further", name, a.format)
		}
	case ukiRE.MatchString(name):
		m := ukiRE.FindStringSubmatch(name)
		a.kind, a.platform, a.Arch, a.SecureBoot = "uki", m[1], m[2], m[3] != ""
	default:
		return a, fmt.Errorf("%q is not an artifact: kernel-ARCH, initramfs-ARCH.xz, cmdline-PLATFORM-ARCH, PLATFORM-ARCH[-secureboot].{iso,raw,qcow2,vhd,ova,raw.tar.gz}[.xz|.zst|.gz], PLATFORM-ARCH[-secureboot]-uki.efi, [PLATFORM-]installer-ARCH[-secureboot].tar", name)
	}
	return a, nil
}

// ReleaseArch is the release's name (x86_64) of an architecture a URL
// names either way (amd64 or x86_64), or "".
func ReleaseArch(arches []string, asked string) string {
	for _, a := range arches {
		if a == asked || specs.GoArch(a) == asked {
			return a
		}
	}
	return ""
}

// Name is the artifact's name as requested.
func (a Artifact) Name() string { return a.name }

// FileName is the file compose writes for a, with the release's
// architecture name.
func (a Artifact) FileName(arch string) string {
	sb := ""
	if a.SecureBoot {
		sb = compose.SecureBootSuffix
	}
	switch a.kind {
	case "kernel":
		return "kernel-" + arch
	case "initramfs":
		return "initramfs-" + arch + ".xz"
	case "cmdline":
		return compose.CmdlineName(a.platform, arch)
	case "uki":
		return a.platform + "-" + arch + sb + "-uki.efi"
	case "installer":
		n := "installer-" + arch + sb + ".tar"
		if a.platform != "" {
			n = a.platform + "-" + n
		}
		return n
	}
	n := a.platform + "-" + arch + sb + "." + a.format
	if a.compression != "" {
		n += "." + a.compression
	}
	return n
}
