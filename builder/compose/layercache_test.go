package compose

import (
	"bytes"
	"context"
	"testing"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// mapLayers is a LayerCache in memory that counts the images written.
type mapLayers struct {
	kept   map[[32]byte][]byte
	writes int
}

func (m *mapLayers) Layer(key [32]byte, build func() ([]byte, error)) ([]byte, error) {
	if b, ok := m.kept[key]; ok {
		return b, nil
	}
	b, err := build()
	if err != nil {
		return nil, err
	}
	m.writes++
	m.kept[key] = b
	return b, nil
}

// TestLayerCache: with a LayerCache, a second schematic sharing an
// extension takes its squashfs from the cache (no second write), and the
// segment is the bytes composed without one; an extension without a Key
// and the schematic's virtual layer are never kept; another compression
// level is another key; an extension read lazily (Load) is read only when
// its squashfs is not kept.
func TestLayerCache(t *testing.T) {
	tree := rootfs.New()
	data := bytes.Repeat([]byte("containerd "), 50000)
	for _, p := range []string{"/usr/local/bin/containerd", "/usr/local/bin/ctr"} {
		if err := tree.Add(&rootfs.Node{Path: p, Kind: rootfs.KindFile, Mode: 0o755, User: "0", Group: "0", Data: data, Digest: digest.SHA256Hex(data)}); err != nil {
			t.Fatal(err)
		}
	}
	cri := &Extension{Name: "cri", Metadata: extensions.Metadata{Name: "cri", Version: "2.0"}, Tree: tree, Key: "sha256:cri"}
	b := Boot{Arch: "x86_64", Vmlinuz: []byte("vmlinuz"), Initramfs: []byte("the release's initramfs"), KernelVersion: "6.1.0-57-amd64"}
	media := func(doc string, layers LayerCache, level int, exts ...*Extension) []byte {
		t.Helper()
		sch, err := schematic.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Schematic: sch, Platform: "metal", Squashfs: rootfs.SquashfsOptions{Compressor: "zstd", Level: level}, InitramfsCompression: "zstd",
			SourceDate: 1700000000, Work: t.TempDir(), Version: "1.11.0", Layers: layers, Owners: rootfs.NumericOwners(tree)}
		r, err := Media(context.Background(), b, exts, o)
		if err != nil {
			t.Fatal(err)
		}
		return r.Initramfs
	}
	first := "customization: {extraKernelArgs: [a=1], systemExtensions: {officialExtensions: [cri]}}\n"
	second := "customization: {extraKernelArgs: [a=2], systemExtensions: {officialExtensions: [cri]}}\n"
	c := &mapLayers{kept: map[[32]byte][]byte{}}
	media(first, c, 0, cri)
	got := media(second, c, 0, cri)
	if c.writes != 1 || len(c.kept) != 1 {
		t.Fatalf("two schematics sharing cri: %d writes, %d kept; want 1 and 1", c.writes, len(c.kept))
	}
	want := media(second, nil, 0, cri)
	if !bytes.Equal(got, want) {
		t.Error("the initramfs composed with the cache differs from the one composed without")
	}
	media(second, c, 3, cri)
	if c.writes != 2 {
		t.Errorf("another squashfs level: %d writes, want 2", c.writes)
	}
	loads := 0
	lazy := &Extension{Name: "cri", Metadata: cri.Metadata, Key: cri.Key, Load: func() (*rootfs.Tree, error) { loads++; return tree, nil }}
	if got := media(second, c, 0, lazy); !bytes.Equal(got, want) || loads != 0 {
		t.Errorf("an extension kept in the cache: read %d times (want 0), same bytes: %v", loads, bytes.Equal(got, want))
	}
	lazy.Key = "sha256:cri2"
	if got := media(second, c, 0, lazy); !bytes.Equal(got, want) || loads != 1 {
		t.Errorf("an extension not kept: read %d times (want 1), same bytes: %v", loads, bytes.Equal(got, want))
	}
	writes, kept := c.writes, len(c.kept)
	anon := *cri
	anon.Key = ""
	media(first, c, 0, &anon)
	if c.writes != writes || len(c.kept) != kept {
		t.Errorf("an extension without a key: %d writes, %d kept; want it written outside the cache", c.writes-writes, len(c.kept)-kept)
	}
}
