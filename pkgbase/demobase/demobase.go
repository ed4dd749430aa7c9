// Package demobase writes a small, signed ALT-style package base: two
// apt-rpm dists (x86_64 and noarch, component classic) of about thirty
// packages whose names and dependency shapes mirror what a node OS draws
// from an ALT branch, the demo public key, and a release spec for it. It
// lets the builder be tried, and tested end to end, without a mirror.
//
// The output is byte-identical on every run: fixed build times, file
// mtimes and signature times, a committed demo key, and deterministic
// compression; neither the clock, the time zone, the umask nor the user
// changes a byte or a mode.
package demobase

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nodeforge/builder/pkgbase/debext"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// Layout of the written base, relative to its directory.
const (
	SpecFile  = "spec.yaml"
	KeyFile   = "keys/demo.asc"
	RepoDir   = "alt"
	Component = "classic"
)

// Arch is the one architecture of the demo base (besides noarch).
const Arch = "x86_64"

// Dists are the dist directories under RepoDir.
var Dists = []string{Arch, "noarch"}

// Packages returns the number of packages Write writes.
func Packages() (int, error) {
	ps, err := packages(nil)
	if err != nil {
		return 0, err
	}
	return len(ps), nil
}

// Write writes the demo base into dir (created if missing): alt/<dist>/
// with RPMS.classic/ and base/, keys/demo.asc and spec.yaml. Existing
// files of the same names are replaced; nothing else in dir is touched.
func Write(dir string) error { return WriteUpdated(dir) }

// Update is a newer version of one demo package, for a second base that
// differs from the first by an update (tests of builder diff).
type Update struct {
	Name, Version, Release string
	// Note is the new version's changelog entry; the old version's entry
	// stays below it.
	Note string
}

// WriteUpdated writes the demo base with the updates applied: each named
// package replaced by its newer version, built a week later.
func WriteUpdated(dir string, updates ...Update) error {
	ps, err := packages(nil)
	if err != nil {
		return err
	}
	for _, u := range updates {
		i := slices.IndexFunc(ps, func(p *pkgDef) bool { return p.name == u.Name })
		if i < 0 {
			return fmt.Errorf("demo base: no package %s to update", u.Name)
		}
		p := *ps[i]
		p.history = append([]change{{p.built, p.evr(), p.note}}, p.history...)
		p.version, p.release, p.note = u.Version, u.Release, u.Note
		p.built = p.built.Add(7 * 24 * time.Hour)
		ps[i] = &p
	}
	return writeBase(dir, ps, nil)
}

// writeBase writes the packages, their indexes, the key and the spec
// (bootable when real is set).
func writeBase(dir string, ps []*pkgDef, real *realParts) error {
	key, err := Key()
	if err != nil {
		return err
	}
	fp, err := Fingerprint()
	if err != nil {
		return err
	}
	w := &writer{root: dir}

	byDist := map[string][]string{}
	var required []string
	for _, p := range ps {
		rpm, err := buildRPM(p, key, p.built)
		if err != nil {
			return err
		}
		rel := filepath.Join(RepoDir, p.arch, "RPMS."+Component, p.fileName())
		if err := w.file(rel, rpm); err != nil {
			return err
		}
		byDist[p.arch] = append(byDist[p.arch], filepath.Join(dir, rel))
		for _, r := range p.requires {
			if strings.HasPrefix(r.name, "/") {
				required = append(required, r.name)
			}
		}
	}
	sort.Strings(required)
	for _, dist := range Dists {
		if len(byDist[dist]) == 0 {
			return fmt.Errorf("demo base: no packages for dist %s", dist)
		}
		err := repo.WriteALTDist(repo.ALTDist{
			Dir:           filepath.Join(dir, RepoDir, dist),
			Components:    map[string][]string{Component: byDist[dist]},
			Archs:         []string{Arch, "noarch"},
			Origin:        "NodeForge demo",
			Label:         "demo",
			Suite:         "p11",
			Date:          releaseDate,
			Signer:        key,
			RequiredPaths: required,
		})
		if err != nil {
			return fmt.Errorf("demo base: %w", err)
		}
		w.dirs = append(w.dirs, filepath.Join(RepoDir, dist, "base"))
	}

	pub, err := armoredPublic(key)
	if err != nil {
		return err
	}
	if err := w.file(KeyFile, pub); err != nil {
		return err
	}
	if err := w.file(SpecFile, specYAML(fp, real)); err != nil {
		return err
	}
	if real != nil && len(real.ext) > 0 {
		for _, d := range debext.Definitions() {
			if err := w.file(filepath.Join(ExtensionsDir, d.File), []byte(d.YAML)); err != nil {
				return err
			}
		}
	}
	return w.finish()
}

