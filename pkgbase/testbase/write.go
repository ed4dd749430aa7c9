package testbase

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nodeforge/builder/pkgbase/debpkg"
)

// write builds the base into dir: repo/ (RPMs and repodata) and
// testbase.json, written last. Per architecture: the kernel, the init and
// systemd-boot; once: the filesystem and the extension's package.
func write(dir, key string, opts Options) error {
	start := time.Now()
	for _, tool := range []string{"dpkg-deb", "rpmbuild", "createrepo_c"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("testbase: %s is needed: %w", tool, err)
		}
	}
	stage, err := os.MkdirTemp(dir, ".stage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	rpms := filepath.Join(dir, RepoDir, "RPMS")
	if err := os.MkdirAll(rpms, 0o755); err != nil {
		return err
	}
	info := &Info{Key: key, RPMs: map[string]int64{}, Kernels: map[string]KernelInfo{}}
	var specs []rpmSpec
	var sde int64
	for i, in := range opts.inputs {
		ki, arch, err := archSpecs(in, stage, opts)
		if err != nil {
			return err
		}
		if i == 0 {
			// Everything is dated by the first kernel's build.
			info.KernelInfo, sde, info.InitSHA256 = ki.KernelInfo, ki.sde, in.initSum
		}
		info.Kernels[in.arch.RPM] = ki.KernelInfo
		specs = append(specs, arch...)
	}

	// (c) The root's skeleton.
	froot := filepath.Join(stage, "filesystem")
	ffiles, err := writeFilesystem(froot)
	if err != nil {
		return err
	}
	fspec := rpmSpec{
		Name: FilesystemPackage, Version: "1", Release: "1", Arch: "noarch", License: "Public Domain",
		Summary:     "Directory skeleton of the nodeforge boot test's root",
		Description: "The directories of a node root, root's account and a host name.",
		Root:        froot, Files: ffiles,
	}

	// (d) A system extension's package: one file the init prints when the
	// extension's layer is stacked on the root.
	xroot := filepath.Join(stage, "testext")
	xfile := path.Join(ExtCheckDir, "testext")
	if err := os.MkdirAll(filepath.Join(xroot, ExtCheckDir), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(xroot, xfile), []byte(ExtCheckContent+"\n"), 0o644); err != nil {
		return err
	}
	xspec := rpmSpec{
		Name: ExtPackage, Version: "1", Release: "1", Arch: "noarch", License: "Public Domain",
		Summary:     "A system extension of the nodeforge boot test",
		Description: "One file below /usr/local, which the boot test's init prints when the extension layer is mounted.",
		Root:        xroot,
		Files:       []string{"%dir " + ExtCheckDir, xfile},
	}

	specs = append(specs, fspec, xspec)
	if opts.Extensions {
		es, err := extSpecs(opts.extDebs, stage)
		if err != nil {
			return err
		}
		specs = append(specs, es...)
		if err := writeHelloImage(filepath.Join(dir, HelloImage), opts.inputs, sde); err != nil {
			return err
		}
	}
	if opts.Images {
		is, err := imageSpecs(opts.imageDebs, stage)
		if err != nil {
			return err
		}
		specs = append(specs, is...)
	}
	if err := buildRPMs(stage, rpms, specs, sde, info, opts); err != nil {
		return err
	}
	// Signed as a distribution signs: the packages, then the index.
	sig, err := newSigner(sde)
	if err != nil {
		return err
	}
	defer sig.close()
	if err := signRPMs(sig, rpms, sde, info); err != nil {
		return err
	}
	cmd := exec.Command("createrepo_c", "--quiet", "--no-database", "--revision", fmt.Sprint(sde), "--set-timestamp-to-revision", filepath.Join(dir, RepoDir))
	cmd.Env = toolEnv(stage, sde)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testbase: createrepo_c: %v\n%s", err, b)
	}
	if err := sig.signFile(filepath.Join(dir, RepoDir, "repodata", "repomd.xml")); err != nil {
		return err
	}
	if err := sig.exportKey(filepath.Join(dir, KeyFile)); err != nil {
		return err
	}
	info.Fingerprint = sig.fingerprint

	info.PrettyName = fmt.Sprintf("Nodeforge boot test (Debian kernel %s, %s)", info.KernelVersion, info.DebVersion)
	info.BuildSeconds = time.Since(start).Round(time.Millisecond).Seconds()
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, InfoFile), append(b, '\n'), 0o644)
}

