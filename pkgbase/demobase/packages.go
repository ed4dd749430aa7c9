package demobase

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/rpmwrite"
)

// rpm's dependency flags (RPMSENSE_*).
const (
	fLess       = rpmwrite.Less
	fGreater    = rpmwrite.Greater
	fEqual      = rpmwrite.Equal
	fPrereq     = rpmwrite.Prereq
	fScriptPre  = rpmwrite.PreInst
	fScriptPost = rpmwrite.PostInst
	fFindReq    = rpmwrite.FindReq
	fRPMLib     = rpmwrite.RPMLib
)

type dep struct {
	name  string
	flags uint32
	ver   string
}

const (
	kindFile = iota
	kindDir
	kindLink
)

type file struct {
	path         string
	kind         int
	mode         uint   // permission bits
	body         string // contents, or the target of a link
	owner, group string // default root
	config       bool   // %config(noreplace)
}

// pkgDef is one demo package.
type pkgDef struct {
	name, version, release string
	epoch                  int    // 0: no epoch tag
	arch                   string // "x86_64" or "noarch"
	src                    string // source package name
	disttag                string
	group, license, url    string
	summary                string

	provides, requires, conflicts, obsoletes []dep
	files                                    []file
	pre, post                                string

	usesSets bool // requires set-versions: adds rpmlib(SetVersions)
	// desc replaces the stand-in description (a real package's).
	desc string
	// compressor of the payload ("": payloadCompressor); a real
	// package's is zstd, 20 times faster to write than Go's xz.
	compressor string
	built      time.Time // BUILDTIME, every file mtime and the changelog date
	note       string    // its changelog entry ("": the demo's default)
	history    []change  // entries of earlier versions, newest first
}

// change is a changelog entry.
type change struct {
	built time.Time
	evr   string
	text  string
}

func (p *pkgDef) description() string {
	if p.desc != "" {
		return p.desc
	}
	return "Demo stand-in for ALT's " + p.name + ": its files are small shell scripts\n" +
		"and text, not the real software. Part of the NodeForge demo package base,\n" +
		"for trying the builder offline."
}

// allRequires adds the rpmlib() requirements rpm-build would add.
func (p *pkgDef) allRequires() []dep {
	out := append([]dep(nil), p.requires...)
	if p.usesSets {
		out = append(out, dep{"rpmlib(SetVersions)", fRPMLib | fPrereq, ""})
	}
	if p.payload() == "zstd" {
		return append(out, dep{"rpmlib(PayloadIsZstd)", fRPMLib | fLess | fEqual, "5.4.18-1"})
	}
	return append(out, dep{"rpmlib(PayloadIsXz)", fRPMLib | fPrereq, ""})
}

// payload is the package's payload compressor.
func (p *pkgDef) payload() string {
	if p.compressor != "" {
		return p.compressor
	}
	return payloadCompressor
}

// Time line of the demo base. Every package is built at a fixed offset
// from buildEpoch; the release is dated after all of them.
var (
	buildEpoch  = time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	releaseDate = time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC)
)

// Kernel versions: <version>-<flavour>-<release> names the modules dir.
const (
	kverNew = "6.12.40-std-def-alt1"
	kverOld = "6.12.30-std-def-alt1"
	nvVer   = "550.127"
)

// lib is a shared library and the symbols it exports, from which the
// set-versions of its provide and of every require on it are computed.
type lib struct {
	soname string
	bpp    int
	syms   []string
}

var libraries = []lib{
	{"libc.so.6()(64bit)", 20, strings.Fields(`__libc_start_main __cxa_finalize __stack_chk_fail abort calloc
		close dlopen dlsym execve exit fork fprintf free getenv ioctl malloc memcpy memset mount open
		poll printf pthread_create pthread_join puts read realloc setlocale socket stat strcmp strlen
		umount2 waitpid write`)},
	{"libtinfo.so.6()(64bit)", 16, strings.Fields(`setupterm tgetent tgetflag tgetnum tgetstr tgoto tputs cur_term`)},
	{"liblzma.so.5()(64bit)", 16, strings.Fields(`lzma_code lzma_end lzma_stream_decoder lzma_auto_decoder lzma_easy_encoder lzma_crc64`)},
	{"libseccomp.so.2()(64bit)", 16, strings.Fields(`seccomp_init seccomp_load seccomp_release seccomp_rule_add seccomp_arch_add seccomp_version`)},
	{"libnftnl.so.11()(64bit)", 16, strings.Fields(`nftnl_rule_alloc nftnl_rule_free nftnl_chain_alloc nftnl_table_alloc nftnl_batch_begin nftnl_batch_end`)},
	{"libzfs.so.4()(64bit)", 16, strings.Fields(`libzfs_init libzfs_fini zfs_open zfs_close zpool_open zpool_close zpool_import zfs_mount`)},
	{"libnvpair.so.3()(64bit)", 16, strings.Fields(`nvlist_alloc nvlist_free nvlist_lookup_string nvlist_add_string nvpair_name`)},
	{"libzfs_core.so.3()(64bit)", 16, strings.Fields(`libzfs_core_init libzfs_core_fini lzc_create lzc_snapshot lzc_destroy`)},
	{"libbtrfs.so.0()(64bit)", 16, strings.Fields(`btrfs_read_dev_super btrfs_list_subvols btrfs_util_subvolume_id btrfs_open_dir`)},
	{"libnvidia-ml.so.1()(64bit)", 16, strings.Fields(`nvmlInit_v2 nvmlShutdown nvmlDeviceGetCount_v2 nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetName nvmlSystemGetDriverVersion`)},
}

