package compose

import (
	"encoding/json"
	"fmt"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/rootfs"
)

// The boot image of a release: an OCI artifact index with one artifact per
// architecture, its layers the boot assets of these media types.
const (
	ArtifactType       = "application/vnd.nodeforge.node-os.v1"
	MediaTypeVmlinuz   = "application/vnd.nodeforge.node-os.vmlinuz.v1"
	MediaTypeInitramfs = "application/vnd.nodeforge.node-os.initramfs.v1"
	MediaTypeRootfs    = "application/vnd.nodeforge.node-os.rootfs.squashfs.v1"
	MediaTypeCmdline   = "application/vnd.nodeforge.node-os.cmdline.v1"
	// MediaTypeUKI is a release's signed unified kernel image (with
	// builder release --secureboot).
	MediaTypeUKI       = "application/vnd.nodeforge.node-os.uki.v1"
	MediaTypeSPDX      = "application/spdx+json"
	MediaTypeCycloneDX = "application/vnd.cyclonedx+json"
)

// InstallDir is where an installer image holds an architecture's boot
// assets, as Talos's installer looks for them: usr/install/<arch>/ with
// Go's name of the architecture (amd64, arm64). Releases made before
// used the rpm name (x86_64); the factory reads both.
func InstallDir(arch string) string { return "usr/install/" + specs.GoArch(arch) + "/" }

// LegacyInstallDir is InstallDir of the releases made before the installer
// was laid out as Talos's: usr/install/<rpm arch>/.
func LegacyInstallDir(arch string) string { return "usr/install/" + arch + "/" }

// The boot assets of an installer image (InstallDir), Talos's names:
// the kernel and the initramfs (vmlinuz, initramfs.xz), the base's EFI boot
// manager (systemd-boot), which the installer puts on the disk and media
// made from the release boot with, and its systemd-stub when the base has
// one (Secure Boot media made from a release build their UKIs on it), with
// the plain UKI Talos's installer installs for systemd-boot.
const (
	BootloaderName = "systemd-boot.efi"
	StubName       = "systemd-stub.efi"
	UKIName        = "vmlinuz.efi"
	// LegacyBootloaderName is the boot manager's name in releases made
	// before the installer was laid out as Talos's.
	LegacyBootloaderName = "bootloader.efi"
)

// ESPDir holds, in a Secure Boot installer image (usr/install/<arch>/ESPDir),
// the files of the EFI System Partition the installer writes to a node's
// disk: signed systemd-boot, the signed UKI, loader.conf and the key set's
// .auth files, as the Secure Boot media's ESP holds them.
const ESPDir = "esp"

// AnnotationSecureBoot marks a Secure Boot installer image's index: the
// SHA-256 of the certificate whose key signed its boot code.
const AnnotationSecureBoot = "dev.nodeforge.secureboot"

// ReleaseUKIName is a release's signed UKI among its boot assets.
const ReleaseUKIName = "uki.efi"

// AnnotationParams is the annotation of a release's boot image index that
// holds its Params as JSON.
const AnnotationParams = "dev.nodeforge.media"

// Params are what media need of a release besides its files: how the
// build wrote the initramfs and the squashfs images (the extension layers
// must be written the same way), the kernel arguments and the boot
// menu's title.
type Params struct {
	// Architectures are the release's, by their rpm names (x86_64,
	// aarch64): the media's file names use them.
	Architectures        []string       `json:"architectures"`
	PrettyName           string         `json:"prettyName"`
	Cmdline              []string       `json:"cmdline"`
	InitramfsCompression string         `json:"initramfsCompression"`
	Squashfs             SquashfsParams `json:"squashfs"`
	// Kernel is the kernel's release and the directory of its modules in
	// the root filesystem (per architecture: they differ between
	// architectures).
	Kernel map[string]KernelParams `json:"kernel"`
	// KernelParamPrefix and Platforms are the spec's changes to Talos's
	// platform table (image.kernel-param-prefix, image.platforms), absent
	// when it makes none.
	KernelParamPrefix string              `json:"kernelParamPrefix,omitempty"`
	Platforms         []platform.Platform `json:"platforms,omitempty"`
}

// PlatformTable is the release's platform table: Talos's with the spec's
// changes.
func (p Params) PlatformTable() (platform.Table, error) {
	return platform.Talos.Override(p.KernelParamPrefix, p.Platforms)
}

// KernelParams name one architecture's kernel.
type KernelParams struct {
	Version    string `json:"version"`
	ModulesDir string `json:"modulesDir"` // absolute, in rootfs.sqsh
}

// SquashfsParams are the squashfs options that decide the bytes.
type SquashfsParams struct {
	Compressor string `json:"compressor"`
	Level      int    `json:"level"`
	BlockSize  int    `json:"blockSize"`
}

// Annotation is p as the annotation's value.
func (p Params) Annotation() (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
}

// ParseParams reads the annotation's value.
func ParseParams(v string) (Params, error) {
	var p Params
	if v == "" {
		return p, fmt.Errorf("the boot image has no %s annotation (a release made before media could be composed from it)", AnnotationParams)
	}
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return p, fmt.Errorf("annotation %s: %w", AnnotationParams, err)
	}
	return p, nil
}

// SquashfsOptions are the writer's options for p.
func (p Params) SquashfsOptions() rootfs.SquashfsOptions {
	return rootfs.SquashfsOptions{Compressor: p.Squashfs.Compressor, Level: p.Squashfs.Level, BlockSize: p.Squashfs.BlockSize}
}
