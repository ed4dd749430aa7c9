package compose

import (
	"fmt"
	"io"
	"strings"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/builder/kernel"
	"github.com/nodeforge/builder/builder/rootfs"
)

// maxLayerFile bounds one file of an extension layer read into memory.
const maxLayerFile = 4 << 30

// ExtensionFromLayer reads an extension image's layer (manifest.yaml
// beside rootfs/, as builds write it) back into an Extension: its files as
// on the node, owners as numbers (rootfs.NumericOwners maps them).
func ExtensionFromLayer(layer io.Reader) (*Extension, error) {
	return ExtensionFromLayerFeeding(layer, nil)
}

// ExtensionFromLayerFeeding is ExtensionFromLayer handing each file's
// node to onFile as it is read (rootfs.ReadTarFeeding).
func ExtensionFromLayerFeeding(layer io.Reader, onFile func(*rootfs.Node)) (*Extension, error) {
	img, err := rootfs.ReadTarFeeding(layer, maxLayerFile, onFile)
	if err != nil {
		return nil, err
	}
	mf := img.Get("/manifest.yaml")
	if mf == nil || mf.Kind != rootfs.KindFile {
		return nil, fmt.Errorf("extension layer without manifest.yaml")
	}
	man, problems := extensions.ParseManifest(mf.Data)
	if len(problems) > 0 {
		return nil, fmt.Errorf("extension layer: %s", strings.Join(problems, "; "))
	}
	e := &Extension{Name: man.Metadata.Name, Metadata: man.Metadata, Tree: rootfs.New()}
	for _, n := range img.Nodes() {
		rel, ok := strings.CutPrefix(n.Path, "/rootfs")
		switch {
		case !ok || (rel != "" && rel[0] != '/'):
			continue // manifest.yaml and the root
		case rel == "":
			root := e.Tree.Get("/")
			root.Mode, root.User, root.Group, root.Xattrs = n.Mode, n.User, n.Group, n.Xattrs
			continue
		}
		cp := *n
		cp.Path = rel
		if g, ok := strings.CutPrefix(cp.LinkGroup, "/rootfs"); ok {
			cp.LinkGroup = g
		}
		if err := e.Tree.Add(&cp); err != nil {
			return nil, fmt.Errorf("extension %s: %w", e.Name, err)
		}
		if cp.Kind == rootfs.KindFile && kernel.ModuleDirVersion(cp.Path) != "" && kernel.IsModule(cp.Path) {
			e.Modules = true
		}
	}
	return e, nil
}