// catalog builds the package definitions. Dependencies on libraries are
// checked against the exported symbols, so the base stays closed.
type catalog struct {
	libs map[string]lib
	errs []error
}

func (c *catalog) lib(soname string) lib {
	l, ok := c.libs[soname]
	if !ok {
		c.errs = append(c.errs, fmt.Errorf("unknown library %s", soname))
	}
	return l
}

// provideLib is a library's provide: soname = set:<all exported symbols>.
func (c *catalog) provideLib(soname string) dep {
	l := c.lib(soname)
	set, err := evr.EncodeSet(l.bpp, l.syms)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("%s: %w", soname, err))
	}
	return dep{soname, fEqual, set}
}

// needLib is an automatically found require: soname >= set:<used symbols>.
func (c *catalog) needLib(soname string, syms ...string) dep {
	l := c.lib(soname)
	for _, s := range syms {
		found := false
		for _, e := range l.syms {
			found = found || e == s
		}
		if !found {
			c.errs = append(c.errs, fmt.Errorf("%s does not export %s", soname, s))
		}
	}
	set, err := evr.EncodeSet(l.bpp, syms)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("%s: %w", soname, err))
	}
	return dep{soname, fGreater | fEqual | fFindReq, set}
}

// needLibc is what every demo program linked against glibc requires.
func (c *catalog) needLibc(syms ...string) []dep {
	return []dep{
		c.needLib("libc.so.6()(64bit)", append([]string{"__libc_start_main", "__cxa_finalize", "__stack_chk_fail"}, syms...)...),
		{"libc.so.6(GLIBC_2.34)(64bit)", fFindReq, ""},
		{"rtld(GNU_HASH)", fFindReq, ""},
	}
}

// Small file constructors.
func exe(path, what string) file {
	return file{path: path, mode: 0o755, body: script(path, what)}
}

func script(path, what string) string {
	name := path[strings.LastIndex(path, "/")+1:]
	return "#!/bin/sh\n" +
		"# " + name + ": demo stand-in for " + what + ".\n" +
		"# Part of the NodeForge demo package base; it does nothing real.\n" +
		"echo \"" + name + " (NodeForge demo): $*\"\n"
}

func data(path, body string) file { return file{path: path, mode: 0o644, body: body} }

func conf(path, body string) file { return file{path: path, mode: 0o644, body: body, config: true} }

func dir(path string, mode uint) file { return file{path: path, kind: kindDir, mode: mode} }

func link(path, target string) file {
	return file{path: path, kind: kindLink, mode: 0o777, body: target}
}

// solib is a stand-in shared object: text, not ELF.
func solib(path string) file {
	return file{path: path, mode: 0o755, body: "NodeForge demo stand-in for the shared library " + path + "\n"}
}

// pinned is ALT's self-pinning of one build's subpackages: together with
// the self-provide (name = EVR) the package conflicts with any other EVR of
// its own name. A resolver must ignore such self-conflicts.
func pinned(name, v string) []dep {
	return []dep{{name, fLess, v}, {name, fGreater, v}}
}