// signRPMs signs every package of the repository and records the
// signed files' sizes, dated sde again (createrepo_c records mtimes).
func signRPMs(sig *signer, rpms string, sde int64, info *Info) error {
	files, _ := filepath.Glob(filepath.Join(rpms, "*.rpm"))
	sort.Strings(files)
	if err := sig.signRPMs(files); err != nil {
		return err
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return err
		}
		info.RPMs[filepath.Base(f)] = fi.Size()
		if err := os.Chtimes(f, time.Unix(sde, 0), time.Unix(sde, 0)); err != nil {
			return err
		}
	}
	return nil
}

// archKernel is what archSpecs learnt of an architecture's kernel.
type archKernel struct {
	KernelInfo
	sde int64 // the kernel's build time
}

// archSpecs prepares the packages of one architecture: (a) the kernel,
// vmlinuz and the chosen module trees; (b) the init; (e) the EFI boot
// manager, Debian's systemd-boot-efi with its EFI binaries only.
func archSpecs(in archInput, stage string, opts Options) (*archKernel, []rpmSpec, error) {
	a := in.arch.RPM
	st, err := os.Stat(in.kernelDeb)
	if err != nil {
		return nil, nil, err
	}
	ki := &archKernel{KernelInfo: KernelInfo{KernelDeb: filepath.Base(in.kernelDeb), DebSize: st.Size()}}
	if ki.DebPackage, err = debpkg.Field(in.kernelDeb, "Package"); err != nil {
		return nil, nil, err
	}
	if ki.DebVersion, err = debpkg.Field(in.kernelDeb, "Version"); err != nil {
		return nil, nil, err
	}
	kspec, err := kernelSpec(in.kernelDeb, a, filepath.Join(stage, "kernel-"+a), ki, opts)
	if err != nil {
		return nil, nil, err
	}
	iroot := filepath.Join(stage, "init-"+a)
	if err := os.MkdirAll(filepath.Join(iroot, path.Dir(InitPath)), 0o755); err != nil {
		return nil, nil, err
	}
	if err := copyFile(in.initBin, filepath.Join(iroot, InitPath), 0o755); err != nil {
		return nil, nil, err
	}
	ispec := rpmSpec{
		Name: InitPackage, Version: "1", Release: "1", Arch: a, License: "Apache-2.0",
		Summary:     "Static init of the nodeforge boot test",
		Description: "cmd/nodeforge-init, the node init: loads the boot modules, mounts rootfs.sqsh under a tmpfs overlay, prints a marker and powers off.",
		Root:        iroot,
		Files:       []string{"%dir " + path.Dir(InitPath), InitPath},
	}
	bspec, err := bootSpec(in.bootDeb, a, filepath.Join(stage, "systemd-boot-"+a))
	if err != nil {
		return nil, nil, err
	}
	return ki, []rpmSpec{kspec, ispec, bspec}, nil
}

