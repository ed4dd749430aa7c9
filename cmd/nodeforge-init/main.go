// Command nodeforge-init is the node's init: the /init of a Nodeforge
// initramfs. Built static (CGO_ENABLED=0, linux/amd64 or arm64), it runs as
// PID 1, brings the node up to its root file system, says what it is, and
// powers off. `make demo` packages it as the demo base's nodeforge-init RPM
// (and `make demo-boot` boots it); the boot tests (build/boot_test.go, via
// pkgbase/testbase) package it into their base as nodeforge-testinit.
// Run as "nodeforge-init hello" it prints one line and exits: the boot
// tests' container image runs it so.
// Every step prints one marker line, "nodeforge-init: [N/7] ...", so a
// person or a test sees how far the node got:
//
//  1. mounts devtmpfs on /dev, proc on /proc, sysfs on /sys, tmpfs on /run
//     and cgroup2 on /sys/fs/cgroup; prints the kernel command line
//     ("nodeforge-init: cmdline: ...") and the META values the boot media
//     pass in it, decoded as Talos's installer decodes
//     PREFIX.environment=INSTALLER_META_BASE64=... ("nodeforge-init: META
//     0xKEY=VALUE");
//  2. loads every module of /lib/modules/<kver>/modules.dep (the builder
//     puts exactly the boot modules and their dependencies there),
//     dependencies first (under module.sig_enforce=1 the kernel checks each
//     signature);
//  3. attaches /rootfs.sqsh to a read-only loop device and mounts it
//     (squashfs) on /sysroot/lower;
//  4. mounts the system extension layers /extensions.yaml lists (an
//     initramfs segment appended for a schematic), each from its own loop
//     device, and stacks them, the squashfs below them, under an overlay
//     with a tmpfs upper layer on /sysroot/root;
//  5. checks that the root is writable and the squashfs untouched; prints
//     "nodeforge-init: check NAME: CONTENT" for every file in the root's
//     /usr/local/share/nodeforge-boot-check/, the Secure Boot state and
//     PCR 11 when there is a TPM;
//  6. prints the banner: the release (the root's /etc/os-release), the
//     kernel, the platform (PREFIX.platform=), the schematic (when its ID is
//     in the initramfs), the extensions and the kernel arguments;
//     then hands over to what the extensions provide (handover.go: CRI's
//     containerd runs a container from the image disk, Btrfs's mkfs.btrfs
//     formats the scratch disk, each step a "[cri N/5]", "[btrfs N/4]"
//     marker line);
//  7. prints "NODEFORGE-BOOT-OK PRETTY_NAME=<value>" to /dev/console (or
//     "NODEFORGE-BOOT-FAIL <reason>" at the first step that fails) and
//     powers the machine off.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"
)

// The markers the boot test looks for on the serial console.
const (
	okMarker   = "NODEFORGE-BOOT-OK"
	failMarker = "NODEFORGE-BOOT-FAIL"
)

var console io.Writer = os.Stdout

func say(format string, args ...any) {
	fmt.Fprintf(console, format+"\n", args...)
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == helloArg {
		fmt.Println(helloLine())
		return
	}
	if err := boot(); err != nil {
		say("%s %v", failMarker, err)
	}
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		say("%s poweroff: %v", failMarker, err)
	}
	// Exiting PID 1 panics the kernel; with panic=-1 and qemu -no-reboot
	// that also ends the machine.
	os.Exit(1)
}

// steps is the number of steps boot reports ("[N/steps]").
const steps = 7

// step prints the marker line of step n.
func step(n int, format string, args ...any) {
	say("nodeforge-init: [%d/%d] "+format, append([]any{n, steps}, args...)...)
}

