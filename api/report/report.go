// Package report defines the build report, OUT/report.json: what was built,
// from which lock, and where every file of every artifact came from. It is
// attested with each release and read by the audit.
package report

import (
	"cmp"
	"slices"
)

// Report is OUT/report.json: what was built, from what, and how.
type Report struct {
	Spec            SpecInfo          `json:"spec"`
	LockSHA256      string            `json:"lockSha256"`
	SourceDateEpoch int64             `json:"sourceDateEpoch"`
	Builder         string            `json:"builder"`
	Tools           map[string]string `json:"tools"`
	// Compressors name the library, as module@version, that writes each
	// compressed format of the artifacts ("squashfs zstd" ->
	// "github.com/DataDog/zstd@v1.5.7"): another library, or another
	// version, writes other bytes from the same input. Absent in the
	// reports of builders before it was recorded.
	Compressors map[string]string `json:"compressors,omitempty"`
	OCIIndex    string            `json:"ociIndex"`
	// Installer is the index digest of the installer image, OUT/installer.
	Installer string `json:"installer"`
	// Media are the boot media of the schematic the build was given.
	Media *MediaReport `json:"media,omitempty"`
	// Extensions maps each extension to the index digest of its OCI
	// layout, OUT/extensions/<name>.
	Extensions map[string]string `json:"extensions,omitempty"`
	// Images maps each container image to the index digest of its OCI
	// layout, OUT/images/<name>.
	Images        map[string]string       `json:"images,omitempty"`
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
	Packages   []string           `json:"packages"` // laid into the root filesystem
	Kernel     *KernelInfo        `json:"kernel"`
	Cmdline    string             `json:"cmdline"`
	Init       string             `json:"init"` // package that provided /init
	Scriptlets []ScriptletOutcome `json:"scriptlets"`
	Triggers   []ScriptletOutcome `json:"triggers"`
	Unhandled  int                `json:"unhandledScriptlets"`
	Ghosts     []string           `json:"ghosts"`
	Dropped    []DropResult       `json:"dropped"`
	Policy     PolicyResult       `json:"policy"`
	Libraries  []string           `json:"libraries"` // /etc/ld.so.cache entries
	Rootfs     []FileEntry        `json:"rootfs"`
	Initramfs  []FileEntry        `json:"initramfs"`
	// Extensions are the system extensions built from the base.
	Extensions map[string]*ExtensionReport `json:"extensions,omitempty"`
	// Media lists the initramfs segment appended for the schematic.
	Media []FileEntry `json:"media,omitempty"`
	// UKI is the release's signed unified kernel image, with Secure Boot.
	UKI *UKIReport `json:"uki,omitempty"`
	// Images are the container images built for the architecture.
	Images map[string]*ImageReport `json:"images,omitempty"`
}

// ImageReport is one container image of one architecture: the packages
// laid into it, what was done to them, its layer and every file with the
// package (or generator) it came from.
type ImageReport struct {
	Packages   []string           `json:"packages"`
	Scriptlets []ScriptletOutcome `json:"scriptlets"`
	Ghosts     []string           `json:"ghosts"`
	Dropped    []DropResult       `json:"dropped"`
	Policy     PolicyResult       `json:"policy"`
	Libraries  []string           `json:"libraries"` // /etc/ld.so.cache entries
	// Layer is the digest of the image's one layer (gzip or zstd of Files).
	Layer string      `json:"layer"`
	Files []FileEntry `json:"files"`
}

// UKIReport says what a release's signed UKI is made of and who signed
// it: the signature is the only thing added to the base's bytes.
type UKIReport struct {
	File string `json:"file"` // the boot asset, "<arch>/uki.efi"
	// UnsignedSHA256 is the digest of the UKI without its signature
	// (what stripping the signature gives back).
	UnsignedSHA256    string `json:"unsignedSha256"`
	SigningCertSHA256 string `json:"signingCertSha256"`
	Subject           string `json:"subject"`
	// Stub and Kernel are the base packages (NEVRA) of systemd-stub and
	// of the kernel; Initramfs is the boot asset the UKI carries.
	Stub      string `json:"stub"`
	Kernel    string `json:"kernel"`
	Initramfs string `json:"initramfs"`
	// PCR11 is the value systemd-stub leaves in PCR 11 booting it, when
	// it carries signed PCR policies.
	PCR11 string `json:"pcr11,omitempty"`
}

// MediaReport describes the boot media of a schematic.
type MediaReport struct {
	Schematic string `json:"schematic"` // its ID
	// Platform the media are for (api/platform): its kernel arguments are
	// on their command lines, its name in their file names.
	Platform   string                  `json:"platform"`
	Extensions []string                `json:"extensions"`
	Files      map[string]ArtifactInfo `json:"files"` // "media/<id>/<file>" -> digest
	// Installer is the index digest of the schematic's installer image,
	// OUT/media/<id>/installer (its initramfs holds the extensions).
	Installer string `json:"installer"`
	// NoDiskImages says why there is no ISO or raw image (no EFI boot
	// manager in the lock).
	NoDiskImages string `json:"noDiskImages,omitempty"`
	// SecureBoot is set when the ISO and disk images are the Secure Boot
	// ones: what signed them and what they boot.
	SecureBoot *SecureBootReport `json:"secureBoot,omitempty"`
}

