package builder

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/nodeforge/builder/rootfs"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Report is OUT/report.json: what was built, from what, and how.
type Report struct {
	Spec            SpecInfo          `json:"spec"`
	LockSHA256      string            `json:"lockSha256"`
	SourceDateEpoch int64             `json:"sourceDateEpoch"`
	Builder         string            `json:"builder"`
	Tools           map[string]string `json:"tools"`
	OCIIndex        string            `json:"ociIndex"`
	// Installer is the index digest of the installer image, OUT/installer.
	Installer string `json:"installer"`
	// Media are the boot media of the schematic the build was given.
	Media *MediaReport `json:"media,omitempty"`
	// Extensions maps each extension to the index digest of its OCI
	// layout, OUT/extensions/<name>.
	Extensions    map[string]string       `json:"extensions,omitempty"`
	Architectures map[string]*ArchReport  `json:"architectures"`
	Generators    map[string]string       `json:"generators"`
	Artifacts     map[string]ArtifactInfo `json:"artifacts"` // "<arch>/<name>" -> digest
}

// SpecInfo identifies the release.
type SpecInfo struct {
	Name    string `json:"name"`
	Branch  string `json:"branch"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
}

// ArtifactInfo is one output file.
type ArtifactInfo struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// ArchReport is the build of one architecture.
type ArchReport struct {
	Packages   []string                  `json:"packages"` // laid into the root filesystem
	Kernel     *kernelInfo               `json:"kernel"`
	Cmdline    string                    `json:"cmdline"`
	Init       string                    `json:"init"` // package that provided /init
	Scriptlets []rootfs.ScriptletOutcome `json:"scriptlets"`
	Triggers   []rootfs.ScriptletOutcome `json:"triggers"`
	Unhandled  int                       `json:"unhandledScriptlets"`
	Ghosts     []string                  `json:"ghosts"`
	Dropped    []rootfs.DropResult       `json:"dropped"`
	Policy     rootfs.PolicyResult       `json:"policy"`
	Libraries  []string                  `json:"libraries"` // /etc/ld.so.cache entries
	Rootfs     []FileEntry               `json:"rootfs"`
	Initramfs  []FileEntry               `json:"initramfs"`
	// Extensions are the system extensions built from the base.
	Extensions map[string]*ExtensionReport `json:"extensions,omitempty"`
	// Media lists the initramfs segment appended for the schematic.
	Media []FileEntry `json:"media,omitempty"`
}

// MediaReport describes the boot media of a schematic.
type MediaReport struct {
	Schematic  string                  `json:"schematic"` // its ID
	Extensions []string                `json:"extensions"`
	Files      map[string]ArtifactInfo `json:"files"` // "media/<id>/<file>" -> digest
	// Installer is the index digest of the schematic's installer image,
	// OUT/media/<id>/installer (its initramfs holds the extensions).
	Installer string `json:"installer"`
	// NoDiskImages says why there is no ISO or raw image (no EFI boot
	// manager in the lock).
	NoDiskImages string `json:"noDiskImages,omitempty"`
}

// FileEntry is one path of an artifact with where it came from.
type FileEntry struct {
	Path   string        `json:"path"`
	Type   string        `json:"type"`
	Mode   string        `json:"mode"` // octal permission bits
	UID    int           `json:"uid"`
	GID    int           `json:"gid"`
	Size   int64         `json:"size"`
	SHA256 string        `json:"sha256,omitempty"`
	Target string        `json:"target,omitempty"`
	Link   string        `json:"hardlink,omitempty"`
	Xattrs []string      `json:"xattrs,omitempty"`
	Origin rootfs.Origin `json:"origin"`
	// RPMDigest is the digest the package header recorded for the file.
	RPMDigest string `json:"rpmDigest,omitempty"`
}

// generatorDocs describes every builder generator, for the report.
var generatorDocs = map[string]string{
	"accounts":           "/etc/passwd, /etc/group, /etc/shadow from the base's files, the spec and useradd/groupadd scriptlets",
	"os-release":         "/etc/os-release from the spec",
	"machine-id":         "empty /etc/machine-id, filled at first boot",
	"ldconfig":           "/etc/ld.so.cache in glibc's format, as ldconfig would write it for the image",
	"depmod":             "kernel module indexes (modules.dep and the rest), computed as depmod does",
	"implicit-directory": "a parent directory no package ships (0755 root:root)",
	"rootfs.sqsh":        "the root filesystem image inside the initramfs",
	"initramfs":          "initramfs directories and /dev/console (5,1), and the boot modules' indexes",
	"extension-file":     "a file an extension definition declares (extensions/<name>.yaml, files:)",
	"extension-manifest": "an extension's manifest.yaml, from its definition and its packages' versions",
}
