package compose

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestSchematicLayer: the media of every schematic, the empty one too,
// carry the virtual extension schematic after the schematic's extensions,
// as the Image Factory's (image-factory internal/artifacts/schematic.go):
// version the ID, upstream's metadata, the schematic as extraInfo from
// Talos 1.7.0 on, and one empty file /usr/local/share/schematic/<ID>
// (0644, directories 0755, root). The real zstd, cpio and unsquashfs read
// the segment; each of its entries names a generator the report declares.
func TestSchematicLayer(t *testing.T) {
	cpioTool, unsq, zstd := testutil.NeedTool(t, "cpio"), testutil.NeedTool(t, "unsquashfs"), testutil.NeedTool(t, "zstd")
	zfs := &Extension{Name: "zfs", Metadata: extensions.Metadata{Name: "zfs", Version: "2.3.4"}, Tree: rootfs.New()}
	b := Boot{Arch: "x86_64", Vmlinuz: []byte("vmlinuz"), Initramfs: []byte("the release's initramfs"), KernelVersion: "6.1.0-57-amd64"}
	for _, c := range []struct {
		doc, version string
		layers       []string
		info         bool
	}{
		{"customization: {}\n", "1.11.0-demo", []string{"0.sqsh"}, true},
		{"customization: {systemExtensions: {officialExtensions: [siderolabs/zfs]}}\n", "v1.7.0", []string{"0.sqsh", "1.sqsh"}, true},
		{"customization: {systemExtensions: {officialExtensions: [zfs]}}\n", "", []string{"0.sqsh", "1.sqsh"}, true},
		{"customization: {systemExtensions: {officialExtensions: [zfs]}}\n", "1.6.7", []string{"0.sqsh", "1.sqsh"}, false},
	} {
		sch, err := schematic.Parse([]byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := sch.ID()
		o := Options{Schematic: sch, Platform: "metal", Squashfs: rootfs.SquashfsOptions{Compressor: "zstd"}, InitramfsCompression: "zstd",
			SourceDate: 1700000000, Work: t.TempDir(), Version: c.version}
		r, err := Media(context.Background(), b, []*Extension{zfs}, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Segment {
			if _, ok := SegmentGenerators[e.Origin.Generator]; !ok {
				t.Errorf("%s: %s: generator %q is not declared", c.doc, e.Name, e.Origin.Generator)
			}
		}
		dir := unpackSegment(t, zstd, cpioTool, r.Initramfs[len(b.Initramfs):], c.layers...)
		last := c.layers[len(c.layers)-1]
		if g := r.Segment[len(c.layers)-1].Origin.Generator; g != SchematicLayerName {
			t.Errorf("%s: %s made by %q", c.doc, last, g)
		}
		var doc ExtensionsYAML
		y, _ := os.ReadFile(filepath.Join(dir, "extensions.yaml"))
		if err := yaml.Unmarshal(y, &doc); err != nil || len(doc.Layers) != len(c.layers) {
			t.Fatalf("%s: extensions.yaml (%v):\n%s", c.doc, err, y)
		}
		got := doc.Layers[len(doc.Layers)-1]
		want := Layer{Image: last, Metadata: extensions.Metadata{Name: "schematic", Version: id, Author: "Image Factory",
			Description:   "Virtual extension which specifies the schematic of the image built with schematic.",
			Compatibility: extensions.Compatibility{Talos: extensions.VersionConstraint{Version: ">= 1.0.0"}}}}
		if c.info {
			canon, _ := sch.Canonical()
			want.Metadata.ExtraInfo = string(canon)
			back, err := schematic.Parse([]byte(got.Metadata.ExtraInfo))
			if backID, _ := back.ID(); err != nil || backID != id {
				t.Errorf("%s: extraInfo is not the schematic (%v)", c.doc, err)
			}
		}
		if got != want {
			t.Errorf("%s (%q): extensions.yaml:\n%s", c.doc, c.version, y)
		}
		out, err := exec.Command(unsq, "-lln", "-n", filepath.Join(dir, last)).CombinedOutput()
		if err != nil {
			t.Fatalf("unsquashfs -lln: %v\n%s", err, out)
		}
		var list []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l)
			list = append(list, f[0]+" "+f[1]+" "+f[len(f)-1])
			if f[0][0] == '-' {
				list = append(list, "size "+f[2])
			}
		}
		if !slices.Equal(list, []string{"drwxr-xr-x 0/0 squashfs-root", "drwxr-xr-x 0/0 squashfs-root/usr", "drwxr-xr-x 0/0 squashfs-root/usr/local",
			"drwxr-xr-x 0/0 squashfs-root/usr/local/share", "drwxr-xr-x 0/0 squashfs-root/usr/local/share/schematic",
			"-rw-r--r-- 0/0 squashfs-root/usr/local/share/schematic/" + id, "size 0"}) {
			t.Errorf("%s: schematic layer:\n%s", c.doc, out)
		}
	}
}