// writer writes files with fixed modes and times, so neither the umask nor
// the clock shows in the result.
type writer struct {
	root string
	dirs []string // relative directories written to
	top  []string // files written into root itself
}

func (w *writer) file(rel string, data []byte) error {
	name := filepath.Join(w.root, rel)
	if filepath.Dir(rel) == "." {
		w.top = append(w.top, rel)
	}
	if err := w.mkdir(filepath.Dir(rel)); err != nil {
		return err
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return fmt.Errorf("demo base: %w", err)
	}
	// WriteFile leaves the mode of an existing file and applies the umask.
	if err := os.Chmod(name, 0o644); err != nil {
		return fmt.Errorf("demo base: %w", err)
	}
	return nil
}

func (w *writer) mkdir(rel string) error {
	if rel == "." {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(w.root, rel), 0o755); err != nil {
		return fmt.Errorf("demo base: %w", err)
	}
	w.dirs = append(w.dirs, rel)
	return nil
}

// finish fixes the mode of every directory written and the mtime of every
// file and directory, deepest first (creating an entry touches its parent).
func (w *writer) finish() error {
	seen := map[string]bool{}
	var all []string
	for _, d := range w.dirs {
		for ; d != "." && d != string(filepath.Separator) && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			all = append(all, d)
		}
	}
	var files []string
	for _, d := range all {
		ents, err := os.ReadDir(filepath.Join(w.root, d))
		if err != nil {
			return fmt.Errorf("demo base: %w", err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				files = append(files, filepath.Join(d, e.Name()))
			}
		}
	}
	files = append(files, w.top...)
	for _, f := range files {
		if err := os.Chtimes(filepath.Join(w.root, f), releaseDate, releaseDate); err != nil {
			return fmt.Errorf("demo base: %w", err)
		}
	}
	// Deepest first.
	sort.Slice(all, func(i, j int) bool {
		if a, b := strings.Count(all[i], string(filepath.Separator)), strings.Count(all[j], string(filepath.Separator)); a != b {
			return a > b
		}
		return all[i] < all[j]
	})
	for _, d := range all {
		p := filepath.Join(w.root, d)
		if err := os.Chmod(p, 0o755); err != nil {
			return fmt.Errorf("demo base: %w", err)
		}
		if err := os.Chtimes(p, releaseDate, releaseDate); err != nil {
			return fmt.Errorf("demo base: %w", err)
		}
	}
	return nil
}