// kernelSpec extracts the kernel package into kroot and describes its RPM;
// the kernel's build time dates the whole base.
func kernelSpec(deb, arch, kroot string, info *archKernel, opts Options) (rpmSpec, error) {
	opts.Log("testbase: extracting %s (%s %s)", filepath.Base(deb), info.DebPackage, info.DebVersion)
	kver, vmlinuzTime, err := debpkg.ExtractKernel(deb, kroot, kernelTrees(arch, opts))
	if err != nil {
		return rpmSpec{}, err
	}
	info.KernelVersion = kver
	// Everything is dated by the kernel's build: SOURCE_DATE_EPOCH, hence
	// the RPMs' build times and the lock's, come from the input.
	info.sde = vmlinuzTime.Unix()
	modDir := filepath.Join(kroot, "lib", "modules", kver)
	filepath.Walk(modDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.Contains(filepath.Base(p), ".ko") {
			info.Modules = append(info.Modules, debpkg.ModuleName(filepath.Base(p)))
		}
		return nil
	})
	sort.Strings(info.Modules)
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, line := range strings.Fields(string(b)) {
			info.Builtin = append(info.Builtin, debpkg.ModuleName(path.Base(line)))
		}
	}
	sort.Strings(info.Builtin)
	upVer, rel := debpkg.RPMVersion(info.DebVersion)
	kspec := rpmSpec{
		Name: KernelPackage, Version: upVer, Release: rel, Arch: arch, License: "GPL-2.0-only",
		Summary:     fmt.Sprintf("Debian's %s %s, wrapped for the nodeforge boot test", info.DebPackage, info.DebVersion),
		Description: fmt.Sprintf("vmlinuz and the module trees %s of Debian's %s %s (kernel %s).", strings.Join(kernelTrees(arch, opts), ", "), info.DebPackage, info.DebVersion, kver),
		Root:        kroot,
		Provides:    []string{fmt.Sprintf("kernel = %s-%s", upVer, rel)},
		Files:       []string{"/boot/vmlinuz-" + kver, "/lib/modules/" + kver},
	}
	return kspec, nil
}

// kernelTrees are the module trees of an architecture's kernel RPM: the
// options', and with the extensions on aarch64 the arm64 library modules
// (xor-neon, which btrfs's xor loads; x86_64 builds its xor in).
func kernelTrees(arch string, opts Options) []string {
	if opts.Extensions && arch == "aarch64" {
		return append(slices.Clone(opts.ModuleTrees), "kernel/arch/arm64/lib")
	}
	return opts.ModuleTrees
}

// buildRPMs builds the RPMs into the repository directory, dated sde.
func buildRPMs(stage, rpms string, specs []rpmSpec, sde int64, info *Info, opts Options) error {
	for _, s := range specs {
		t0 := time.Now()
		payload := opts.Payload
		if s.Payload != "" {
			payload = s.Payload
		}
		out, err := rpmbuild(stage, s, sde, payload)
		if err != nil {
			return err
		}
		dst := filepath.Join(rpms, filepath.Base(out))
		if err := os.Rename(out, dst); err != nil {
			return err
		}
		fi, err := os.Stat(dst)
		if err != nil {
			return err
		}
		info.RPMs[filepath.Base(dst)] = fi.Size()
		// createrepo_c records the file's mtime: pin it for stable repodata.
		if err := os.Chtimes(dst, time.Unix(sde, 0), time.Unix(sde, 0)); err != nil {
			return err
		}
		opts.Log("testbase: %s: %.1f MB in %s", filepath.Base(dst), float64(fi.Size())/1e6, time.Since(t0).Round(time.Millisecond))
		os.RemoveAll(s.Root) // frees the disk early
	}
	return nil
}

// bootSpec extracts Debian's systemd-boot-efi into broot, EFI binaries
// only, and describes its RPM.
func bootSpec(bootDeb, arch, broot string) (rpmSpec, error) {
	if err := debpkg.Extract(bootDeb, broot); err != nil {
		return rpmSpec{}, err
	}
	if err := os.RemoveAll(filepath.Join(broot, "usr", "share")); err != nil {
		return rpmSpec{}, err
	}
	bver, err := debpkg.Field(bootDeb, "Version")
	if err != nil {
		return rpmSpec{}, err
	}
	bv, br := debpkg.RPMVersion(bver)
	bspec := rpmSpec{
		Name: BootPackage, Version: bv, Release: br, Arch: arch, License: "LGPL-2.1-or-later",
		Summary:     "Debian's systemd-boot EFI binaries, wrapped for the nodeforge boot media test",
		Description: "systemd-boot and the EFI stubs of Debian's systemd-boot-efi " + bver + ".",
		Root:        broot,
		Files:       []string{path.Dir(BootPath)},
	}
	return bspec, nil
}

