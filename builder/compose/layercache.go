package compose

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/builder/kernel"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// LayerCache keeps the squashfs images of the initramfs segment's layers
// between compositions. Many schematics share an extension, and writing
// its squashfs (compressed at the release's level) is the dearest part of
// a new schematic's media; with the images kept, a schematic pays only
// for what it does not share. The Image Factory keeps one.
type LayerCache interface {
	// Layer returns the image kept under key, or makes it with build,
	// keeps it and returns it.
	Layer(key [32]byte, build func() ([]byte, error)) ([]byte, error)
}

// layerImage is an extension's squashfs for the segment: from o.Layers
// when the extension has a Key, else written.
func (o Options) layerImage(e *Extension) ([]byte, error) {
	build := func() ([]byte, error) {
		t, err := e.tree()
		if err != nil {
			return nil, err
		}
		return t.SquashfsBytes(o.Owners, o.SourceDate, o.Squashfs, o.Cache)
	}
	data, err := o.cached(build, "extension", e.Key)
	if err != nil {
		return nil, fmt.Errorf("extension %s: %w", e.Name, err)
	}
	return data, nil
}

// tree is the extension's files: Tree, read by Load the first time when
// nil.
func (e *Extension) tree() (*rootfs.Tree, error) {
	if e.Tree == nil && e.Load != nil {
		t, err := e.Load()
		if err != nil {
			return nil, err
		}
		e.Tree = t
	}
	if e.Tree == nil {
		return nil, fmt.Errorf("extension %s: no files", e.Name)
	}
	return e.Tree, nil
}

// modulesImage is the segment's squashfs of module indexes: those of the
// kernel's modules (b.Modules) and the modules of exts together. It is
// kept in o.Layers when the boot assets and every one of exts have a Key.
func (o Options) modulesImage(b Boot, exts []*Extension) ([]byte, error) {
	build := func() ([]byte, error) {
		t, err := moduleIndexTree(b, exts)
		if err != nil {
			return nil, err
		}
		return t.SquashfsBytes(o.Owners, o.SourceDate, o.Squashfs, o.Cache)
	}
	var keys []string
	for _, e := range exts {
		keys = append(keys, e.Key)
	}
	slices.Sort(keys)
	if b.Key == "" || slices.Contains(keys, "") {
		return o.cached(build, "modules")
	}
	return o.cached(build, "modules", append([]string{b.Key, b.KernelVersion}, keys...)...)
}

// cached makes an image with build, through o.Layers when there is one
// and ids name the content (none, or an empty first id: not cached). The key adds
// what else decides the bytes: the squashfs options and the source date
// (the owners are the release's numeric ones, a tree's the same whatever
// else is composed with it).
func (o Options) cached(build func() ([]byte, error), kind string, ids ...string) ([]byte, error) {
	if o.Layers == nil || len(ids) == 0 || ids[0] == "" {
		return build()
	}
	sq := o.Squashfs
	parts := append([]string{kind, sq.Compressor, strconv.Itoa(sq.Level), strconv.Itoa(sq.BlockSize), sq.Tool,
		strconv.FormatInt(o.SourceDate, 10)}, ids...)
	return o.Layers.Layer(sha256.Sum256([]byte(strings.Join(parts, "\x00"))), build)
}

// moduleIndexTree is the tree of the module indexes (depmod's) of the
// kernel's modules and those exts ship, theirs replacing the kernel's of
// the same path.
func moduleIndexTree(b Boot, exts []*Extension) (*rootfs.Tree, error) {
	modules := map[string][]byte{} // path under the modules dir -> bytes
	for _, e := range exts {
		t, err := e.tree()
		if err != nil {
			return nil, fmt.Errorf("extension %s: %w", e.Name, err)
		}
		for _, n := range t.Nodes() {
			if rel, ok := strings.CutPrefix(n.Path, "/usr/lib/modules/"+b.KernelVersion+"/"); ok && n.Kind == rootfs.KindFile {
				modules[rel] = n.Data
			}
		}
	}
	kmods, err := b.Modules()
	if err != nil {
		return nil, err
	}
	for rel, data := range kmods {
		if _, ext := modules[rel]; !ext {
			modules[rel] = data
		}
	}
	idx, _, err := kernel.Indexes(b.KernelVersion, modules)
	if err != nil {
		return nil, err
	}
	t := rootfs.New()
	for name, data := range idx {
		if err := t.Add(&rootfs.Node{Path: "/usr/lib/modules/" + b.KernelVersion + "/" + name, Kind: rootfs.KindFile, Mode: 0o644,
			User: "root", Group: "root", Data: data, Digest: digest.SHA256Hex(data), Origin: report.Origin{Generator: "depmod"}}); err != nil {
			return nil, err
		}
	}
	return t, nil
}
