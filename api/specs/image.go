package specs

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/nodeforge/builder/api/platform"
)

// Image is how the node OS image is assembled from the locked packages.
// Every field has a default, so a spec may omit the whole section.
type Image struct {
	// OS names the system in /etc/os-release.
	OS OSRelease `yaml:"os,omitempty" json:"os"`
	// Cmdline is the kernel command line, one argument per item.
	Cmdline []string `yaml:"cmdline,omitempty" json:"cmdline"`
	// KernelParamPrefix names the node's init's kernel parameters in the
	// media's command lines: PREFIX.platform=, PREFIX.environment= (default
	// talos: Talos's machined reads talos.*).
	KernelParamPrefix string `yaml:"kernel-param-prefix,omitempty" json:"kernelParamPrefix,omitempty"`
	// Platforms change Talos's platform table (api/platform): an entry
	// named as one of its platforms replaces the fields it sets (args and
	// arch-args together), another is a new platform. Both are recorded in
	// the release, so media made from it (the factory's) are the build's.
	Platforms []platform.Platform `yaml:"platforms,omitempty" json:"platforms,omitempty"`
	// Kernel names the kernel component's package that ships the kernel
	// image. Default: the one package of the component with a
	// /boot/vmlinuz-<version> or a /lib/modules/<version>/vmlinuz (ALT's
	// kernel-image-*, Fedora's kernel-core); required when several have one.
	Kernel string `yaml:"kernel,omitempty" json:"kernel,omitempty"`
	// Init is the /init of the initramfs: a file of a locked package.
	Init FileRef `yaml:"init,omitempty" json:"init"`
	// Installer is the installer image's /usr/bin/installer: a file of a
	// locked package (default talos-installer's /usr/bin/installer).
	Installer FileRef `yaml:"installer,omitempty" json:"installer"`
	// Bootloader is the EFI boot manager of the ISO and disk images: a
	// file of a locked package (default systemd-boot-efi's
	// systemd-boot{efiarch}.efi: systemd-bootx64.efi, systemd-bootaa64.efi);
	// lock it through a component, the installer's say.
	Bootloader FileRef `yaml:"bootloader,omitempty" json:"bootloader"`
	// Stub is the EFI stub of the unified kernel images that Secure Boot
	// media boot (systemd-stub): a file of a locked package. Unset, it is
	// linux<efi arch>.efi.stub beside the bootloader, in its package
	// (see StubRef).
	Stub *FileRef `yaml:"stub,omitempty" json:"stub,omitempty"`
	// Talosctl is talosctl, a file of a locked package (the port's
	// talosctl RPM's /usr/bin/talosctl): the installer image carries it
	// beside the installer, and the Image Factory serves it at
	// /talosctl/VERSION as upstream serves its talosctl binaries. Unset,
	// the release ships none.
	Talosctl *FileRef `yaml:"talosctl,omitempty" json:"talosctl,omitempty"`
	// BootModules are loaded by init before the root is mounted (with
	// everything they depend on): a distribution kernel builds loop,
	// squashfs and overlay as modules.
	BootModules []string `yaml:"boot-modules,omitempty" json:"bootModules"`
	// Modules selects the kernel modules of the image: empty means all,
	// otherwise the listed ones plus their dependencies.
	Modules []string `yaml:"modules,omitempty" json:"modules,omitempty"`
	// Compression of rootfs.sqsh: zstd (default), xz, gzip, lz4.
	Compression string `yaml:"compression,omitempty" json:"compression"`
	// CompressionLevel of rootfs.sqsh; 0 means the default: zstd 13 (half
	// the time of mksquashfs's 15 for about 3% more bytes), xz 6, gzip 9.
	CompressionLevel int `yaml:"compression-level,omitempty" json:"compressionLevel"`
	// SquashfsWriter: "go" (default: rootfs/sqfs, which caches compressed
	// blocks by content, so a rebuild recompresses only what changed) or
	// "tar2sqfs" (squashfs-tools-ng fed a tar stream; the default for lz4,
	// which the Go writer does not write).
	SquashfsWriter string `yaml:"squashfs-writer,omitempty" json:"squashfsWriter"`
	// InitramfsCompression: zstd (default, as Talos since 1.8) or xz.
	InitramfsCompression string `yaml:"initramfs-compression,omitempty" json:"initramfsCompression"`
	// Drop removes paths by pattern; the report shows bytes saved per rule.
	Drop []DropRule `yaml:"drop,omitempty" json:"drop"`
	// Users and Groups are added to the image's passwd and group files.
	Users  []User  `yaml:"users,omitempty" json:"users,omitempty"`
	Groups []Group `yaml:"groups,omitempty" json:"groups,omitempty"`
	// Setuid lists the paths allowed to keep setuid/setgid bits; on others
	// the bits are an error (or stripped when StripSetuid).
	Setuid      []string `yaml:"setuid,omitempty" json:"setuid,omitempty"`
	StripSetuid bool     `yaml:"strip-setuid,omitempty" json:"stripSetuid,omitempty"`
	// WorldWritable lists the paths allowed to be world-writable (sticky
	// directories such as /tmp are always allowed).
	WorldWritable []string `yaml:"world-writable,omitempty" json:"worldWritable,omitempty"`
	// Devices: "refuse" (default) or "allow" device nodes from packages.
	Devices string `yaml:"devices,omitempty" json:"devices"`
}

