package builder

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/kernel"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// kernelInfo is the kernel taken out of the tree: what the report says of
// it, and the bytes the initramfs and media need.
type kernelInfo struct {
	report.KernelInfo
	vmlinuz   []byte
	modDir    string            // "/lib/modules/<kver>"
	bootFiles map[string][]byte // path under modDir -> bytes (modules and their indexes)
}

// takeKernel finds the package of the kernel component that ships the
// kernel image, removes /boot and the image from the tree (the kernel
// ships as vmlinuz), trims the module set when the spec lists modules,
// regenerates the module indexes as depmod would, and collects the
// boot-critical modules.
func takeKernel(s *specs.Spec, a *lock.Arch, tree *rootfs.Tree) (*kernelInfo, error) {
	images := kernelImages(s, a, tree)
	kpkg, err := kernelPackage(s, a, images)
	if err != nil {
		return nil, err
	}
	k := &kernelInfo{KernelInfo: report.KernelInfo{Package: kpkg.NEVRA}}
	if err := k.setImage(images[kpkg.NEVRA]); err != nil {
		return nil, fmt.Errorf("%s: %w", kpkg.NEVRA, err)
	}
	for _, d := range []string{"/lib/modules/", "/usr/lib/modules/"} {
		if n := tree.Get(d + k.Version); n != nil && n.Kind == rootfs.KindDir {
			k.modDir = d + k.Version
		}
	}
	if k.modDir == "" {
		return nil, fmt.Errorf("%s: no modules directory for kernel %s", kpkg.NEVRA, k.Version)
	}
	tree.Remove("/boot")
	// Fedora's layout: the image beside the modules leaves the tree too.
	for _, imgs := range images {
		for _, im := range imgs {
			tree.Remove(im.Path)
		}
	}

	files := map[string][]byte{}
	prefix := k.modDir + "/"
	for _, n := range tree.Nodes() {
		if n.Kind == rootfs.KindFile && strings.HasPrefix(n.Path, prefix) {
			files[strings.TrimPrefix(n.Path, prefix)] = n.Data
		}
	}
	// One depmod over the modules the package ships; a second only when
	// image.modules trims the set.
	idx, deps, err := kernel.Indexes(k.Version, files)
	if err != nil {
		return nil, err
	}
	if len(s.Image.Modules) > 0 {
		keep, err := kernel.Closure(deps, s.Image.Modules)
		if err != nil {
			return nil, fmt.Errorf("image.modules: %w", err)
		}
		kept := set(keep)
		for rel := range files {
			if kernel.IsModule(rel) && !kept[rel] {
				tree.Remove(prefix + rel)
				delete(files, rel)
			}
		}
		if idx, deps, err = kernel.Indexes(k.Version, files); err != nil {
			return nil, err
		}
	}
	for name, data := range idx {
		if err := tree.Replace(&rootfs.Node{Path: prefix + name, Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root", Data: data, Digest: digest.SHA256Hex(data), Origin: generated("depmod")}); err != nil {
			return nil, err
		}
	}
	for rel := range files {
		if kernel.IsModule(rel) {
			k.Modules++
		}
	}

	// Boot modules: the wanted ones that are modules (built-in ones need
	// nothing), with everything they depend on, in load order.
	builtin := builtinNames(files["modules.builtin"])
	var want []string
	for _, m := range s.Image.BootModules {
		if builtin[kernel.ModuleName(m)] {
			k.Builtin = append(k.Builtin, m)
			continue
		}
		want = append(want, m)
	}
	if k.BootModules, err = kernel.Closure(deps, want); err != nil {
		return nil, fmt.Errorf("boot modules: %w", err)
	}
	// What the initramfs takes from the tree is copied: a package read
	// from the laid-package cache is one buffer, which a slice of it
	// would keep whole (the kernel's: the whole module tree) until the
	// build ends.
	k.bootFiles = map[string][]byte{}
	boot := map[string][]byte{}
	for _, rel := range k.BootModules {
		boot[rel] = files[rel]
		k.bootFiles[rel] = bytes.Clone(files[rel])
	}
	bidx, err := kernel.Depmod(kernel.Input{KernelVersion: k.Version, Files: boot, Builtin: files["modules.builtin"],
		BuiltinModinfo: files["modules.builtin.modinfo"], Order: files["modules.order"]})
	if err != nil {
		return nil, fmt.Errorf("depmod for the boot modules: %w", err)
	}
	for name, data := range bidx {
		k.bootFiles[name] = data
	}
	for _, name := range []string{"modules.builtin", "modules.builtin.modinfo", "modules.order"} {
		if files[name] != nil {
			k.bootFiles[name] = bytes.Clone(files[name])
		}
	}
	return k, nil
}

// kernelImages lists, per package of the kernel component, the kernel
// images it laid: /boot/vmlinuz-<version> (ALT, Debian), or
// /lib/modules/<version>/vmlinuz (Fedora's kernel-core, whose /boot copy is
// a %ghost; /usr/lib/modules too).
func kernelImages(s *specs.Spec, a *lock.Arch, tree *rootfs.Tree) map[string][]*rootfs.Node {
	inKernel := set(componentPackages(s, a, "kernel"))
	out := map[string][]*rootfs.Node{}
	for _, n := range tree.Nodes() {
		if _, ok := imageVersion(n.Path); ok && n.Kind == rootfs.KindFile && inKernel[n.Origin.Package] {
			out[n.Origin.Package] = append(out[n.Origin.Package], n)
		}
	}
	return out
}

// imageVersion is the kernel version a kernel image's path names.
func imageVersion(p string) (string, bool) {
	if v, ok := strings.CutPrefix(p, "/boot/vmlinuz-"); ok && v != "" && !strings.Contains(v, "/") {
		return v, true
	}
	for _, d := range []string{"/lib/modules/", "/usr/lib/modules/"} {
		if rest, ok := strings.CutPrefix(p, d); ok {
			if v, ok := strings.CutSuffix(rest, "/vmlinuz"); ok && v != "" && !strings.Contains(v, "/") {
				return v, true
			}
		}
	}
	return "", false
}

// kernelPackage picks the kernel package: image.kernel when the spec names
// it, else the one package of the component that ships an image (the
// newest build when several versions of it are locked).
func kernelPackage(s *specs.Spec, a *lock.Arch, images map[string][]*rootfs.Node) (*lock.Package, error) {
	var named, shipping []*lock.Package
	names := map[string]bool{}
	for _, nevra := range componentPackages(s, a, "kernel") {
		p := lockedNEVRA(a, nevra)
		if p == nil {
			continue
		}
		if p.Name == s.Image.Kernel {
			named = append(named, p)
		}
		if len(images[nevra]) > 0 {
			shipping = append(shipping, p)
			names[p.Name] = true
		}
	}
	switch {
	case s.Image.Kernel != "" && len(named) == 0:
		return nil, fmt.Errorf("image.kernel %s is not a package of the kernel component", s.Image.Kernel)
	case s.Image.Kernel != "":
		k := newest(named)
		if len(images[k.NEVRA]) == 0 {
			return nil, fmt.Errorf("image.kernel %s: %s ships no kernel image (/boot/vmlinuz-* or /lib/modules/*/vmlinuz)", s.Image.Kernel, k.NEVRA)
		}
		return k, nil
	case len(shipping) == 0:
		return nil, fmt.Errorf("no package of the kernel component ships a kernel image (/boot/vmlinuz-* or /lib/modules/*/vmlinuz)")
	case len(names) > 1:
		return nil, fmt.Errorf("the kernel component has several packages shipping a kernel image: %s; name one with image.kernel", strings.Join(slices.Sorted(maps.Keys(names)), " and "))
	}
	return newest(shipping), nil
}

// newest is the package built last (then the greatest NEVRA).
func newest(ps []*lock.Package) *lock.Package {
	var best *lock.Package
	for _, p := range ps {
		if best == nil || p.BuildTime > best.BuildTime || (p.BuildTime == best.BuildTime && p.NEVRA > best.NEVRA) {
			best = p
		}
	}
	return best
}

func lockedNEVRA(a *lock.Arch, nevra string) *lock.Package {
	for i := range a.Packages {
		if a.Packages[i].NEVRA == nevra {
			return &a.Packages[i]
		}
	}
	return nil
}

// setImage takes the kernel image from the chosen package's images (in
// path order, so a /boot copy is the one reported): one kernel version,
// its copies in /boot and beside the modules identical.
func (k *kernelInfo) setImage(imgs []*rootfs.Node) error {
	for _, n := range imgs {
		v, _ := imageVersion(n.Path)
		switch {
		case k.vmlinuz == nil:
			// A copy: see the boot modules.
			k.Version, k.VmlinuzPath, k.vmlinuz = v, n.Path, bytes.Clone(n.Data)
		case v != k.Version:
			return fmt.Errorf("ships kernel images of two versions: %s and %s", k.VmlinuzPath, n.Path)
		case !bytes.Equal(n.Data, k.vmlinuz):
			return fmt.Errorf("ships two different kernel images: %s and %s", k.VmlinuzPath, n.Path)
		}
	}
	return nil
}

// builtinNames reads modules.builtin ("kernel/fs/ext4/ext4.ko" lines) into
// module names.
func builtinNames(b []byte) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out[kernel.ModuleName(line)] = true
		}
	}
	return out
}
