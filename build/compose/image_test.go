package compose

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/nodeforge/builder/build/media/fat"
	"github.com/nodeforge/builder/build/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// installerTar writes an installer layer as builds do.
func installerTar(t *testing.T, initramfs []byte, extra ...*rootfs.Node) []byte {
	t.Helper()
	tr := rootfs.New()
	for _, n := range append([]*rootfs.Node{
		{Path: "/usr/install/x86_64/vmlinuz", Data: []byte("kernel")},
		{Path: "/usr/install/x86_64/initramfs.xz", Data: initramfs},
		{Path: "/usr/bin/installer", Data: []byte("ELF"), Mode: 0o755},
	}, extra...) {
		n.Kind, n.User, n.Group, n.Digest = rootfs.KindFile, "root", "root", digest.SHA256Hex(n.Data)
		if n.Mode == 0 {
			n.Mode = 0o644
		}
		if err := tr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := tr.WriteTar(&b, rootfs.NumericOwners(tr), 1700000000); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSchematicInstaller: the schematic's installer layer is the tar a
// build writes with that initramfs (and the platform's command line), byte
// for byte; the release's own initramfs gives the release's layer back.
func TestSchematicInstaller(t *testing.T) {
	base := installerTar(t, []byte("release initramfs"))
	same, err := SchematicInstaller(base, "x86_64", []byte("release initramfs"), nil, nil, 1700000000)
	if err != nil || !bytes.Equal(same, base) {
		t.Fatalf("round trip: %v, equal %t", err, bytes.Equal(same, base))
	}
	got, err := SchematicInstaller(base, "x86_64", []byte("schematic initramfs"), []byte("console=ttyS0\n"), nil, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	want := installerTar(t, []byte("schematic initramfs"), &rootfs.Node{Path: "/usr/install/x86_64/cmdline", Data: []byte("console=ttyS0\n")})
	if !bytes.Equal(got, want) {
		t.Error("the schematic's installer differs from the layer a build writes")
	}
	esp := []fat.File{{Path: "EFI/BOOT/BOOTX64.EFI", Data: []byte("signed boot")}, {Path: "EFI/Linux/nodeforge.efi", Data: []byte("signed UKI")}}
	withBoot := installerTar(t, []byte("release initramfs"), &rootfs.Node{Path: "/usr/install/x86_64/" + BootloaderName, Data: []byte("boot")})
	sb, err := SchematicInstaller(withBoot, "x86_64", []byte("schematic initramfs"), nil, esp, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	want = installerTar(t, nil)
	wantTree, _ := rootfs.ReadTar(bytes.NewReader(want), 1<<20)
	for _, p := range []string{"/usr/install/x86_64/vmlinuz", "/usr/install/x86_64/initramfs.xz"} {
		wantTree.Remove(p)
	}
	for _, f := range esp {
		wantTree.Add(&rootfs.Node{Path: "/usr/install/x86_64/esp/" + f.Path, Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root", Data: f.Data, Digest: digest.SHA256Hex(f.Data)})
	}
	var wb bytes.Buffer
	if err := wantTree.WriteTar(&wb, rootfs.NumericOwners(wantTree), 1700000000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sb, wb.Bytes()) {
		t.Error("the Secure Boot installer is not the installer with the signed ESP in place of the unsigned boot code")
	}
	if _, err := SchematicInstaller(base, "aarch64", nil, nil, nil, 1); err == nil {
		t.Error("an installer without the architecture's initramfs was accepted")
	}
	if _, err := SchematicInstaller([]byte("not a tar at all, but long enough to be read as one...."), "x86_64", nil, nil, nil, 1); err == nil {
		t.Error("a layer that is not a tar was accepted")
	}
}

// TestImageIndex: layers are gzip streams of the tar (the same bytes each
// time), the index and its images pass go-containerregistry's validation
// (every digest, size and diff ID checked).
func TestImageIndex(t *testing.T) {
	tarData := installerTar(t, bytes.Repeat([]byte("initramfs "), 1000))
	a, err := NewImageLayer(tarData)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewImageLayer(tarData)
	if !bytes.Equal(a.gz, b.gz) || len(a.gz) >= len(tarData) {
		t.Fatalf("gzip: deterministic %t, %d bytes of %d", bytes.Equal(a.gz, b.gz), len(a.gz), len(tarData))
	}
	zr, err := gzip.NewReader(bytes.NewReader(a.gz))
	if err != nil {
		t.Fatal(err)
	}
	if back, _ := io.ReadAll(zr); !bytes.Equal(back, tarData) || !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gunzip: equal %t, mtime %v, name %q", bytes.Equal(back, tarData), zr.ModTime, zr.Name)
	}
	idx, err := ImageIndex(1700000000, map[string]string{"k": "v"}, []string{"x86_64", "aarch64"}, map[string]*ImageLayer{"x86_64": a}, InstallerEntrypoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatal(err)
	}
	m, _ := idx.IndexManifest()
	if len(m.Manifests) != 1 || m.Manifests[0].Platform.Architecture != "amd64" || m.Annotations["k"] != "v" {
		t.Errorf("index: %+v", m)
	}
}