// OSRelease fields of /etc/os-release.
type OSRelease struct {
	ID         string `yaml:"id,omitempty" json:"id"`
	Name       string `yaml:"name,omitempty" json:"name"`
	PrettyName string `yaml:"pretty-name,omitempty" json:"prettyName"`
	HomeURL    string `yaml:"home-url,omitempty" json:"homeUrl,omitempty"`
}

// FileRef names a file shipped by a package.
type FileRef struct {
	Package string `yaml:"package" json:"package"`
	Path    string `yaml:"path" json:"path"`
}

// EFIArchPlaceholder in a FileRef's path stands for the architecture's
// UEFI name (x64, aa64): one spec names the file of every architecture.
const EFIArchPlaceholder = "{efiarch}"

// ForEFIArch is the reference with EFIArchPlaceholder replaced by efiArch.
func (r FileRef) ForEFIArch(efiArch string) FileRef {
	r.Path = strings.ReplaceAll(r.Path, EFIArchPlaceholder, efiArch)
	return r
}

// DropRule removes the paths matching its patterns ("**" matches any
// number of path components, "*" one component's characters).
type DropRule struct {
	Name  string   `yaml:"name" json:"name"`
	Paths []string `yaml:"paths" json:"paths"`
}

// User is a passwd entry.
type User struct {
	Name  string `yaml:"name" json:"name"`
	UID   int    `yaml:"uid" json:"uid"`
	Group string `yaml:"group,omitempty" json:"group,omitempty"`
	Home  string `yaml:"home,omitempty" json:"home,omitempty"`
	Shell string `yaml:"shell,omitempty" json:"shell,omitempty"`
}

// Group is a group entry.
type Group struct {
	Name string `yaml:"name" json:"name"`
	GID  int    `yaml:"gid" json:"gid"`
}

// DefaultCmdline follows Talos's defaults.
var DefaultCmdline = []string{"init_on_alloc=1", "slab_nomerge", "pti=on", "consoleblank=0", "printk.devkmsg=on", "module.sig_enforce=1"}

// DefaultBootModules are what a squashfs root with an overlay needs on a
// distribution kernel, plus virtio for virtual machines.
var DefaultBootModules = []string{"loop", "squashfs", "overlay", "virtio_pci", "virtio_blk"}

// DefaultDrop removes documentation, manuals and locales.
var DefaultDrop = []DropRule{
	{Name: "documentation", Paths: []string{"/usr/share/doc/**", "/usr/share/info/**", "/usr/share/licenses/**"}},
	{Name: "manual pages", Paths: []string{"/usr/share/man/**"}},
	{Name: "locales", Paths: []string{"/usr/share/locale/**", "/usr/lib/locale/**"}},
}

