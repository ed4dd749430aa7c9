package demobase

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/pkgbase/debext"
	"github.com/nodeforge/builder/pkgbase/debpkg"
)

// Boot names the real packages that make the demo base bootable: Debian's
// kernel and systemd-boot EFI binaries, wrapped into the base's
// kernel-image-std-def and systemd-boot-efi (signed by the demo key like
// the rest), the node init (cmd/nodeforge-init) as nodeforge-init, and,
// when there, Debian's packages of the cri and btrfs extensions.
// Everything else stays a stand-in.
type Boot struct {
	// KernelDeb is Debian's linux-image-<abi>-amd64 package.
	KernelDeb string
	// BootDeb is Debian's systemd-boot-efi package (amd64).
	BootDeb string
	// Init is the node init: a static linux/amd64 executable.
	Init string
	// ExtDebs are Debian's packages of the cri and btrfs extensions and
	// the libraries they load (debext.Names' order); none: the
	// extensions are stand-ins.
	ExtDebs []string
	// ModuleTrees are the parts of lib/modules/<kver>/ the kernel package
	// carries (default BootModuleTrees).
	ModuleTrees []string
}

// BootModuleTrees are what the demo node loads (loop, squashfs, overlay,
// virtio, efivarfs), btrfs for the btrfs extension, what they depend on,
// and the kernel's lists of its modules; not the whole 300 MB.
var BootModuleTrees = []string{
	"kernel/fs/squashfs", "kernel/fs/overlayfs", "kernel/fs/efivarfs", "kernel/fs/btrfs",
	"kernel/drivers/block", "kernel/drivers/virtio", "kernel/lib", "kernel/crypto",
	"modules.builtin", "modules.builtin.modinfo", "modules.order",
}

// InitPackage ships the node init at InitPath in a bootable demo base.
const (
	InitPackage = "nodeforge-init"
	InitPath    = "/usr/libexec/nodeforge/init"
)

// ErrNoBootPackages is wrapped by BootFromCache's error when the cache
// lacks Debian's packages: `make demo` then writes the stand-in base.
var ErrNoBootPackages = errors.New("no Debian kernel or systemd-boot-efi package")

// BootFromCache finds the newest Debian linux-image-6.1.0-N-amd64 and
// systemd-boot-efi (amd64) packages in cacheDir, where
// scripts/fetch-test-kernel.sh puts them, and checks that init exists.
// The packages of the cri and btrfs extensions (cacheDir/extension-debs)
// are taken when every one is there; otherwise those extensions stay
// stand-ins (Summary.Extensions says which).
func BootFromCache(cacheDir, init string) (Boot, error) {
	b := Boot{KernelDeb: debpkg.NewestKernel(cacheDir, "amd64"), BootDeb: debpkg.Newest(cacheDir, "systemd-boot-efi_*_amd64.deb"), Init: init}
	switch {
	case b.KernelDeb == "":
		return b, fmt.Errorf("%w: no linux-image-6.1.0-*-amd64_*.deb in %s (scripts/fetch-test-kernel.sh --demo %s fetches it)", ErrNoBootPackages, cacheDir, cacheDir)
	case b.BootDeb == "":
		return b, fmt.Errorf("%w: no systemd-boot-efi_*_amd64.deb in %s (scripts/fetch-test-kernel.sh --demo %s fetches it)", ErrNoBootPackages, cacheDir, cacheDir)
	}
	if st, err := os.Stat(init); err != nil {
		return b, fmt.Errorf("the node init: %w (make init builds it)", err)
	} else if !st.Mode().IsRegular() {
		return b, fmt.Errorf("the node init %s is not a regular file", init)
	}
	debs, err := debext.Find(cacheDir, "amd64")
	if err != nil && !errors.Is(err, debext.ErrNoDebs) {
		return b, err
	}
	b.ExtDebs = debs
	return b, nil
}

// Summary says what a bootable base was made of.
type Summary struct {
	Packages      int
	KernelVersion string // the modules directory: 6.1.0-57-amd64
	KernelDeb     string // base names of the Debian packages
	BootDeb       string
	// Extensions are the Debian packages of the cri and btrfs
	// extensions and the libraries they load ("name version", in
	// debext.Names' order); none when they are stand-ins.
	Extensions []string
}

