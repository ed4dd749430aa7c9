package builder

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/rootfs"
)

// initFile reads the spec's init binary from its locked package.
func initFile(s *specs.Spec, a *lock.Arch, paths map[string]string, lc *rootfs.LayCache) ([]byte, string, error) {
	return lockedFile(s.Image.Init, "image.init", a, paths, lc)
}

// lockedFile reads an executable file of a locked package.
func lockedFile(ref specs.FileRef, what string, a *lock.Arch, paths map[string]string, lc *rootfs.LayCache) ([]byte, string, error) {
	return lockedData(ref, what, true, a, paths, lc)
}

// lockedData is lockedFile for files that need not be executable (an
// EFI stub is data to the builder).
func lockedData(ref specs.FileRef, what string, executable bool, a *lock.Arch, paths map[string]string, lc *rootfs.LayCache) ([]byte, string, error) {
	p := lockedByName(a, ref.Package)
	if p == nil {
		return nil, "", fmt.Errorf("%s: package %s is not in the lock", what, ref.Package)
	}
	t := rootfs.New()
	if _, err := t.AddRPMCached(paths[p.NEVRA], report.Origin{Package: p.NEVRA, RPMSHA256: p.SHA256}, rootfs.LayOptions{}, lc); err != nil {
		return nil, "", err
	}
	n := t.Get(ref.Path)
	if n == nil || n.Kind != rootfs.KindFile {
		return nil, "", fmt.Errorf("%s: %s does not ship %s as a file", what, p.NEVRA, ref.Path)
	}
	if executable && n.Mode&0o111 == 0 {
		return nil, "", fmt.Errorf("%s: %s in %s is not executable", what, ref.Path, p.NEVRA)
	}
	return n.Data, p.NEVRA, nil
}

// initramfsEntries lays out the initramfs: /init, the boot modules with
// their indexes under lib/modules/<kver>/, and rootfs.sqsh.
func initramfsEntries(initData []byte, initPkg string, k *kernelInfo, sqsh []byte) []rootfs.CpioEntry {
	dirs := map[string]bool{}
	var es []rootfs.CpioEntry
	addDirs := func(p string) {
		for d := path.Dir(p); d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	es = append(es, rootfs.CpioEntry{Name: "init", Mode: 0o100755, Data: initData, Origin: report.Origin{Package: initPkg}})
	// The kernel opens /dev/console for init's standard streams before
	// anything can mount devtmpfs; do not rely on the kernel's built-in
	// initramfs to have it.
	es = append(es, rootfs.CpioEntry{Name: "dev", Mode: 0o040755, Origin: report.Origin{Generator: "initramfs"}},
		rootfs.CpioEntry{Name: "dev/console", Mode: 0o020600, Rdev: 5<<8 | 1, Origin: report.Origin{Generator: "initramfs"}})
	modDir := strings.TrimPrefix(k.modDir, "/")
	for _, rel := range slices.Sorted(maps.Keys(k.bootFiles)) {
		name := modDir + "/" + rel
		addDirs(name)
		es = append(es, rootfs.CpioEntry{Name: name, Mode: 0o100644, Data: k.bootFiles[rel]})
	}
	for d := range dirs {
		es = append(es, rootfs.CpioEntry{Name: d, Mode: 0o040755})
	}
	es = append(es, rootfs.CpioEntry{Name: "rootfs.sqsh", Mode: 0o100444, Data: sqsh, Origin: report.Origin{Generator: "rootfs.sqsh"}})
	for i := range es {
		if es[i].Origin == (report.Origin{}) {
			es[i].Origin = report.Origin{Generator: "initramfs"}
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return es
}
