package compose

import (
	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// The media of a schematic carry its ID as the Image Factory's do: a
// virtual extension of that name whose version is the ID, and whose one
// file, empty, is named by it (image-factory
// internal/artifacts/schematic.go). Upstream's factory adds it to every
// output but the kernel and the command line, for every schematic (the
// empty one too), after the schematic's extensions; Talos's imager puts
// the embedded configuration's after it.
const (
	SchematicLayerName = "schematic"
	SchematicDir       = "/usr/local/share/schematic"
)

// schematicInfoSince is the first Talos version whose layer carries the
// schematic itself as extraInfo (upstream: quirks.SupportsOverlay, the
// overlay installer reads it there).
var schematicInfoSince = [3]int{1, 7, 0}

// schematicLayer is the virtual extension of sch for a release of
// version: SchematicDir/<ID>, empty, 0644 root, in directories 0755 root
// as upstream's tar writes them; its metadata upstream's (the author
// without the factory's URL, which upstream appends since Talos 1.13's
// factory: the media do not depend on where the factory is reached, and
// builder image makes the same bytes), extraInfo the schematic as its ID
// is taken from for 1.7.0 and later.
func schematicLayer(sch *schematic.Schematic, version string) (*Extension, error) {
	id, err := sch.ID()
	if err != nil {
		return nil, err
	}
	t := rootfs.New()
	origin := report.Origin{Generator: SchematicLayerName}
	for _, d := range []string{"/usr", "/usr/local", "/usr/local/share", SchematicDir} {
		if err := t.Add(&rootfs.Node{Path: d, Kind: rootfs.KindDir, Mode: 0o755, User: "root", Group: "root", Origin: origin}); err != nil {
			return nil, err
		}
	}
	if err := t.Add(&rootfs.Node{Path: SchematicDir + "/" + id, Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root",
		Data: []byte{}, Digest: digest.SHA256Hex(nil), Origin: origin}); err != nil {
		return nil, err
	}
	meta := extensions.Metadata{
		Name:    SchematicLayerName,
		Version: id,
		Author:  "Image Factory",
		// Upstream's text (its constant for the factory's name is the
		// extension's since Talos 1.13's factory).
		Description:   "Virtual extension which specifies the schematic of the image built with schematic.",
		Compatibility: extensions.Compatibility{Talos: extensions.VersionConstraint{Version: ">= 1.0.0"}},
	}
	if versionAtLeast(version, schematicInfoSince) {
		info, err := sch.Canonical()
		if err != nil {
			return nil, err
		}
		meta.ExtraInfo = string(info)
	}
	return &Extension{Name: SchematicLayerName, Tree: t, Generator: SchematicLayerName, Metadata: meta}, nil
}