// WriteBootable writes the demo base as Write does, with the real
// kernel, systemd-boot and init of b. Its bytes depend on b's packages
// and init only (the same inputs give the same base).
func WriteBootable(dir string, b Boot) (Summary, error) {
	stage, err := os.MkdirTemp("", "nodeforge-demo-boot-")
	if err != nil {
		return Summary{}, err
	}
	defer os.RemoveAll(stage)
	real, err := loadBoot(b, stage)
	if err != nil {
		return Summary{}, err
	}
	ps, err := packages(real)
	if err != nil {
		return Summary{}, err
	}
	if err := writeBase(dir, ps, real); err != nil {
		return Summary{}, err
	}
	return Summary{Packages: len(ps), KernelVersion: real.kver, KernelDeb: filepath.Base(b.KernelDeb), BootDeb: filepath.Base(b.BootDeb),
		Extensions: real.extDebs}, nil
}

// realParts are the real packages' contents and versions.
type realParts struct {
	kernelVersion, kernelRelease, kver string // RPM version and release; modules directory
	kernelDeb                          string // Debian package and version, for the description
	kernelFiles                        []file
	bootVersion, bootRelease, bootDeb  string
	bootFiles                          []file
	initBin                            []byte
	ext                                []*pkgDef // Debian's packages of the cri and btrfs extensions
	extDebs                            []string  // their names and Debian versions
}