func (im *Image) normalize(s *Spec, bad func(string, ...any)) {
	if im.OS.ID == "" {
		im.OS.ID = "nodeforge"
	}
	if im.OS.Name == "" {
		im.OS.Name = "Nodeforge"
	}
	if im.OS.PrettyName == "" {
		im.OS.PrettyName = fmt.Sprintf("%s %s (%s)", im.OS.Name, s.Version, s.Branch)
	}
	if im.Cmdline == nil {
		im.Cmdline = append([]string(nil), DefaultCmdline...)
	}
	if _, err := im.PlatformTable(); err != nil {
		bad("image: %v", err)
	}
	if im.Kernel != "" && !nameRe.MatchString(im.Kernel) {
		bad("image.kernel %q is not a package name", im.Kernel)
	}
	if im.Init.Package == "" {
		im.Init = FileRef{Package: "talos-installer", Path: "/usr/libexec/talos/init"}
	}
	if !path.IsAbs(im.Init.Path) {
		bad("image.init.path %q must be absolute", im.Init.Path)
	}
	if im.Installer.Package == "" {
		im.Installer = FileRef{Package: "talos-installer", Path: "/usr/bin/installer"}
	}
	if !path.IsAbs(im.Installer.Path) {
		bad("image.installer.path %q must be absolute", im.Installer.Path)
	}
	if im.Bootloader.Package == "" {
		im.Bootloader = FileRef{Package: "systemd-boot-efi", Path: "/usr/lib/systemd/boot/efi/systemd-boot" + EFIArchPlaceholder + ".efi"}
	}
	if !path.IsAbs(im.Bootloader.Path) {
		bad("image.bootloader.path %q must be absolute", im.Bootloader.Path)
	}
	if im.Stub != nil && (im.Stub.Package == "" || !path.IsAbs(im.Stub.Path)) {
		bad("image.stub needs a package and an absolute path")
	}
	if im.Talosctl != nil && (im.Talosctl.Package == "" || !path.IsAbs(im.Talosctl.Path)) {
		bad("image.talosctl needs a package and an absolute path")
	}
	if im.BootModules == nil {
		im.BootModules = append([]string(nil), DefaultBootModules...)
	}
	switch im.Compression {
	case "":
		im.Compression = "zstd"
	case "zstd", "xz", "gzip", "lz4":
	default:
		bad("image.compression %q: want zstd, xz, gzip or lz4", im.Compression)
	}
	if im.CompressionLevel == 0 {
		im.CompressionLevel = map[string]int{"zstd": 13, "xz": 6, "gzip": 9, "lz4": 0}[im.Compression]
	}
	if im.CompressionLevel < 0 || im.CompressionLevel > 22 {
		bad("image.compression-level %d is out of range", im.CompressionLevel)
	}
	switch im.SquashfsWriter {
	case "":
		im.SquashfsWriter = "go"
		if im.Compression == "lz4" {
			im.SquashfsWriter = "tar2sqfs"
		}
	case "tar2sqfs":
	case "go":
		if im.Compression == "lz4" {
			bad("image.squashfs-writer go does not write lz4")
		}
	default:
		bad("image.squashfs-writer %q: want tar2sqfs or go", im.SquashfsWriter)
	}
	switch im.InitramfsCompression {
	case "":
		im.InitramfsCompression = "zstd"
	case "zstd", "xz":
	default:
		bad("image.initramfs-compression %q: want zstd or xz", im.InitramfsCompression)
	}
	if im.Drop == nil {
		im.Drop = append([]DropRule(nil), DefaultDrop...)
	}
	for _, d := range im.Drop {
		for _, p := range d.Paths {
			if _, err := GlobRegexp(p); err != nil {
				bad("image.drop %q: %v", p, err)
			}
		}
	}
	switch im.Devices {
	case "":
		im.Devices = "refuse"
	case "refuse", "allow":
	default:
		bad("image.devices %q: want refuse or allow", im.Devices)
	}
	for _, u := range im.Users {
		if !nameRe.MatchString(u.Name) || u.UID < 0 {
			bad("image.users: bad user %q (uid %d)", u.Name, u.UID)
		}
	}
	for _, g := range im.Groups {
		if !nameRe.MatchString(g.Name) || g.GID < 0 {
			bad("image.groups: bad group %q (gid %d)", g.Name, g.GID)
		}
	}
}

// GlobRegexp compiles a path pattern: "**" spans directories, "*" and "?"
// stay within one component.
func GlobRegexp(pattern string) (*regexp.Regexp, error) {
	if !strings.HasPrefix(pattern, "/") {
		return nil, fmt.Errorf("pattern must be absolute")
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '*' && i+1 < len(pattern) && pattern[i+1] == '*':
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// StubRef is the image's EFI stub for an EFI architecture name ("x64",
// "aa64"): image.stub, or linux<efiArch>.efi.stub beside the bootloader.
func (im *Image) StubRef(efiArch string) FileRef {
	if im.Stub != nil {
		return *im.Stub
	}
	return FileRef{Package: im.Bootloader.Package, Path: path.Join(path.Dir(im.Bootloader.ForEFIArch(efiArch).Path), "linux"+efiArch+".efi.stub")}
}

// PlatformTable is Talos's platform table with the image's changes.
func (im *Image) PlatformTable() (platform.Table, error) {
	return platform.Talos.Override(im.KernelParamPrefix, im.Platforms)
}