// writeFilesystem lays the root's skeleton and returns its %files lines.
func writeFilesystem(root string) ([]string, error) {
	dirs := []struct {
		path string
		mode uint32
	}{
		{"/dev", 0o755}, {"/etc", 0o755}, {"/home", 0o755}, {"/lib", 0o755}, {"/lib/modules", 0o755},
		{"/mnt", 0o755}, {"/proc", 0o555}, {"/root", 0o700}, {"/run", 0o755}, {"/sys", 0o555},
		{"/tmp", 0o1777}, {"/usr", 0o755}, {"/usr/bin", 0o755}, {"/usr/lib", 0o755},
		{"/usr/libexec", 0o755}, {"/usr/sbin", 0o755}, {"/usr/share", 0o755},
		{"/var", 0o755}, {"/var/lib", 0o755}, {"/var/log", 0o755}, {"/var/tmp", 0o1777},
	}
	files := []struct {
		path, data string
	}{
		{"/etc/hostname", "nodeforge-boottest\n"},
		{"/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"},
		{"/etc/group", "root:x:0:\n"},
	}
	links := []struct{ path, target string }{{"/bin", "usr/bin"}, {"/sbin", "usr/sbin"}}
	var lines []string
	for _, d := range dirs {
		p := filepath.Join(root, d.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
		mode := os.FileMode(d.mode & 0o777)
		if d.mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		if err := os.Chmod(p, mode); err != nil {
			return nil, err
		}
		lines = append(lines, fmt.Sprintf("%%dir %%attr(%04o,root,root) %s", d.mode, d.path))
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(root, f.path), []byte(f.data), 0o644); err != nil {
			return nil, err
		}
		lines = append(lines, "%config(noreplace) %attr(0644,root,root) "+f.path)
	}
	for _, l := range links {
		if err := os.Symlink(l.target, filepath.Join(root, l.path)); err != nil {
			return nil, err
		}
		lines = append(lines, l.path)
	}
	sort.Strings(lines)
	return lines, nil
}

// rpmSpec is one package for rpmbuild, laid out in Root.
type rpmSpec struct {
	Name, Version, Release, Arch, License string
	Summary, Description                  string
	Root                                  string
	Provides                              []string
	Requires                              []string // written as they are (AutoReqProv stays off)
	Files                                 []string // %files lines
	Payload                               string   // rpmbuild's _binary_payload, when not the base's
}

// specTemplate builds a binary-only package from a prepared tree without
// touching its bytes: no strip, no debuginfo, no build-id links, no
// brp-* scripts, no automatic dependencies.
const specTemplate = `%%define debug_package %%{nil}
%%define __strip /bin/true
%%define __objdump /bin/true
%%define __os_install_post %%{nil}
%%define __arch_install_post %%{nil}
%%define __spec_install_post %%{nil}
%%define _build_id_links none
%%define _binary_payload %s
Name: %s
Version: %s
Release: %s
Summary: %s
License: %s
%s
AutoReqProv: no
%s
%%description
%s

%%install
mkdir -p %%{buildroot}
cp -a %s/. %%{buildroot}/

%%files
%%defattr(-,root,root,-)
%s
`