// loadBoot reads b's packages (unpacked under stage) and init.
func loadBoot(b Boot, stage string) (*realParts, error) {
	trees := b.ModuleTrees
	if trees == nil {
		trees = BootModuleTrees
	}
	r := &realParts{}
	kroot := filepath.Join(stage, "kernel")
	kver, _, err := debpkg.ExtractKernel(b.KernelDeb, kroot, trees)
	if err != nil {
		return nil, err
	}
	r.kver = kver
	kpkg, kdv, err := debNameVersion(b.KernelDeb)
	if err != nil {
		return nil, err
	}
	r.kernelVersion, r.kernelRelease = rpmVR(kdv)
	r.kernelDeb = kpkg + " " + kdv
	if r.kernelFiles, err = treeFiles(kroot, "/boot", "/lib/modules/"+kver); err != nil {
		return nil, err
	}

	broot := filepath.Join(stage, "systemd-boot")
	if err := debpkg.Extract(b.BootDeb, broot); err != nil {
		return nil, err
	}
	bpkg, bdv, err := debNameVersion(b.BootDeb)
	if err != nil {
		return nil, err
	}
	r.bootVersion, r.bootRelease = rpmVR(bdv)
	r.bootDeb = bpkg + " " + bdv
	if r.bootFiles, err = treeFiles(broot, "/usr/lib/systemd/boot/efi"); err != nil {
		return nil, err
	}
	if len(r.bootFiles) < 2 {
		return nil, fmt.Errorf("demo base: %s has no EFI binaries in /usr/lib/systemd/boot/efi", b.BootDeb)
	}
	if r.initBin, err = os.ReadFile(b.Init); err != nil {
		return nil, fmt.Errorf("the node init: %w", err)
	}
	if len(r.initBin) < 4 || string(r.initBin[:4]) != "\x7fELF" {
		return nil, fmt.Errorf("the node init %s is not an ELF executable (make init builds it)", b.Init)
	}
	if len(b.ExtDebs) > 0 {
		if err := r.loadExtDebs(b.ExtDebs, filepath.Join(stage, "extensions")); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func debNameVersion(deb string) (string, string, error) {
	name, err := debpkg.Field(deb, "Package")
	if err != nil {
		return "", "", err
	}
	v, err := debpkg.Field(deb, "Version")
	return name, v, err
}

// rpmVR is an RPM version and release of a Debian version; a tilde
// (1~deb12u2) becomes a dot, which every rpm version compare reads alike.
func rpmVR(debVersion string) (string, string) {
	v, r := debpkg.RPMVersion(debVersion)
	return strings.ReplaceAll(v, "~", "."), strings.ReplaceAll(r, "~", ".")
}

// treeFiles lists the files, directories and links of root below each of
// tops (package paths), with their contents, in path order. The tops
// themselves are listed when they are not directories every node has.
func treeFiles(root string, tops ...string) ([]file, error) {
	var out []file
	for _, top := range tops {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			name := "/" + filepath.ToSlash(rel)
			info, err := d.Info()
			if err != nil {
				return err
			}
			switch {
			case d.IsDir():
				if name != "/boot" {
					out = append(out, dir(name, uint(info.Mode().Perm())))
				}
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				out = append(out, link(name, target))
			case d.Type().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				out = append(out, file{path: name, mode: uint(info.Mode().Perm()), body: string(b)})
			default:
				return fmt.Errorf("demo base: %s: not a file, directory or link", name)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

// kernelCode is ALT's version code of a kernel in its out-of-tree
// modules' releases: major<<16 | minor<<8 | patch (6.12.40: 396328).
func kernelCode(version string) string {
	f := strings.SplitN(version, ".", 3)
	code := 0
	for i, shift := range []int{16, 8, 0} {
		if i < len(f) {
			n, _ := strconv.Atoi(f[i])
			code |= n << shift
		}
	}
	return strconv.Itoa(code)
}

// kernel is the real kernel package, in the stand-in's name and shape.
func (r *realParts) kernel(disttag string) *pkgDef {
	return &pkgDef{
		name: "kernel-image-std-def", epoch: 2, version: r.kernelVersion, release: r.kernelRelease, disttag: disttag,
		group: "System/Kernel and hardware", license: "GPL-2.0-only", url: "https://www.kernel.org/",
		summary: "The Linux kernel: Debian's " + r.kernelDeb + " for the demo",
		desc: "The kernel image and the module trees " + strings.Join(BootModuleTrees, ", ") + "\n" +
			"of Debian's " + r.kernelDeb + " (kernel " + r.kver + "), unchanged (the\n" +
			"modules keep Debian's signatures), wrapped for the NodeForge demo package base.",
		requires: []dep{
			{"bootloader-utils", fPrereq | fGreater | fEqual, "0.5.2-alt1"},
			{"kmod", fPrereq, ""},
			{"coreutils", fPrereq, ""},
		},
		files:      r.kernelFiles,
		compressor: "zstd",
	}
}

// bootloader makes p, the stand-in systemd-boot-efi, Debian's.
func (r *realParts) bootloader(p *pkgDef) {
	p.version, p.release = r.bootVersion, r.bootRelease
	p.summary = "systemd-boot EFI boot manager and stubs: Debian's " + r.bootDeb
	p.desc = "systemd-boot and the EFI stubs of Debian's " + r.bootDeb + ", unchanged,\n" +
		"wrapped for the NodeForge demo package base."
	p.files = r.bootFiles
	p.compressor = "zstd"
}

// init is the node init's package.
func (r *realParts) init() *pkgDef {
	return &pkgDef{
		name: InitPackage, version: "1.11.0", release: "alt1", src: "nodeforge", disttag: "p11+389100.100.1.1",
		group: "System/Base", license: "Apache-2.0", url: "https://nodeforge.invalid/",
		summary: "The Nodeforge node init (cmd/nodeforge-init)",
		desc: "The /init of the node's initramfs: mounts the kernel's file systems, loads\n" +
			"the boot modules, mounts the squashfs root under an overlay with the\n" +
			"schematic's extensions, prints a banner and one marker line per step.",
		files: []file{
			dir(path.Dir(InitPath), 0o755),
			{path: InitPath, mode: 0o755, body: string(r.initBin)},
		},
		compressor: "zstd",
	}
}

// bootCmdline is the bootable base's kernel command line: Talos's
// defaults, the console on the first serial port (qemu -serial stdio), a
// reboot at once on a panic (qemu -no-reboot then exits), and quiet: the
// console shows the node init's lines, the kernel's warnings and errors.
var bootCmdline = append(slices.Clone(specs.DefaultCmdline), "console=ttyS0", "panic=-1", "quiet")
