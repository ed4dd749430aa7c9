package builder

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nodeforge/builder/extensions"
	"github.com/nodeforge/builder/rootfs"
	"github.com/nodeforge/builder/rootfs/sqfs"
	"github.com/nodeforge/builder/schematic"
)

// ExtensionsYAML is /extensions.yaml of the appended initramfs segment:
// the layers in mount order with their manifests' metadata.
type ExtensionsYAML struct {
	Layers []Layer `yaml:"layers"`
}

// Layer is one squashfs of the segment.
type Layer struct {
	Image    string              `yaml:"image"`
	Metadata extensions.Metadata `yaml:"metadata"`
}

// extensionSegment packs the named extensions for the initramfs: one
// squashfs per extension in name order (0.sqsh, 1.sqsh, ...), one more
// with the module indexes of the kernel's and the extensions' modules
// together when any extension ships modules, and /extensions.yaml listing
// them. It returns the compressed cpio to append to the initramfs and
// its entries (for the report).
func extensionSegment(exts []*extensionBuild, names []string, as *assembly, owners rootfs.Owners, sde int64,
	sq rootfs.SquashfsOptions, cache sqfs.BlockCache, compression string) ([]byte, []rootfs.CpioEntry, error) {
	byName := map[string]*extensionBuild{}
	var have []string
	for _, e := range exts {
		byName[e.name] = e
		have = append(have, e.name)
	}
	names = append([]string(nil), names...)
	sort.Strings(names)
	var doc ExtensionsYAML
	var entries []rootfs.CpioEntry
	modules := map[string][]byte{} // path under the modules dir -> bytes, kernel's and extensions'
	anyModules := false
	for i, name := range names {
		e := byName[name]
		if e == nil {
			return nil, nil, fmt.Errorf("schematic: extension %q is not built by this release (have %s)", name, strings.Join(have, ", "))
		}
		var b bytes.Buffer
		if err := e.tree.WriteSquashfsTo(&b, owners, sde, sq, cache); err != nil {
			return nil, nil, fmt.Errorf("extension %s: %w", name, err)
		}
		img := fmt.Sprintf("%d.sqsh", i)
		m, errs := extensions.ParseManifest(e.manifest)
		if len(errs) > 0 {
			return nil, nil, fmt.Errorf("extension %s: %s", name, strings.Join(errs, "; "))
		}
		doc.Layers = append(doc.Layers, Layer{Image: img, Metadata: m.Metadata})
		entries = append(entries, rootfs.CpioEntry{Name: img, Mode: 0o100444, Data: b.Bytes(), Origin: generated("extension-layer")})
		if e.report.Modules {
			anyModules = true
			for _, n := range e.tree.Nodes() {
				if rel, ok := strings.CutPrefix(n.Path, "/usr/lib/modules/"+as.kernel.Version+"/"); ok && n.Kind == rootfs.KindFile {
					modules[rel] = n.Data
				}
			}
		}
	}
	if anyModules {
		prefix := as.kernel.modDir + "/"
		for _, n := range as.tree.Nodes() {
			if rel, ok := strings.CutPrefix(n.Path, prefix); ok && n.Kind == rootfs.KindFile {
				if _, ext := modules[rel]; !ext {
					modules[rel] = n.Data
				}
			}
		}
		idx, _, err := depmod(as.kernel.Version, modules)
		if err != nil {
			return nil, nil, err
		}
		t := rootfs.New()
		for name, data := range idx {
			if err := t.Add(&rootfs.Node{Path: "/usr/lib/modules/" + as.kernel.Version + "/" + name, Kind: rootfs.KindFile, Mode: 0o644,
				User: "root", Group: "root", Data: data, Digest: digest(data), Origin: generated("depmod")}); err != nil {
				return nil, nil, err
			}
		}
		var b bytes.Buffer
		if err := t.WriteSquashfsTo(&b, owners, sde, sq, cache); err != nil {
			return nil, nil, fmt.Errorf("modules layer: %w", err)
		}
		img := fmt.Sprintf("%d.sqsh", len(names))
		doc.Layers = append(doc.Layers, Layer{Image: img, Metadata: extensions.Metadata{
			Name: "modules.dep", Version: as.kernel.Version, Description: "module indexes of the kernel's and the extensions' modules",
		}})
		entries = append(entries, rootfs.CpioEntry{Name: img, Mode: 0o100444, Data: b.Bytes(), Origin: generated("depmod")})
	}
	var y bytes.Buffer
	enc := yaml.NewEncoder(&y)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, nil, err
	}
	enc.Close()
	entries = append(entries, rootfs.CpioEntry{Name: "extensions.yaml", Mode: 0o100444, Data: y.Bytes(), Origin: generated("extensions.yaml")})
	size := 0
	for _, e := range entries {
		size += len(e.Data)
	}
	seg, err := compressInitramfs(compression, size, func(w io.Writer) error { return rootfs.WriteCpio(w, entries, sde) })
	if err != nil {
		return nil, nil, err
	}
	return seg, entries, nil
}

// mediaResult is what writeMedia wrote for one architecture.
type mediaResult struct {
	Schematic string
	Files     map[string]ArtifactInfo
	Layers    []FileEntry
}

// writeMedia writes the boot media of a schematic for one architecture
// into dir/<schematic id>/: kernel-<arch>, initramfs-<arch>.xz (the
// release's initramfs with the extensions' segment appended: the kernel
// unpacks concatenated cpio archives in order), cmdline-<arch> (the
// image's plus the schematic's kernel arguments) and ipxe-<arch>.
func writeMedia(dir string, sch *schematic.Schematic, arch string, exts []*extensionBuild, as *assembly, owners rootfs.Owners, sde int64,
	sq rootfs.SquashfsOptions, cache sqfs.BlockCache, compression string, initramfs []byte, cmdline []string) (*mediaResult, error) {
	id, err := sch.ID()
	if err != nil {
		return nil, err
	}
	seg, entries, err := extensionSegment(exts, sch.Extensions(), as, owners, sde, sq, cache, compression)
	if err != nil {
		return nil, err
	}
	d := filepath.Join(dir, id)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	args := append(append([]string(nil), cmdline...), sch.Customization.ExtraKernelArgs...)
	kernelName, initrdName := "kernel-"+arch, "initramfs-"+arch+".xz"
	ipxe := fmt.Sprintf("#!ipxe\nkernel %s %s\ninitrd %s\nboot\n", kernelName, strings.Join(args, " "), initrdName)
	files := []struct {
		name string
		data []byte
	}{
		{kernelName, as.kernel.vmlinuz},
		{initrdName, append(append(make([]byte, 0, len(initramfs)+len(seg)), initramfs...), seg...)},
		{"cmdline-" + arch, []byte(strings.Join(args, " ") + "\n")},
		{"ipxe-" + arch, []byte(ipxe)},
	}
	r := &mediaResult{Schematic: id, Files: map[string]ArtifactInfo{}}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(d, f.name), f.data, 0o644); err != nil {
			return nil, err
		}
		r.Files["media/"+id+"/"+f.name] = ArtifactInfo{SHA256: digest(f.data), Size: int64(len(f.data))}
	}
	for _, e := range entries {
		r.Layers = append(r.Layers, FileEntry{Path: "/" + e.Name, Type: "file", Mode: fmt.Sprintf("%04o", e.Mode&0o7777), Size: int64(len(e.Data)), SHA256: digest(e.Data), Origin: e.Origin})
	}
	return r, nil
}