// SecureBootReport says how the Secure Boot media were signed: the
// signatures are the only bytes they add to the base's.
type SecureBootReport struct {
	// SigningCert is the db certificate whose key signed systemd-boot and
	// the UKIs (PEM), SigningCertSHA256 its fingerprint.
	SigningCert       string `json:"signingCert"`
	SigningCertSHA256 string `json:"signingCertSha256"`
	Subject           string `json:"subject"`
	// Stub and Bootloader are the base packages (NEVRA) of systemd-stub
	// and systemd-boot, by architecture.
	Stub       map[string]string `json:"stub"`
	Bootloader map[string]string `json:"bootloader"`
	// EnrolsKeys: the ESP carries PK.auth, KEK.auth and db.auth in
	// loader/keys/auto/ for systemd-boot to enrol in setup mode.
	EnrolsKeys bool `json:"enrolsKeys"`
	// Installer is the index digest of the schematic's Secure Boot
	// installer, OUT/media/<id>/installer-secureboot: the installer with
	// the signed ESP in place of the unsigned boot code.
	Installer string `json:"installer,omitempty"`
	// PCRPublicKey is the key of the UKIs' signed PCR 11 policies (their
	// .pcrpkey, PEM) and PCR11, by architecture, the value systemd-stub
	// leaves in PCR 11 (before the boot phases) booting the UKI of the
	// disk images, which <platform>-<arch>-secureboot-uki.efi is; both
	// only when the key set has a PCR key. The ISO's UKI has the ISO's
	// command line, so another value, signed in its own .pcrsig.
	PCRPublicKey string            `json:"pcrPublicKey,omitempty"`
	PCR11        map[string]string `json:"pcr11,omitempty"`
}

// FileEntry is one path of an artifact with where it came from.
type FileEntry struct {
	Path   string   `json:"path"`
	Type   string   `json:"type"`
	Mode   string   `json:"mode"` // octal permission bits
	UID    int      `json:"uid"`
	GID    int      `json:"gid"`
	Size   int64    `json:"size"`
	SHA256 string   `json:"sha256,omitempty"`
	Target string   `json:"target,omitempty"`
	Link   string   `json:"hardlink,omitempty"`
	Xattrs []string `json:"xattrs,omitempty"`
	Origin Origin   `json:"origin"`
	// RPMDigest is the digest the package header recorded for the file.
	RPMDigest string `json:"rpmDigest,omitempty"`
}

// KernelInfo is the kernel of an architecture.
type KernelInfo struct {
	Package     string   `json:"package"`
	Version     string   `json:"version"` // the modules directory name, e.g. 6.12.40-std-def-alt1
	VmlinuzPath string   `json:"vmlinuzPath"`
	Modules     int      `json:"modules"`
	BootModules []string `json:"bootModules"` // load order, paths under the modules dir
	Builtin     []string `json:"builtinBootModules,omitempty"`
}

// Origin says where a path came from: a package or a builder generator.
type Origin struct {
	Package   string `json:"package,omitempty"`   // NEVRA
	RPMSHA256 string `json:"rpmSha256,omitempty"` // sha256 of the .rpm
	Generator string `json:"generator,omitempty"` // e.g. "passwd", "os-release", "implicit-directory"
	// Path is where the package put the file when an extension's
	// definition relocated it (relocate:): still traced to the package.
	Path string `json:"path,omitempty"`
}

func (o Origin) String() string {
	if o.Generator != "" {
		return "builder generator " + o.Generator
	}
	return o.Package
}

// DropResult reports what a rule removed.
type DropResult struct {
	Rule  string `json:"rule"`
	Paths int    `json:"paths"`
	Bytes int64  `json:"bytes"`
}

// PolicyResult lists what the policy did.
type PolicyResult struct {
	Setuid        []string `json:"setuid"`        // kept, allowed
	Stripped      []string `json:"stripped"`      // setuid/setgid bits removed
	WorldWritable []string `json:"worldWritable"` // allowed world-writable paths
	Capabilities  []string `json:"capabilities"`  // files with security.capability
}

// ScriptletOutcome says what became of one scriptlet, which is never run.
type ScriptletOutcome struct {
	Package string   `json:"package"`
	Kind    string   `json:"kind"`
	Handled bool     `json:"handled"`
	How     []string `json:"how,omitempty"`     // e.g. "groupadd containerd", "ldconfig: default search path"
	Pending []string `json:"pending,omitempty"` // lines not covered
}

// ExtensionReport describes one extension of an architecture.
type ExtensionReport struct {
	Version  string      `json:"version"`
	Packages []string    `json:"packages"`           // laid into the extension (not already in the root filesystem)
	Excluded []string    `json:"excluded,omitempty"` // dependencies left out by the definition
	Modules  bool        `json:"kernelModules"`
	Layer    string      `json:"layer"` // digest of the image layer (gzip of manifest.yaml and rootfs/)
	Files    []FileEntry `json:"files"` // below rootfs/, as relocated
}

// Unlike lists, sorted by name, the entries of two maps of implementations
// (Compressors, Tools) that differ, as NAME, A's and B's ("none" for an
// entry one of them lacks): what two builds did not share.
func Unlike(a, b map[string]string) [][3]string {
	var out [][3]string
	seen := map[string]bool{}
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if seen[k] {
				continue
			}
			seen[k] = true
			x, okA := a[k]
			y, okB := b[k]
			if okA && okB && x == y {
				continue
			}
			out = append(out, [3]string{k, cmp.Or(x, "none"), cmp.Or(y, "none")})
		}
	}
	slices.SortFunc(out, func(p, q [3]string) int { return cmp.Compare(p[0], q[0]) })
	return out
}