func boot() error {
	cmdline, err := mountAPI()
	if err != nil {
		return err
	}
	modDir, err := modulesDir()
	if err != nil {
		return err
	}
	loaded, err := loadModules(modDir)
	if err != nil {
		return err
	}
	step(2, "boot modules loaded from %s: %s", filepath.Base(modDir), strings.Join(loaded, " "))

	loopDev, err := attachLoop("/rootfs.sqsh")
	if err != nil {
		return err
	}
	if err := mount(loopDev, "/sysroot/lower", "squashfs", unix.MS_RDONLY, ""); err != nil {
		return err
	}
	step(3, "root file system /rootfs.sqsh on %s mounted read-only", loopDev)
	exts, err := stackRoot()
	if err != nil {
		return err
	}
	say("nodeforge-init: %s (squashfs) under a tmpfs overlay on /sysroot/root", loopDev)
	step(4, "root stacked: %d extension layer(s) under a tmpfs overlay on /sysroot/root", len(exts))
	if err := checkRoot(modDir); err != nil {
		return err
	}
	step(5, "root checked: writable overlay, read-only squashfs")

	osr, err := os.ReadFile("/sysroot/root/etc/os-release")
	if err != nil {
		return err
	}
	pretty, ok := osReleaseValue(osr, "PRETTY_NAME")
	if !ok {
		return errors.New("/etc/os-release has no PRETTY_NAME")
	}
	for _, l := range banner(osr, kernelRelease(), exts, cmdline) {
		say("%s", l)
	}
	step(6, "banner printed")
	if err := handOver(exts, modDir); err != nil {
		return err
	}
	step(7, "boot complete; powering off")
	say("%s PRETTY_NAME=%s", okMarker, pretty)
	return nil
}

// mountAPI mounts the kernel's file systems, opens the console and
// reports the command line (step 1), which it returns.
func mountAPI() (string, error) {
	for _, m := range []struct{ src, dst, fstype, data string }{
		{"devtmpfs", "/dev", "devtmpfs", "mode=0755"},
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
		{"tmpfs", "/run", "tmpfs", "mode=0755"},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", ""},
	} {
		if err := mount(m.src, m.dst, m.fstype, unix.MS_NOSUID, m.data); err != nil {
			return "", err
		}
	}
	if c, err := os.OpenFile("/dev/console", os.O_WRONLY|unix.O_NOCTTY, 0); err == nil {
		console = c
	}
	step(1, "mounted /dev, /proc, /sys, /run and /sys/fs/cgroup (cgroup2)")
	return reportCmdline("/proc/cmdline")
}