// packages returns the demo base, in build order: the stand-ins, or with
// real the bootable base (real's kernel, systemd-boot and init in place of
// the stand-ins', the out-of-tree modules built for real's kernel, and
// Debian's packages of the cri and btrfs extensions when real has them).
func packages(real *realParts) ([]*pkgDef, error) {
	c := &catalog{libs: map[string]lib{}}
	for _, l := range libraries {
		c.libs[l.soname] = l
	}
	var ps []*pkgDef
	add := func(p *pkgDef) {
		if p.src == "" {
			p.src = p.name
		}
		if p.arch == "" {
			p.arch = "x86_64"
		}
		ps = append(ps, p)
	}
	binSh := dep{"/bin/sh", fFindReq, ""}

	add(&pkgDef{
		name: "setup", version: "2.2.6", release: "alt1", arch: "noarch", disttag: "p11+352014.100.1.1",
		group: "System/Base", license: "Public domain", summary: "Initial system configuration files",
		files: []file{
			conf("/etc/group", "root:x:0:\nbin:x:1:\ndaemon:x:2:\nwheel:x:10:root\nnobody:x:99:\n"),
			conf("/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"),
			conf("/etc/passwd", "root:x:0:0:System Administrator:/root:/bin/sh\nbin:x:1:1:bin:/:/dev/null\nnobody:x:99:99:Nobody:/var/empty:/dev/null\n"),
			conf("/etc/shells", "/bin/sh\n/bin/bash\n"),
		},
	})
	add(&pkgDef{
		name: "filesystem", version: "3.2", release: "alt1", disttag: "p11+352020.100.1.1",
		group: "System/Base", license: "Public domain", summary: "The basic directory layout of the system",
		requires: []dep{{"setup", fPrereq, ""}},
		files: []file{
			dir("/bin", 0o755), dir("/boot", 0o755), dir("/dev", 0o755), dir("/etc", 0o755), dir("/home", 0o755),
			dir("/lib", 0o755), dir("/lib/firmware", 0o755), dir("/lib/modules", 0o755), dir("/lib64", 0o755),
			dir("/proc", 0o555), dir("/root", 0o700), dir("/run", 0o755), dir("/sbin", 0o755), dir("/sys", 0o555),
			dir("/tmp", 0o1777), dir("/usr", 0o755), dir("/usr/bin", 0o755), dir("/usr/lib", 0o755),
			dir("/usr/lib64", 0o755), dir("/usr/libexec", 0o755), dir("/usr/sbin", 0o755), dir("/usr/share", 0o755),
			dir("/var", 0o755), dir("/var/lib", 0o755),
		},
	})

	add(&pkgDef{
		name: "glibc-core", epoch: 6, version: "2.38.0.76.e9f05fa1c6", release: "alt1", src: "glibc", disttag: "p11+356123.100.2.1",
		group: "System/Libraries", license: "LGPL-2.1-or-later", url: "https://www.gnu.org/software/libc/",
		summary: "The GNU libc core: the dynamic linker and libc",
		provides: []dep{
			c.provideLib("libc.so.6()(64bit)"),
			{"libc.so.6(GLIBC_2.2.5)(64bit)", 0, ""},
			{"libc.so.6(GLIBC_2.34)(64bit)", 0, ""},
			{"libc.so.6(GLIBC_2.38)(64bit)", 0, ""},
			{"ld-linux-x86-64.so.2()(64bit)", 0, ""},
			{"ld-linux-x86-64.so.2(GLIBC_2.3)(64bit)", 0, ""},
			{"rtld(GNU_HASH)", 0, ""},
		},
		files: []file{
			conf("/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
			solib("/lib64/ld-linux-x86-64.so.2"),
			solib("/lib64/libc.so.6"),
			exe("/sbin/ldconfig", "ldconfig, the shared library cache builder"),
		},
	})
	add(&pkgDef{
		name: "libtinfo", version: "6.3.20220618", release: "alt4", src: "ncurses", disttag: "p11+353390.100.1.1",
		group: "System/Libraries", license: "MIT", summary: "Terminal information library of ncurses",
		provides: []dep{c.provideLib("libtinfo.so.6()(64bit)")},
		requires: c.needLibc("malloc", "free", "getenv", "ioctl"), usesSets: true,
		files: []file{solib("/lib64/libtinfo.so.6.3"), link("/lib64/libtinfo.so.6", "libtinfo.so.6.3")},
	})
	add(&pkgDef{
		name: "bash", version: "5.2.37", release: "alt1", disttag: "p11+366401.100.1.1",
		group: "Shells", license: "GPL-3.0-or-later", url: "https://www.gnu.org/software/bash/",
		summary:  "The GNU Bourne Again shell, also /bin/sh",
		provides: []dep{{"sh", fEqual, "5.2.37"}},
		requires: append(c.needLibc("fork", "execve", "waitpid", "getenv", "setlocale", "open", "read", "write"),
			c.needLib("libtinfo.so.6()(64bit)", "setupterm", "tgetent", "tputs")),
		usesSets: true,
		files:    []file{exe("/bin/bash", "GNU bash"), link("/bin/sh", "bash")},
	})
	add(&pkgDef{
		name: "coreutils", version: "9.5", release: "alt1", disttag: "p11+359977.100.1.1",
		group: "File tools", license: "GPL-3.0-or-later", url: "https://www.gnu.org/software/coreutils/",
		summary:  "The GNU core utilities",
		requires: c.needLibc("open", "read", "write", "close", "stat", "printf", "setlocale"), usesSets: true,
		files: []file{
			exe("/bin/cat", "cat(1)"), exe("/bin/cp", "cp(1)"), exe("/bin/ln", "ln(1)"), exe("/bin/ls", "ls(1)"),
			exe("/bin/mkdir", "mkdir(1)"), exe("/bin/mv", "mv(1)"), exe("/bin/rm", "rm(1)"), exe("/usr/bin/env", "env(1)"),
		},
	})
	add(&pkgDef{
		name: "shadow-utils", version: "4.16.0", release: "alt1", src: "shadow", disttag: "p11+361200.100.1.1",
		group: "System/Base", license: "BSD-3-Clause", summary: "Utilities to manage users and groups",
		requires: c.needLibc("open", "read", "write", "getenv"), usesSets: true,
		files: []file{
			conf("/etc/login.defs", "UID_MIN 500\nGID_MIN 500\nSYS_UID_MIN 100\nSYS_GID_MIN 100\n"),
			exe("/usr/sbin/groupadd", "groupadd(8)"),
			exe("/usr/sbin/useradd", "useradd(8)"),
		},
	})
	add(&pkgDef{
		name: "liblzma", version: "5.6.3", release: "alt1", src: "xz", disttag: "p11+364050.100.1.1",
		group: "System/Libraries", license: "0BSD", summary: "LZMA and xz compression library",
		provides: []dep{c.provideLib("liblzma.so.5()(64bit)")},
		requires: c.needLibc("malloc", "free", "memcpy"), usesSets: true,
		files: []file{solib("/lib64/liblzma.so.5.6.3"), link("/lib64/liblzma.so.5", "liblzma.so.5.6.3")},
	})
	add(&pkgDef{
		name: "kmod", version: "33", release: "alt1", disttag: "p11+360311.100.1.1",
		group: "System/Kernel and hardware", license: "GPL-2.0-or-later", url: "https://git.kernel.org/pub/scm/utils/kernel/kmod/kmod.git",
		summary: "Tools to load, list and remove kernel modules",
		// kmod replaced module-init-tools; kernels of older branches still ask for it.
		provides:  []dep{{"module-init-tools", fEqual, "3.17-alt1"}},
		obsoletes: []dep{{"module-init-tools", fLess, "3.17"}},
		requires: append(c.needLibc("open", "read", "close", "stat", "printf"),
			c.needLib("liblzma.so.5()(64bit)", "lzma_code", "lzma_end", "lzma_stream_decoder")),
		usesSets: true,
		files: []file{
			exe("/bin/kmod", "kmod"),
			link("/sbin/depmod", "../bin/kmod"), link("/sbin/insmod", "../bin/kmod"), link("/sbin/lsmod", "../bin/kmod"),
			link("/sbin/modprobe", "../bin/kmod"), link("/sbin/rmmod", "../bin/kmod"),
			dir("/etc/modprobe.d", 0o755),
		},
	})
	add(&pkgDef{
		name: "make-initrd", version: "2.50.0", release: "alt1", disttag: "p11+379100.100.1.1",
		group: "System/Base", license: "GPL-3.0-or-later", summary: "Creates an initramfs image (provides mkinitrd)",
		provides: []dep{{"mkinitrd", fEqual, "2:2.50.0-alt1"}},
		requires: []dep{binSh, {"coreutils", 0, ""}, {"kmod", 0, ""}},
		files: []file{
			conf("/etc/initrd.mk", "# make-initrd configuration (demo)\nFEATURES += add-modules\n"),
			exe("/usr/sbin/make-initrd", "make-initrd"),
			link("/usr/sbin/mkinitrd", "make-initrd"),
		},
	})
	add(&pkgDef{
		name: "bootloader-utils", version: "0.5.3", release: "alt1", arch: "noarch", disttag: "p11+371777.100.1.1",
		group: "System/Base", license: "GPL-2.0-or-later", summary: "Installs a new kernel for the boot loader",
		requires: []dep{binSh, {"coreutils", 0, ""}},
		files: []file{
			conf("/etc/sysconfig/installkernel", "INITRD_GENERATOR=make-initrd\n"),
			exe("/usr/sbin/installkernel", "installkernel(8)"),
		},
	})

	sdBoot := &pkgDef{
		name: "systemd-boot-efi", version: "254.13", release: "alt1", src: "systemd", disttag: "p11+372211.100.1.1",
		group: "System/Kernel and hardware", license: "LGPL-2.1-or-later", summary: "systemd-boot EFI boot manager (demo stand-in)",
		files: []file{
			dir("/usr/lib/systemd/boot/efi", 0o755),
			exe("/usr/lib/systemd/boot/efi/systemd-bootx64.efi", "systemd-boot (demo stand-in, not an EFI binary)"),
		},
	}
	if real != nil {
		real.bootloader(sdBoot)
	}
	add(sdBoot)

	// Two kernels: the older one stays in the index, as it does in a branch.
	kernel := func(version, kver, disttag string, built time.Time) {
		mods := "/lib/modules/" + kver
		// Real (minimal) ELF modules whose symbols and aliases give the
		// dependency shapes of the real ones; depmod's indexes are the
		// builder's job, so the package ships none.
		kmods := map[string]kmod{
			"drivers/virtio/virtio_ring.ko": {name: "virtio_ring", exports: []string{"vring_new_virtqueue", "virtqueue_add_sgs"}},
			"drivers/virtio/virtio.ko":      {name: "virtio", exports: []string{"register_virtio_driver", "register_virtio_device"}, needs: []string{"vring_new_virtqueue"}},
			"drivers/virtio/virtio_pci.ko":  {name: "virtio_pci", aliases: []string{"pci:v00001AF4d*sv*sd*bc*sc*i*"}, needs: []string{"register_virtio_device", "vring_new_virtqueue"}},
			"drivers/block/virtio_blk.ko":   {name: "virtio_blk", aliases: []string{"virtio:d00000002v*"}, needs: []string{"register_virtio_driver", "virtqueue_add_sgs"}},
			"drivers/block/loop.ko":         {name: "loop", aliases: []string{"block-major-7-*", "devname:loop-control", "char-major-10-237"}},
			"fs/squashfs/squashfs.ko":       {name: "squashfs", aliases: []string{"fs-squashfs"}},
			"fs/overlayfs/overlay.ko":       {name: "overlay", aliases: []string{"fs-overlay"}},
			"fs/btrfs/btrfs.ko":             {name: "btrfs", aliases: []string{"fs-btrfs", "devname:btrfs-control"}, softdep: "pre: crc32c"},
		}
		ko := func(rel string) file {
			m := kmods[rel]
			m.kver = kver
			return file{path: mods + "/kernel/" + rel, mode: 0o644, body: string(m.elf())}
		}
		add(&pkgDef{
			name: "kernel-image-std-def", epoch: 2, version: version, release: "alt1", disttag: disttag, built: built,
			group: "System/Kernel and hardware", license: "GPL-2.0-only", url: "https://www.kernel.org/",
			summary: "The Linux kernel, std-def flavour (LTS)",
			requires: []dep{
				{"bootloader-utils", fPrereq | fGreater | fEqual, "0.5.2-alt1"},
				{"kmod", fPrereq, ""},
				{"mkinitrd", fPrereq | fGreater | fEqual, "1:2.9.9-alt1"},
				{"coreutils", fPrereq, ""},
				{"/bin/sh", fPrereq | fScriptPost, ""},
			},
			post: "/usr/sbin/installkernel " + kver + " || :\n",
			files: []file{
				data("/boot/System.map-"+kver, "ffffffff81000000 T _text\nffffffff81000000 T startup_64\n"),
				data("/boot/config-"+kver, "# demo kernel configuration for "+kver+"\nCONFIG_SQUASHFS=m\nCONFIG_OVERLAY_FS=m\nCONFIG_BLK_DEV_LOOP=m\nCONFIG_VIRTIO_BLK=m\nCONFIG_BTRFS_FS=m\nCONFIG_EXT4_FS=y\n"),
				data("/boot/vmlinuz-"+kver, "NodeForge demo stand-in for the Linux kernel image "+kver+"; not bootable.\n"),
				dir(mods, 0o755), dir(mods+"/kernel", 0o755),
				ko("drivers/block/loop.ko"), ko("drivers/block/virtio_blk.ko"),
				ko("drivers/virtio/virtio.ko"), ko("drivers/virtio/virtio_pci.ko"), ko("drivers/virtio/virtio_ring.ko"),
				ko("fs/btrfs/btrfs.ko"), ko("fs/overlayfs/overlay.ko"), ko("fs/squashfs/squashfs.ko"),
				data(mods+"/modules.builtin", "kernel/fs/ext4/ext4.ko\nkernel/drivers/tty/serial/8250/8250.ko\nkernel/crypto/crc32c_generic.ko\n"),
				data(mods+"/modules.order", "kernel/drivers/virtio/virtio_ring.ko\nkernel/drivers/virtio/virtio.ko\n"+
					"kernel/drivers/virtio/virtio_pci.ko\nkernel/drivers/block/virtio_blk.ko\nkernel/drivers/block/loop.ko\n"+
					"kernel/fs/squashfs/squashfs.ko\nkernel/fs/overlayfs/overlay.ko\nkernel/fs/btrfs/btrfs.ko\n"),
			},
		})
	}
	// The kernel the out-of-tree modules are built for.
	kVersion, kRelease, kver := "6.12.40", "alt1", kverNew
	if real == nil {
		kernel("6.12.30", kverOld, "p11+384001.100.2.1", buildEpoch.Add(-30*24*time.Hour))
		kernel("6.12.40", kverNew, "p11+386612.100.1.1", time.Time{})
	} else {
		// One real kernel: a stand-in of a higher version would win.
		kVersion, kRelease, kver = real.kernelVersion, real.kernelRelease, real.kver
		add(real.kernel("p11+386612.100.1.1"))
	}
	code := kernelCode(kVersion)

	// Out-of-tree modules are pinned to one exact kernel; the release
	// carries the kernel's version code (6<<16 | 12<<8 | patch).
	zfsModules := func(kernelVersion, kernelRelease, kver, code, disttag string, built time.Time) {
		mods := "/lib/modules/" + kver + "/misc"
		add(&pkgDef{
			name: "kernel-modules-zfs-std-def", version: "2.2.7", release: "alt1." + code + ".1", disttag: disttag, built: built,
			group: "System/Kernel and hardware", license: "CDDL-1.0", url: "https://openzfs.org/",
			summary:  "ZFS kernel modules for kernel-image-std-def " + kernelVersion,
			provides: []dep{{"kernel-modules-zfs", fEqual, "2.2.7"}},
			requires: []dep{{"kernel-image-std-def", fPrereq | fEqual, "2:" + kernelVersion + "-" + kernelRelease}},
			files: []file{
				dir(mods, 0o755),
				{path: mods + "/spl.ko", mode: 0o644, body: string(kmod{name: "spl", kver: kver, license: "GPL", exports: []string{"spl_kmem_alloc"}}.elf())},
				{path: mods + "/zfs.ko", mode: 0o644, body: string(kmod{name: "zfs", kver: kver, license: "CDDL", aliases: []string{"devname:zfs", "char-major-10-249"}, needs: []string{"spl_kmem_alloc"}}.elf())},
			},
		})
	}
	if real == nil {
		zfsModules("6.12.30", "alt1", kverOld, "396318", "p11+384120.100.1.1", buildEpoch.Add(-29*24*time.Hour))
	}
	zfsModules(kVersion, kRelease, kver, code, "p11+386700.100.1.1", time.Time{})

	zfsEVR := "2.2.7-alt1"
	add(&pkgDef{
		name: "libzfs", version: "2.2.7", release: "alt1", src: "zfs", disttag: "p11+386650.100.1.1",
		group: "System/Libraries", license: "CDDL-1.0", url: "https://openzfs.org/", summary: "ZFS libraries",
		provides: []dep{c.provideLib("libzfs.so.4()(64bit)"), c.provideLib("libnvpair.so.3()(64bit)"),
			c.provideLib("libzfs_core.so.3()(64bit)")},
		conflicts: pinned("libzfs", zfsEVR),
		requires:  c.needLibc("malloc", "free", "ioctl", "mount", "umount2", "open", "close"), usesSets: true,
		files: []file{
			solib("/lib64/libnvpair.so.3.0.0"), link("/lib64/libnvpair.so.3", "libnvpair.so.3.0.0"),
			solib("/lib64/libzfs.so.4.1.0"), link("/lib64/libzfs.so.4", "libzfs.so.4.1.0"),
			solib("/lib64/libzfs_core.so.3.0.0"), link("/lib64/libzfs_core.so.3", "libzfs_core.so.3.0.0"),
		},
	})
	add(&pkgDef{
		name: "zfs-utils", version: "2.2.7", release: "alt1", src: "zfs", disttag: "p11+386650.100.1.1",
		group: "System/Kernel and hardware", license: "CDDL-1.0", url: "https://openzfs.org/", summary: "ZFS administration tools",
		conflicts: pinned("zfs-utils", zfsEVR),
		requires: append(append([]dep{{"libzfs", fEqual, zfsEVR}}, c.needLibc("printf", "open", "close")...),
			c.needLib("libzfs.so.4()(64bit)", "libzfs_init", "libzfs_fini", "zfs_open", "zpool_open", "zpool_import"),
			c.needLib("libnvpair.so.3()(64bit)", "nvlist_alloc", "nvlist_free", "nvpair_name")),
		usesSets: true,
		files: []file{
			conf("/etc/zfs/zed.d/zed.rc", "ZED_EMAIL_ADDR=\"root\"\n"),
			exe("/sbin/mount.zfs", "mount.zfs(8)"), exe("/sbin/zfs", "zfs(8)"), exe("/sbin/zpool", "zpool(8)"),
		},
	})

	btrfsEVR := "6.12-alt1"
	add(&pkgDef{
		name: "libbtrfs", version: "6.12", release: "alt1", src: "btrfs-progs", disttag: "p11+385877.100.1.1",
		group: "System/Libraries", license: "LGPL-2.1-or-later", url: "https://btrfs.readthedocs.io/", summary: "Btrfs library",
		provides: []dep{c.provideLib("libbtrfs.so.0()(64bit)")},
		requires: c.needLibc("malloc", "free", "ioctl", "open"), usesSets: true,
		files: []file{solib("/usr/lib64/libbtrfs.so.0.1"), link("/usr/lib64/libbtrfs.so.0", "libbtrfs.so.0.1")},
	})
	add(&pkgDef{
		name: "btrfs-progs", version: "6.12", release: "alt1", disttag: "p11+385877.100.1.1",
		group: "System/Kernel and hardware", license: "GPL-2.0-only", url: "https://btrfs.readthedocs.io/", summary: "Btrfs file system tools",
		requires: append(append([]dep{{"libbtrfs", fEqual, btrfsEVR}}, c.needLibc("printf", "ioctl", "open")...),
			c.needLib("libbtrfs.so.0()(64bit)", "btrfs_read_dev_super", "btrfs_list_subvols")),
		usesSets: true,
		files: []file{
			exe("/sbin/btrfs", "btrfs(8)"), exe("/sbin/btrfstune", "btrfstune(8)"),
			exe("/sbin/fsck.btrfs", "fsck.btrfs(8)"), exe("/sbin/mkfs.btrfs", "mkfs.btrfs(8)"),
		},
	})

	add(&pkgDef{
		name: "libseccomp", version: "2.5.5", release: "alt1", disttag: "p11+362222.100.1.1",
		group: "System/Libraries", license: "LGPL-2.1-only", summary: "Seccomp filter library",
		provides: []dep{c.provideLib("libseccomp.so.2()(64bit)")},
		requires: c.needLibc("malloc", "free"), usesSets: true,
		files: []file{solib("/lib64/libseccomp.so.2.5.5"), link("/lib64/libseccomp.so.2", "libseccomp.so.2.5.5")},
	})
	add(&pkgDef{
		name: "runc", version: "1.2.6", release: "alt1", disttag: "p11+387310.100.1.1",
		group: "System/Configuration/Other", license: "Apache-2.0", url: "https://github.com/opencontainers/runc",
		summary: "OCI container runtime",
		requires: append(c.needLibc("fork", "execve", "mount", "socket", "pthread_create"),
			c.needLib("libseccomp.so.2()(64bit)", "seccomp_init", "seccomp_load", "seccomp_rule_add", "seccomp_release")),
		usesSets: true,
		files:    []file{exe("/usr/sbin/runc", "runc(8)")},
	})
	add(&pkgDef{
		name: "libnftnl", version: "1.2.8", release: "alt1", disttag: "p11+363001.100.1.1",
		group: "System/Libraries", license: "GPL-2.0-or-later", summary: "Netlink library for nftables",
		provides: []dep{c.provideLib("libnftnl.so.11()(64bit)")},
		requires: c.needLibc("malloc", "free", "socket"), usesSets: true,
		files: []file{solib("/usr/lib64/libnftnl.so.11.6.0"), link("/usr/lib64/libnftnl.so.11", "libnftnl.so.11.6.0")},
	})
	add(&pkgDef{
		name: "iptables", version: "1.8.11", release: "alt1", disttag: "p11+380400.100.1.1",
		group: "System/Kernel and hardware", license: "GPL-2.0-or-later", url: "https://www.netfilter.org/",
		summary: "Packet filter administration tools (nft backend)",
		requires: append(c.needLibc("socket", "printf", "getenv"),
			c.needLib("libnftnl.so.11()(64bit)", "nftnl_rule_alloc", "nftnl_rule_free", "nftnl_batch_begin", "nftnl_batch_end")),
		usesSets: true,
		files: []file{
			conf("/etc/sysconfig/iptables", "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"),
			link("/sbin/ip6tables", "xtables-nft-multi"), link("/sbin/iptables", "xtables-nft-multi"),
			link("/sbin/iptables-save", "xtables-nft-multi"), exe("/sbin/xtables-nft-multi", "iptables-nft"),
		},
	})
	add(&pkgDef{
		name: "cni-plugins", version: "1.6.2", release: "alt1", disttag: "sisyphus+385500.100.1.1",
		group: "System/Configuration/Other", license: "Apache-2.0", url: "https://www.cni.dev/",
		summary:  "Container Network Interface plugins",
		requires: []dep{{"iptables", 0, ""}},
		files: []file{
			dir("/usr/libexec/cni", 0o755),
			exe("/usr/libexec/cni/bridge", "the CNI bridge plugin"), exe("/usr/libexec/cni/firewall", "the CNI firewall plugin"),
			exe("/usr/libexec/cni/host-local", "the CNI host-local IPAM plugin"), exe("/usr/libexec/cni/loopback", "the CNI loopback plugin"),
			exe("/usr/libexec/cni/portmap", "the CNI portmap plugin"),
		},
	})
	add(&pkgDef{
		name: "containerd", version: "1.7.27", release: "alt1", disttag: "p11+387320.100.1.1",
		group: "System/Configuration/Other", license: "Apache-2.0", url: "https://containerd.io/",
		summary: "Industry-standard container runtime",
		requires: []dep{
			{"/bin/sh", fPrereq | fScriptPre, ""},
			{"shadow-utils", fPrereq | fScriptPre, ""},
			{"runc", fGreater | fEqual, "1.1"},
		},
		pre: "groupadd -r -f containerd ||:\n" +
			"useradd -r -g containerd -d /var/lib/containerd -s /dev/null -c 'containerd daemon' containerd >/dev/null 2>&1 ||:\n",
		files: []file{
			dir("/etc/containerd", 0o755),
			conf("/etc/containerd/config.toml", "# containerd configuration (NodeForge demo)\nversion = 2\n\n"+
				"[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/usr/libexec/cni\"\n  conf_dir = \"/etc/cni/net.d\"\n"),
			data("/lib/systemd/system/containerd.service", "[Unit]\nDescription=containerd container runtime\n\n"+
				"[Service]\nExecStart=/usr/bin/containerd\nDelegate=yes\nKillMode=process\n\n[Install]\nWantedBy=multi-user.target\n"),
			exe("/usr/bin/containerd", "containerd"), exe("/usr/bin/containerd-shim-runc-v2", "the containerd runc shim"),
			exe("/usr/bin/ctr", "ctr, the containerd client"),
			{path: "/var/lib/containerd", kind: kindDir, mode: 0o750, group: "containerd"},
		},
	})

	nvEVR := nvVer + "-alt1"
	add(&pkgDef{
		name: "firmware-nvidia-" + nvVer, version: nvVer, release: "alt1", arch: "noarch", src: "nvidia_glx_src_" + nvVer,
		disttag: "p11+388001.100.1.1", group: "System/Kernel and hardware", license: "NVIDIA", summary: "NVIDIA GSP firmware " + nvVer,
		files: []file{
			dir("/lib/firmware/nvidia/"+nvVer, 0o755),
			data("/lib/firmware/nvidia/"+nvVer+"/gsp_ga10x.bin", "NodeForge demo stand-in for NVIDIA GSP firmware (GA10x)\n"),
			data("/lib/firmware/nvidia/"+nvVer+"/gsp_tu10x.bin", "NodeForge demo stand-in for NVIDIA GSP firmware (TU10x)\n"),
		},
	})
	add(&pkgDef{
		name: "libnvidia-ml", version: nvVer, release: "alt1", src: "nvidia_glx_src_" + nvVer, disttag: "p11+388001.100.1.1",
		group: "System/Libraries", license: "NVIDIA", summary: "NVIDIA management library",
		provides: []dep{c.provideLib("libnvidia-ml.so.1()(64bit)")},
		requires: c.needLibc("dlopen", "dlsym", "ioctl"), usesSets: true,
		files: []file{link("/usr/lib64/libnvidia-ml.so.1", "libnvidia-ml.so."+nvVer), solib("/usr/lib64/libnvidia-ml.so." + nvVer)},
	})
	add(&pkgDef{
		name: "nvidia_glx_" + nvVer, version: nvVer, release: "alt1", src: "nvidia_glx_src_" + nvVer, disttag: "p11+388001.100.1.1",
		group: "System/Kernel and hardware", license: "NVIDIA", summary: "NVIDIA user-space driver " + nvVer,
		provides: []dep{{"nvidia_glx", fEqual, nvEVR}},
		requires: append(append([]dep{
			{"firmware-nvidia-" + nvVer, fEqual, nvEVR},
			{"libnvidia-ml", fEqual, nvEVR},
		}, c.needLibc("dlopen", "dlsym", "printf")...),
			c.needLib("libnvidia-ml.so.1()(64bit)", "nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2", "nvmlSystemGetDriverVersion")),
		usesSets: true,
		files: []file{
			exe("/usr/bin/nvidia-smi", "nvidia-smi"),
			solib("/usr/lib64/nvidia_glx_" + nvVer + "/libGLX_nvidia.so." + nvVer),
		},
	})
	add(&pkgDef{
		name: "nvidia-modprobe", version: nvVer, release: "alt1", disttag: "p11+388010.100.1.1",
		group: "System/Kernel and hardware", license: "GPL-2.0-only", summary: "Loads the NVIDIA kernel modules and creates device nodes",
		requires: c.needLibc("fork", "execve", "open"), usesSets: true,
		files: []file{{path: "/usr/bin/nvidia-modprobe", mode: 0o4755, body: script("/usr/bin/nvidia-modprobe", "nvidia-modprobe (setuid root)")}},
	})
	add(&pkgDef{
		name: "kernel-modules-nvidia-std-def", version: nvVer, release: "alt1." + code + ".1", disttag: "p11+388020.100.1.1",
		group: "System/Kernel and hardware", license: "NVIDIA", summary: "NVIDIA kernel modules for kernel-image-std-def " + kVersion,
		provides: []dep{{"kernel-modules-nvidia", fEqual, nvVer}},
		requires: []dep{
			{"kernel-image-std-def", fPrereq | fEqual, "2:" + kVersion + "-" + kRelease},
			{"nvidia_glx_" + nvVer, 0, ""},
		},
		files: []file{
			dir("/lib/modules/"+kver+"/nVidia", 0o755),
			{path: "/lib/modules/" + kver + "/nVidia/nvidia-modeset.ko", mode: 0o644, body: string(kmod{name: "nvidia_modeset", kver: kver, license: "NVIDIA", needs: []string{"nvidia_get_rm_ops"}}.elf())},
			{path: "/lib/modules/" + kver + "/nVidia/nvidia-uvm.ko", mode: 0o644, body: string(kmod{name: "nvidia_uvm", kver: kver, license: "NVIDIA", needs: []string{"nvidia_get_rm_ops"}}.elf())},
			{path: "/lib/modules/" + kver + "/nVidia/nvidia.ko", mode: 0o644, body: string(kmod{name: "nvidia", kver: kver, license: "NVIDIA", aliases: []string{"pci:v000010DEd*sv*sd*bc03sc*i*"}, exports: []string{"nvidia_get_rm_ops"}}.elf())},
		},
	})

	add(&pkgDef{
		name: "ca-certificates", version: "2025.02.25", release: "alt1", arch: "noarch", disttag: "p11+381122.100.1.1",
		group: "System/Base", license: "MPL-2.0", summary: "Trusted CA certificates (demo: an empty bundle)",
		files: []file{
			dir("/etc/pki", 0o755), dir("/etc/pki/tls", 0o755), dir("/etc/pki/tls/certs", 0o755),
			link("/etc/pki/tls/certs/ca-bundle.crt", "../../../../usr/share/ca-certificates/ca-bundle.crt"),
			dir("/usr/share/ca-certificates", 0o755),
			data("/usr/share/ca-certificates/ca-bundle.crt", "# NodeForge demo CA bundle: it trusts no certificate.\n"),
		},
	})
	add(&pkgDef{
		name: "tzdata", version: "2025b", release: "alt1", arch: "noarch", disttag: "sisyphus+377010.100.1.1",
		group: "System/Base", license: "Public domain", url: "https://www.iana.org/time-zones", summary: "Time zone data (UTC only in the demo)",
		files: []file{
			dir("/usr/share/zoneinfo", 0o755),
			data("/usr/share/zoneinfo/UTC", tzifUTC()),
			data("/usr/share/zoneinfo/zone1970.tab", "# demo zone table: UTC only\n"),
		},
	})
	add(&pkgDef{
		name: "talos-installer", version: "1.11.0", release: "alt1", src: "talos", disttag: "sisyphus+389001.100.1.1",
		group: "System/Configuration/Other", license: "MPL-2.0", url: "https://www.talos.dev/",
		summary: "Talos Linux installer and imager",
		// File dependencies on another dist's non-bin files: the index
		// keeps those paths in the noarch dist's stripped file lists.
		requires: []dep{
			{"/etc/pki/tls/certs/ca-bundle.crt", 0, ""},
			{"/usr/share/zoneinfo/UTC", 0, ""},
		},
		files: []file{
			exe("/usr/bin/imager", "the Talos imager"), exe("/usr/bin/installer", "the Talos installer"),
			dir("/usr/libexec/talos", 0o755),
			exe("/usr/libexec/talos/init", "the Talos init"), exe("/usr/libexec/talos/machined", "the Talos machined"),
		},
	})

	if real != nil {
		add(real.init())
		ps = real.withDebs(ps)
	}

	if len(c.errs) > 0 {
		return nil, fmt.Errorf("demo base definitions: %w", errors.Join(c.errs...))
	}
	// Build times: a fixed step per package unless set.
	for i, p := range ps {
		if p.built.IsZero() {
			p.built = buildEpoch.Add(time.Duration(i) * 10 * time.Minute)
		}
		for _, f := range p.files {
			if !strings.HasPrefix(f.path, "/") {
				return nil, fmt.Errorf("demo package %s: path %q is not absolute", p.name, f.path)
			}
		}
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].built.Before(ps[j].built) })
	return ps, nil
}

// tzifUTC is the real TZif (version 2) file for UTC.
func tzifUTC() string {
	block := func(b *bytes.Buffer, version byte) {
		b.WriteString("TZif")
		b.WriteByte(version)
		b.Write(make([]byte, 15))
		// isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
		for _, n := range []uint32{0, 0, 0, 0, 1, 4} {
			binary.Write(b, binary.BigEndian, n)
		}
		b.Write([]byte{0, 0, 0, 0, 0, 0}) // one type: offset 0, not DST, name index 0
		b.WriteString("UTC\x00")
	}
	var b bytes.Buffer
	block(&b, '2')
	block(&b, '2')
	b.WriteString("\nUTC0\n")
	return b.String()
}