// specYAML is the release spec of the demo base. Its paths are relative to
// the spec's directory, so the base can be moved or copied anywhere.
func specYAML(fingerprint string, real *realParts) []byte {
	var b bytes.Buffer
	what := "every package is a small stand-in signed by the demo key."
	installer := "talos-installer, systemd-boot-efi"
	if real != nil {
		what = "its packages are small stand-ins signed by the demo key, except\n" +
			"# the kernel (Debian's " + real.kernelDeb + "), systemd-boot (Debian's\n" +
			"# " + real.bootDeb + ") and the node init (nodeforge-init): the media boot."
		installer += ", " + InitPackage
	}
	// The root's libc and the cri and btrfs packages: the stand-ins, or
	// Debian's (the extensions' packages from their definitions) with the
	// libraries they load in the root.
	rootLibs, criPkgs, btrfsPkgs := "      - glibc-core\n", "\n    packages: [containerd, runc, cni-plugins]", "\n    packages: [btrfs-progs]"
	if real != nil && len(real.ext) > 0 {
		what = "its packages are small stand-ins signed by the demo key, except\n" +
			"# the kernel (Debian's " + real.kernelDeb + "), systemd-boot (Debian's\n" +
			"# " + real.bootDeb + "), the node init (nodeforge-init), and Debian's\n" +
			"# packages of the cri and btrfs extensions (containerd, runc,\n" +
			"# containernetworking-plugins, btrfs-progs) with the libraries they load\n" +
			"# in the root: the media boot, run a container and mount btrfs."
		// The filesystem's directories too: containerd and ctr write
		// below /tmp and /var.
		rootLibs, criPkgs, btrfsPkgs = "      - filesystem\n", "", ""
		for _, l := range debext.LibDebs {
			rootLibs += "      - " + l + "\n"
		}
	}
	fmt.Fprintf(&b, `# Release spec for the NodeForge demo package base, written by
# "builder demo-base". The base mirrors the shape of an ALT p11 branch:
# same repository layout, component and package names as the shipped p11
# spec, but %s
# The demo key is DEMO ONLY, PUBLIC BY DESIGN: trust it for nothing else.
name: demo
branch: p11
version: 1.11.0-demo
architectures: [%s]

# Image Factory clients name the extensions altlinux/NAME (listed), and
# siderolabs/NAME or NAME (accepted): Talos clients ask for siderolabs/.
extensions-namespace: altlinux
extension-aliases: [siderolabs]

repositories:
  - name: demo
    url: %s
    format: alt
    dists: ["{arch}", noarch]
    components: [%s]
    keyring: [%s]
    fingerprints: [%s]

# Several kernels may be installed side by side (ALT's rule).
multiversion: ['^kernel-(image|modules)-.*']

components:
  kernel:
    kind: kernel
    packages: [kernel-image-std-def]
  rootfs:
    kind: rootfs
    packages:
%s      - kmod
      - iptables
      - ca-certificates
      - tzdata
  installer:
    kind: installer
    packages: [%s]
  cri:
    kind: extension%s
  zfs:
    kind: extension
    packages: [kernel-modules-zfs-std-def, zfs-utils]
  btrfs:
    kind: extension%s
  nvidia:
    kind: extension
    packages: [kernel-modules-nvidia-std-def, nvidia-modprobe]

# Where builder release publishes. Without a registry each channel is a
# local OCI image layout beside this file (release/dev, release/prod); set
# registry: HOST[:PORT]/PREFIX to publish to one. The keys are yours to
# make: COSIGN_PASSWORD=... builder keys generate --out keys/dev
channels:
  dev:
    key: keys/dev/cosign.key
  prod:
    key: keys/prod/cosign.key
`, what, Arch, RepoDir, Component, KeyFile, fingerprint, rootLibs, installer, criPkgs, btrfsPkgs)
	if real != nil {
		fmt.Fprintf(&b, `
# The node boots its init from the initramfs (nodeforge-init, which prints
# a banner and powers off), with its console on the serial port.
image:
  cmdline: [%s]
  init:
    package: %s
    path: %s
`, strings.Join(bootCmdline, ", "), InitPackage, InitPath)
	}
	if real != nil && len(real.ext) > 0 {
		fmt.Fprintf(&b, `
# The cri and btrfs extensions are Debian's packages, placed where the
# extension contract allows by the definitions in %s/ (they replace the
# shipped ones of the same names).
extensions-dir: %s

# A container image of the node init, published with the release as
# images/%s: the init runs it from the cri extension when the node has it
# as a disk (make demo-boot exports it from the release and attaches it).
images:
  %s:
    packages: [%s]
    entrypoint: [%s, hello]
`, ExtensionsDir, ExtensionsDir, ImageName, ImageName, InitPackage, InitPath)
	}
	return b.Bytes()
}