// stackRoot mounts the extension layers of /extensions.yaml and the
// overlay of the root on /sysroot/root; it returns the extensions.
func stackRoot() ([]extension, error) {
	if err := mount("tmpfs", "/sysroot/rw", "tmpfs", 0, "mode=0755"); err != nil {
		return nil, err
	}
	for _, d := range []string{"/sysroot/rw/upper", "/sysroot/rw/work"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	// Extension layers go above the root, the last listed on top
	// (overlayfs takes the leftmost lowerdir as the top one).
	lower := []string{"/sysroot/lower"}
	layers, err := readExtensions("/extensions.yaml")
	if err != nil {
		return nil, err
	}
	for i, l := range layers {
		dev, err := attachLoop("/" + l.Image)
		if err != nil {
			return nil, err
		}
		dst := fmt.Sprintf("/sysroot/ext/%d", i)
		if err := mount(dev, dst, "squashfs", unix.MS_RDONLY, ""); err != nil {
			return nil, err
		}
		lower = append([]string{dst}, lower...)
		say("nodeforge-init: extension layer %s on %s", l.Image, dev)
	}
	opts := "lowerdir=" + strings.Join(lower, ":") + ",upperdir=/sysroot/rw/upper,workdir=/sysroot/rw/work"
	if err := mount("overlay", "/sysroot/root", "overlay", 0, opts); err != nil {
		return nil, err
	}
	return layers, nil
}

// checkRoot proves the overlay takes writes and the squashfs below does
// not change, and reports what the root holds.
func checkRoot(modDir string) error {
	probe := "/etc/nodeforge-boot-probe"
	if err := os.WriteFile("/sysroot/root"+probe, []byte("written at boot\n"), 0o644); err != nil {
		return fmt.Errorf("overlay is not writable: %w", err)
	}
	if _, err := os.Stat("/sysroot/rw/upper" + probe); err != nil {
		return fmt.Errorf("overlay write did not land in the upper layer: %w", err)
	}
	if _, err := os.Stat("/sysroot/lower" + probe); err == nil {
		return errors.New("overlay write reached the squashfs")
	}
	if dep, err := os.ReadFile("/sysroot/root" + modDir + "/modules.dep"); err == nil {
		say("nodeforge-init: the root's modules.dep lists %d modules", bytes.Count(dep, []byte("\n")))
	} else {
		say("nodeforge-init: the root has no modules.dep: %v", err)
	}

	say("nodeforge-init: %s", secureBoot("/sysroot/root"+modDir))
	if pcr, err := os.ReadFile("/sys/class/tpm/tpm0/pcr-sha256/11"); err == nil {
		// What systemd-stub measured of the UKI, as the TPM holds it.
		say("nodeforge-init: PCR11 sha256 %s", strings.ToLower(strings.TrimSpace(string(pcr))))
	}

	checks, _ := filepath.Glob("/sysroot/root/usr/local/share/nodeforge-boot-check/*")
	for _, c := range checks {
		if b, err := os.ReadFile(c); err == nil {
			say("nodeforge-init: check %s: %s", filepath.Base(c), strings.TrimSpace(string(b)))
		}
	}
	return nil
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// secureBoot reports the firmware's SecureBoot variable: booted by UEFI,
// efivarfs (a module of the root's, Debian builds it so) is mounted and
// the variable's value byte read; "SecureBoot=1" is Secure Boot enforcing.
func secureBoot(rootModules string) string {
	if _, err := os.Stat("/sys/firmware/efi"); err != nil {
		return "not booted by UEFI"
	}
	// Loaded already, built in, or from the root (signed by the kernel's
	// vendor: accepted under module.sig_enforce and lockdown).
	_ = insmod(filepath.Join(rootModules, "kernel/fs/efivarfs/efivarfs.ko"))
	dir := "/sys/firmware/efi/efivars"
	if err := unix.Mount("efivarfs", dir, "efivarfs", unix.MS_NOSUID|unix.MS_NOEXEC|unix.MS_NODEV, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Sprintf("SecureBoot unknown: mount efivarfs: %v", err)
	}
	// 4 bytes of attributes, then the value.
	b, err := os.ReadFile(dir + "/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c")
	if err != nil || len(b) < 5 {
		return fmt.Sprintf("SecureBoot unknown: %v (%d bytes)", err, len(b))
	}
	return fmt.Sprintf("SecureBoot=%d", b[4])
}

// extension is one layer of /extensions.yaml (builder/compose's
// ExtensionsYAML): its image in the initramfs and its manifest's name and
// version.
type extension struct {
	Image    string `yaml:"image"`
	Metadata struct {
		Name    string `yaml:"name"`
		Version string `yaml:"version"`
	} `yaml:"metadata"`
}

// readExtensions reads the layers of extensions.yaml in mount order; no
// file means no extensions.
func readExtensions(p string) ([]extension, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		Layers []extension `yaml:"layers"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	for _, l := range doc.Layers {
		if l.Image == "" || strings.Contains(l.Image, "/") {
			return nil, fmt.Errorf("%s: layer image %q is not a file of the initramfs", p, l.Image)
		}
	}
	return doc.Layers, nil
}

// schematicLayer is the metadata name of the layer that carries the
// schematic's ID as its version (Talos's Image Factory adds such a
// "schematic" extension).
const schematicLayer = "schematic"

// banner is what the node says it is: the release from its os-release,
// the kernel, the schematic, the extensions and the kernel arguments.
func banner(osr []byte, kernel string, exts []extension, cmdline string) []string {
	val := func(key string) string {
		v, _ := osReleaseValue(osr, key)
		return v
	}
	release := val("PRETTY_NAME")
	if v := val("VERSION_ID"); v != "" {
		release += ", version " + v
	}
	schematic := "none named in the initramfs"
	var names []string
	for _, e := range exts {
		switch e.Metadata.Name {
		case schematicLayer:
			schematic = e.Metadata.Version
		case "modules.dep": // the builder's layer of module indexes
		default:
			names = append(names, strings.TrimSpace(e.Metadata.Name+" "+e.Metadata.Version))
		}
	}
	list := "none"
	if len(names) > 0 {
		list = strings.Join(names, ", ")
	}
	platform := "none given"
	for _, arg := range strings.Fields(cmdline) {
		if k, v, ok := strings.Cut(arg, "="); ok && strings.HasSuffix(k, ".platform") {
			platform = v + " (" + k + ")"
		}
	}
	rule := "nodeforge-init: " + strings.Repeat("=", 64)
	return []string{
		rule,
		"nodeforge-init:   release     " + release,
		"nodeforge-init:   kernel      " + kernel,
		"nodeforge-init:   platform    " + platform,
		"nodeforge-init:   schematic   " + schematic,
		"nodeforge-init:   extensions  " + list,
		"nodeforge-init:   kernel args " + cmdline,
		rule,
	}
}

func mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", src, fstype, dst, err)
	}
	return nil
}

// modulesDir is the one directory under /lib/modules.
func modulesDir() (string, error) {
	dirs, err := filepath.Glob("/lib/modules/*")
	if err != nil || len(dirs) != 1 {
		return "", fmt.Errorf("want one directory under /lib/modules, have %v", dirs)
	}
	return dirs[0], nil
}

// loadModules loads every module modules.dep lists, each after the
// modules it depends on (modprobe's order: a dependency list read
// backwards). It returns the module names in load order.
func loadModules(dir string) ([]string, error) {
	m, err := readModules(dir)
	if err != nil {
		return nil, err
	}
	if len(m.order) == 0 {
		return nil, errors.New("modules.dep lists no modules")
	}
	return m.load(m.order)
}

// modules are the indexes of a modules directory: modules.dep, and
// modules.softdep and modules.alias where the directory has them.
type modules struct {
	dir    string
	deps   map[string][]string // module path -> the paths it depends on
	order  []string            // paths in modules.dep's order
	byName map[string]string   // module name -> path
	pre    map[string][]string // module name -> softdep "pre:" names
	alias  [][2]string         // alias pattern, module name
}

// readModules reads dir's indexes.
func readModules(dir string) (*modules, error) {
	m := &modules{dir: dir, deps: map[string][]string{}, byName: map[string]string{}, pre: map[string][]string{}}
	err := eachLine(filepath.Join(dir, "modules.dep"), func(line string) {
		mod, rest, ok := strings.Cut(line, ":")
		if ok {
			m.deps[mod] = strings.Fields(rest)
			m.order = append(m.order, mod)
			m.byName[kmodName(mod)] = mod
		}
	})
	if err != nil {
		return nil, err
	}
	// "softdep MODULE pre: A B post: C": the pre modules load first.
	err = eachLine(filepath.Join(dir, "modules.softdep"), func(line string) {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "softdep" {
			return
		}
		pre := false
		for _, w := range f[2:] {
			switch {
			case w == "pre:":
				pre = true
			case strings.HasSuffix(w, ":"):
				pre = false
			case pre:
				m.pre[kmodName(f[1])] = append(m.pre[kmodName(f[1])], w)
			}
		}
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	err = eachLine(filepath.Join(dir, "modules.alias"), func(line string) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "alias" {
			m.alias = append(m.alias, [2]string{f[1], f[2]})
		}
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return m, nil
}

// eachLine calls fn with every line of the file p.
func eachLine(p string, fn func(string)) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fn(sc.Text())
	}
	return sc.Err()
}

// resolve is the path of the module a name or alias names ("" when none
// of the index's modules: built in, or not shipped).
func (m *modules) resolve(name string) string {
	if p, ok := m.byName[kmodName(name)]; ok {
		return p
	}
	for _, a := range m.alias {
		if ok, _ := path.Match(a[0], name); ok {
			if p, ok := m.byName[a[1]]; ok {
				return p
			}
		}
	}
	return ""
}

// load loads the modules mods (paths as modules.dep names them) and what
// they depend on, dependencies and softdep "pre:" modules first; it
// returns the names of the modules it loaded (or found loaded), in load
// order.
func (m *modules) load(mods []string) ([]string, error) {
	var loaded []string
	state := map[string]int{} // 1 loading, 2 done
	var load func(mod string) error
	load = func(mod string) error {
		switch state[mod] {
		case 1:
			return fmt.Errorf("dependency cycle through %s", mod)
		case 2:
			return nil
		}
		state[mod] = 1
		var before []string
		for _, name := range m.pre[kmodName(mod)] {
			if p := m.resolve(name); p != "" {
				before = append(before, p)
			}
		}
		d := m.deps[mod]
		for i := len(d) - 1; i >= 0; i-- {
			before = append(before, d[i])
		}
		for _, b := range before {
			if err := load(b); err != nil {
				return err
			}
		}
		if err := insmod(filepath.Join(m.dir, mod)); err != nil {
			return err
		}
		state[mod] = 2
		loaded = append(loaded, moduleName(mod))
		return nil
	}
	for _, mod := range mods {
		if err := load(mod); err != nil {
			return loaded, err
		}
	}
	return loaded, nil
}

// kmodName is the kernel's name of a module (its file name's, or a
// name's, dashes as underscores).
func kmodName(p string) string {
	if strings.Contains(filepath.Base(p), ".ko") {
		p = moduleName(p)
	}
	return strings.ReplaceAll(p, "-", "_")
}

func moduleName(p string) string {
	b := filepath.Base(p)
	return b[:strings.Index(b, ".ko")]
}

// insmod loads one module file. Compressed modules go to the kernel as they
// are when it can decompress them (MODULE_INIT_COMPRESSED_FILE, Linux
// 6.2+), else decompressed here. A module already loaded is fine.
func insmod(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("module %s: %w", path, err)
	}
	defer unix.Close(fd)
	compressed := !strings.HasSuffix(path, ".ko")
	flags := 0
	if compressed {
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	err = unix.FinitModule(fd, "", flags)
	if compressed && (err == unix.EINVAL || err == unix.EOPNOTSUPP || err == unix.ENOSYS) {
		var image []byte
		if image, err = decompress(path); err != nil {
			return fmt.Errorf("module %s: %w", path, err)
		}
		err = unix.InitModule(image, "")
	}
	if err != nil && err != unix.EEXIST {
		return fmt.Errorf("load module %s: %w", path, err)
	}
	return nil
}

func decompress(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader
	switch {
	case strings.HasSuffix(path, ".xz"):
		r, err = xz.NewReader(f)
	case strings.HasSuffix(path, ".zst"):
		var d *zstd.Decoder
		if d, err = zstd.NewReader(f); err == nil {
			defer d.Close()
			r = d
		}
	case strings.HasSuffix(path, ".gz"):
		r, err = gzip.NewReader(f)
	default:
		err = errors.New("unknown compression")
	}
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// attachLoop puts file on a free loop device, read-only, and returns the
// device's path.
func attachLoop(file string) (string, error) {
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(ctl)
	n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return "", fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
	}
	dev := fmt.Sprintf("/dev/loop%d", n)
	if _, err := os.Stat(dev); errors.Is(err, os.ErrNotExist) {
		// devtmpfs normally has it already.
		if err := unix.Mknod(dev, unix.S_IFBLK|0o600, int(unix.Mkdev(7, uint32(n)))); err != nil {
			return "", err
		}
	}
	// The descriptors stay open: the mount holds the device anyway.
	lfd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	ffd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	info := unix.LoopInfo64{Flags: unix.LO_FLAGS_READ_ONLY}
	copy(info.File_name[:], file)
	err = unix.IoctlLoopConfigure(lfd, &unix.LoopConfig{Fd: uint32(ffd), Info: info})
	if err == unix.EINVAL || err == unix.ENOTTY {
		// Before Linux 5.8: LOOP_SET_FD, then the status.
		if err = unix.IoctlSetInt(lfd, unix.LOOP_SET_FD, ffd); err == nil {
			err = unix.IoctlLoopSetStatus64(lfd, &info)
		}
	}
	if err != nil {
		return "", fmt.Errorf("attach %s to %s: %w", file, dev, err)
	}
	return dev, nil
}

// osReleaseValue reads one KEY=value of os-release(5), unquoted.
func osReleaseValue(b []byte, key string) (string, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || k != key {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			q := v[0]
			v = v[1 : len(v)-1]
			if q == '"' {
				var out strings.Builder
				for i := 0; i < len(v); i++ {
					if v[i] == '\\' && i+1 < len(v) {
						i++
					}
					out.WriteByte(v[i])
				}
				v = out.String()
			}
		}
		return v, true
	}
	return "", false
}

// reportCmdline prints the kernel command line and the META values of its
// PREFIX.environment=INSTALLER_META_BASE64= arguments; it returns the line.
func reportCmdline(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	line := strings.TrimSpace(string(b))
	say("nodeforge-init: cmdline: %s", line)
	for _, arg := range strings.Fields(line) {
		k, v, _ := strings.Cut(arg, "=")
		enc, ok := strings.CutPrefix(v, "INSTALLER_META_BASE64=")
		if !strings.HasSuffix(k, ".environment") || !ok {
			continue
		}
		values, err := metaValues(enc)
		if err != nil {
			return "", fmt.Errorf("%s: %w", k, err)
		}
		for _, mv := range values {
			say("nodeforge-init: META %s", mv)
		}
	}
	return line, nil
}

// metaValues decodes INSTALLER_META_BASE64: base64 of "0xKEY=VALUE;..."
// gzipped when long.
func metaValues(enc string) ([]string, error) {
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, err
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	return strings.Split(string(raw), ";"), nil
}