// rpmbuild builds one package reproducibly and returns the .rpm's path.
func rpmbuild(stage string, s rpmSpec, sde int64, payload string) (string, error) {
	var prov strings.Builder
	for _, p := range s.Provides {
		fmt.Fprintf(&prov, "Provides: %s\n", p)
	}
	for _, r := range s.Requires {
		fmt.Fprintf(&prov, "Requires: %s\n", r)
	}
	// %install runs under sh: quote the tree's path.
	root := "'" + strings.ReplaceAll(s.Root, "'", `'\''`) + "'"
	// An architecture's package is built for it by --target alone:
	// BuildArch names the build host's compatible architectures, and
	// packaging an aarch64 tree on x86_64 is what this does.
	buildArch := ""
	if s.Arch == "noarch" {
		buildArch = "BuildArch: noarch"
	}
	spec := fmt.Sprintf(specTemplate, payload, s.Name, s.Version, s.Release, s.Summary, s.License, buildArch,
		prov.String(), s.Description, root, strings.Join(s.Files, "\n"))
	top := filepath.Join(stage, "rpmbuild-"+s.Name)
	specPath := filepath.Join(stage, s.Name+".spec")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		return "", err
	}
	args := []string{"-bb", "--quiet", "--nodeps",
		"--define", "_topdir " + top,
		"--define", "_tmppath " + filepath.Join(top, "tmp"),
		"--define", "use_source_date_epoch_as_buildtime 1",
		"--define", "clamp_mtime_to_source_date_epoch 1",
		"--define", "_buildhost repro",
	}
	if s.Arch != "noarch" {
		args = append(args, "--target", s.Arch)
	}
	if err := os.MkdirAll(filepath.Join(top, "tmp"), 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("rpmbuild", append(args, specPath)...)
	cmd.Env = toolEnv(stage, sde)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testbase: rpmbuild %s: %v\n%s", s.Name, err, b)
	}
	out, _ := filepath.Glob(filepath.Join(top, "RPMS", s.Arch, s.Name+"-*.rpm"))
	if len(out) != 1 {
		return "", fmt.Errorf("testbase: rpmbuild %s left %v", s.Name, out)
	}
	return out[0], nil
}

// toolEnv is a clean environment for rpmbuild and createrepo_c: no user
// macros (HOME is the stage), C locale, UTC, the pinned date.
func toolEnv(home string, sde int64) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C", "TZ=UTC",
		"SOURCE_DATE_EPOCH=" + strconv.FormatInt(sde, 10)}
}

// specYAML is the release spec of the base. Boot modules the kernel has
// built in are left out (the builder would skip them anyway).
func specYAML(info *Info, opts Options) ([]byte, error) {
	has := func(list []string, name string) bool {
		i := sort.SearchStrings(list, name)
		return i < len(list) && list[i] == name
	}
	// A boot module is listed when some kernel has it as a module; each
	// kernel must have it built in or as a module.
	var boot []string
	for _, m := range opts.BootModules {
		n, module := debpkg.ModuleName(m), false
		for _, a := range slices.Sorted(maps.Keys(info.Kernels)) {
			k := info.Kernels[a]
			switch {
			case has(k.Builtin, n):
			case has(k.Modules, n):
				module = true
			default:
				return nil, fmt.Errorf("testbase: boot module %s is neither built into %s nor in the kernel RPM", m, k.KernelVersion)
			}
		}
		if module {
			boot = append(boot, m)
		}
	}
	list := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	rootPkgs, extra := []string{FilesystemPackage}, ""
	if opts.Extensions {
		libs, comps := extComponents()
		rootPkgs, extra = append(rootPkgs, libs...), comps
	}
	return []byte(fmt.Sprintf(`# Release spec of the boot test base, written by pkgbase/testbase from
# Debian's %s %s (%s). Test use only: signed by a key made for the base.
name: boottest
branch: boottest
version: 0.1.0
architectures: %s

repositories:
  - name: testbase
    url: %s
    format: rpm-md
    keyring: [%s]
    fingerprints: [%s]

components:
  kernel:
    kind: kernel
    packages: [%s]
  rootfs:
    kind: rootfs
    packages: [%s]
  installer:
    kind: installer
    packages: [%s, %s]
  # A system extension (definition in extensions/testext.yaml).
  testext:
    kind: extension
%s
extensions-dir: extensions

image:
  os:
    id: nodeforge
    name: Nodeforge
    pretty-name: %s
  cmdline: %s
  init:
    package: %s
    path: %s
  # The installer image carries a binary of the base: the init stands in.
  installer:
    package: %s
    path: %s
  bootloader:
    package: %s
    path: %s
  boot-modules: %s
  initramfs-compression: %s
`, info.DebPackage, info.DebVersion, info.KernelDeb, list(opts.Arches), RepoDir, KeyFile, info.Fingerprint, KernelPackage, strings.Join(rootPkgs, ", "), InitPackage, BootPackage,
		extra, strconv.Quote(info.PrettyName), list(opts.Cmdline), InitPackage, InitPath, InitPackage, InitPath, BootPackage, BootPath, list(boot), opts.InitramfsCompression)), nil
}
