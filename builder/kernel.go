package builder

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nodeforge/builder/kernel"
	"github.com/nodeforge/builder/pkgbase/lock"
	"github.com/nodeforge/builder/rootfs"
	"github.com/nodeforge/builder/specs"
)

// kernelInfo is the kernel taken out of the tree.
type kernelInfo struct {
	Package     string   `json:"package"`
	Version     string   `json:"version"` // the modules directory name, e.g. 6.12.40-std-def-alt1
	VmlinuzPath string   `json:"vmlinuzPath"`
	Modules     int      `json:"modules"`
	BootModules []string `json:"bootModules"` // load order, paths under the modules dir
	Builtin     []string `json:"builtinBootModules,omitempty"`
	vmlinuz     []byte
	modDir      string            // "/lib/modules/<kver>"
	bootFiles   map[string][]byte // path under modDir -> bytes (modules and their indexes)
}

// moduleExts are the file names depmod treats as modules.
var moduleExts = []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"}

func isModule(p string) bool {
	for _, e := range moduleExts {
		if strings.HasSuffix(p, e) {
			return true
		}
	}
	return false
}

// takeKernel finds the kernel image package of the kernel component,
// removes /boot from the tree (the kernel ships as vmlinuz), trims the
// module set when the spec lists modules, regenerates the module indexes
// as depmod would, and collects the boot-critical modules.
func takeKernel(s *specs.Spec, a *lock.Arch, tree *rootfs.Tree) (*kernelInfo, error) {
	var kpkg *lock.Package
	for _, nevra := range componentPackages(s, a, "kernel") {
		for i := range a.Packages {
			p := &a.Packages[i]
			if p.NEVRA == nevra && strings.HasPrefix(p.Name, "kernel-image-") {
				if kpkg == nil || p.BuildTime > kpkg.BuildTime {
					kpkg = p
				}
			}
		}
	}
	if kpkg == nil {
		return nil, fmt.Errorf("no kernel-image-* package in the kernel component")
	}
	k := &kernelInfo{Package: kpkg.NEVRA}
	for _, n := range tree.Nodes() {
		if n.Kind == rootfs.KindFile && strings.HasPrefix(n.Path, "/boot/vmlinuz-") && n.Origin.Package == kpkg.NEVRA {
			k.VmlinuzPath, k.vmlinuz = n.Path, n.Data
			k.Version = strings.TrimPrefix(n.Path, "/boot/vmlinuz-")
		}
	}
	if k.vmlinuz == nil {
		return nil, fmt.Errorf("%s ships no /boot/vmlinuz-*", kpkg.NEVRA)
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

	files := map[string][]byte{}
	prefix := k.modDir + "/"
	for _, n := range tree.Nodes() {
		if n.Kind == rootfs.KindFile && strings.HasPrefix(n.Path, prefix) {
			files[strings.TrimPrefix(n.Path, prefix)] = n.Data
		}
	}
	// One depmod over the modules the package ships; a second only when
	// image.modules trims the set.
	idx, deps, err := depmod(k.Version, files)
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
			if isModule(rel) && !kept[rel] {
				tree.Remove(prefix + rel)
				delete(files, rel)
			}
		}
		if idx, deps, err = depmod(k.Version, files); err != nil {
			return nil, err
		}
	}
	for name, data := range idx {
		if err := tree.Replace(&rootfs.Node{Path: prefix + name, Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root", Data: data, Digest: digest(data), Origin: generated("depmod")}); err != nil {
			return nil, err
		}
	}
	for rel := range files {
		if isModule(rel) {
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
	k.bootFiles = map[string][]byte{}
	boot := map[string][]byte{}
	for _, rel := range k.BootModules {
		boot[rel] = files[rel]
		k.bootFiles[rel] = files[rel]
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
			k.bootFiles[name] = files[name]
		}
	}
	return k, nil
}

func modulesOnly(files map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for rel, b := range files {
		if isModule(rel) {
			out[rel] = b
		}
	}
	return out
}

// depmod writes the module indexes of the modules in files and returns
// them with modules.dep as a map.
func depmod(kver string, files map[string][]byte) (map[string][]byte, map[string][]string, error) {
	idx, err := kernel.Depmod(kernel.Input{KernelVersion: kver, Files: modulesOnly(files),
		Builtin: files["modules.builtin"], BuiltinModinfo: files["modules.builtin.modinfo"], Order: files["modules.order"]})
	if err != nil {
		return nil, nil, fmt.Errorf("depmod for %s: %w", kver, err)
	}
	deps, err := kernel.ParseModulesDep(idx["modules.dep"])
	if err != nil {
		return nil, nil, err
	}
	return idx, deps, nil
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

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
