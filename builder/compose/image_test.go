package compose

import (
	"bytes"
	"compress/gzip"
	"io"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/nodeforge/builder/builder/media/fat"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// installerTar writes an installer's boot assets layer as builds do, in
// dir (usr/install/amd64/, or x86_64/ as releases made before).
func installerTar(t *testing.T, dir string, initramfs []byte, extra ...*rootfs.Node) []byte {
	t.Helper()
	tr := rootfs.New()
	for _, n := range append([]*rootfs.Node{
		{Path: "/" + dir + "vmlinuz", Data: []byte("kernel")},
		{Path: "/" + dir + "initramfs.xz", Data: initramfs},
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
// build writes with that initramfs and UKI (and the platform's command
// line), byte for byte; the release's own gives the release's layer back;
// a release laid out before (usr/install/x86_64/) keeps its layout.
func TestSchematicInstaller(t *testing.T) {
	const dir, old = "usr/install/amd64/", "usr/install/x86_64/"
	if InstallDir("x86_64") != dir || InstallDir("aarch64") != "usr/install/arm64/" {
		t.Fatalf("InstallDir: %s %s", InstallDir("x86_64"), InstallDir("aarch64"))
	}
	uki := func(d string, data string) *rootfs.Node {
		return &rootfs.Node{Path: "/" + d + UKIName, Data: []byte(data)}
	}
	base := installerTar(t, dir, []byte("release initramfs"), uki(dir, "release UKI"))
	same, err := SchematicInstaller(base, "x86_64", InstallerAssets{Initramfs: bytes.NewReader([]byte("release initramfs")), UKI: bytes.NewReader([]byte("release UKI"))}, 1700000000)
	if err != nil || !bytes.Equal(same, base) {
		t.Fatalf("round trip: %v, equal %t", err, bytes.Equal(same, base))
	}
	got, err := SchematicInstaller(base, "x86_64", InstallerAssets{Initramfs: bytes.NewReader([]byte("schematic initramfs")), UKI: bytes.NewReader([]byte("schematic UKI")), Cmdline: []byte("console=ttyS0")}, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	want := installerTar(t, dir, []byte("schematic initramfs"), uki(dir, "schematic UKI"), &rootfs.Node{Path: "/" + dir + "cmdline", Data: []byte("console=ttyS0")})
	if !bytes.Equal(got, want) {
		t.Error("the schematic's installer differs from the layer a build writes")
	}
	if _, err := SchematicInstaller(base, "x86_64", InstallerAssets{Initramfs: bytes.NewReader([]byte("x"))}, 1); err == nil || !strings.Contains(err.Error(), "no UKI of the schematic") {
		t.Errorf("a UKI left with the release's initramfs: %v", err)
	}
	// A UKI under the legacy directory beside an initramfs under the
	// new one: its data was not read, and it is not replaced either.
	mixed := installerTar(t, dir, []byte("release initramfs"), uki(old, "release UKI"))
	if _, err := SchematicInstaller(mixed, "x86_64", InstallerAssets{Initramfs: bytes.NewReader([]byte("x")), UKI: bytes.NewReader([]byte("u"))}, 1); err == nil ||
		!strings.Contains(err.Error(), "neither replaced nor removed") {
		t.Errorf("a release file left out and not replaced: %v", err)
	}
	legacy := installerTar(t, old, []byte("release initramfs"))
	got, err = SchematicInstaller(legacy, "x86_64", InstallerAssets{Initramfs: bytes.NewReader([]byte("schematic initramfs")), UKI: bytes.NewReader([]byte("unused"))}, 1700000000)
	if err != nil || !bytes.Equal(got, installerTar(t, old, []byte("schematic initramfs"))) {
		t.Errorf("a release laid out before: %v", err)
	}

	// Secure Boot: the signed ESP for the unsigned boot code, and the
	// signed systemd-boot and UKI where Talos's installer looks, linked.
	esp := []fat.File{{Path: "EFI/BOOT/BOOTX64.EFI", Data: []byte("signed boot")}, {Path: "EFI/Linux/nodeforge.efi", Data: []byte("signed UKI")}, {Path: "loader/loader.conf", Data: []byte("timeout 0\n")}}
	withBoot := installerTar(t, dir, []byte("release initramfs"), &rootfs.Node{Path: "/" + dir + BootloaderName, Data: []byte("boot")},
		&rootfs.Node{Path: "/" + dir + StubName, Data: []byte("stub")}, uki(dir, "release UKI"), &rootfs.Node{Path: "/" + dir + "demo.spdx.json", Data: []byte("{}")})
	sb, err := SchematicInstaller(withBoot, "x86_64", InstallerAssets{Initramfs: bytes.NewReader([]byte("schematic initramfs")), ESP: esp}, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rootfs.ReadTar(bytes.NewReader(sb), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, n := range tr.Nodes() {
		if n.Kind == rootfs.KindFile {
			paths = append(paths, n.Path)
		}
	}
	wantPaths := []string{"/" + dir + "demo.spdx.json", "/" + dir + "esp/EFI/BOOT/BOOTX64.EFI", "/" + dir + "esp/EFI/Linux/nodeforge.efi", "/" + dir + "esp/loader/loader.conf", "/" + dir + BootloaderName, "/" + dir + UKIName}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("Secure Boot installer files:\n got %v\nwant %v", paths, wantPaths)
	}
	if n := tr.Get("/" + dir + UKIName); n == nil || string(n.Data) != "signed UKI" || n.LinkGroup != "/"+dir+"esp/EFI/Linux/nodeforge.efi" {
		t.Errorf("vmlinuz.efi: %+v", n)
	}
	if n := tr.Get("/" + dir + BootloaderName); n == nil || string(n.Data) != "signed boot" {
		t.Errorf("systemd-boot.efi: %+v", n)
	}
	// Hard links: the signed UKI is once in the tar.
	if c := bytes.Count(sb, []byte("signed UKI")); c != 1 {
		t.Errorf("the signed UKI is %d times in the layer", c)
	}
	if _, err := SchematicInstaller(base, "aarch64", InstallerAssets{}, 1); err == nil {
		t.Error("an installer without the architecture's initramfs was accepted")
	}
	if _, err := SchematicInstaller([]byte("not a tar at all, but long enough to be read as one...."), "x86_64", InstallerAssets{}, 1); err == nil {
		t.Error("a layer that is not a tar was accepted")
	}
}

// TestImageIndex: layers are gzip streams of the tar (the same bytes each
// time), the index and its images pass go-containerregistry's validation
// (every digest, size and diff ID checked).
func TestImageIndex(t *testing.T) {
	tarData := installerTar(t, "usr/install/amd64/", bytes.Repeat([]byte("initramfs "), 1000))
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
	bin, _ := NewImageLayer(installerTar(t, "usr/bin/", []byte("ELF")))
	idx, err := ImageIndex(1700000000, map[string]string{"k": "v"}, []string{"x86_64", "aarch64"}, map[string][]v1.Layer{"x86_64": {bin, a}}, InstallerEntrypoint)
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
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	if ls, _ := img.Layers(); len(ls) != 2 || !slices.Equal(cf.Config.Entrypoint, []string{"/usr/bin/installer"}) || cf.Architecture != "amd64" {
		t.Errorf("image: %d layers, config %+v", len(ls), cf)
	}
	one, err := Image(1700000000, map[string]string{"k": "v"}, "x86_64", []v1.Layer{bin, a}, InstallerEntrypoint)
	if d, _ := one.Digest(); err != nil || d != m.Manifests[0].Digest {
		t.Errorf("Image is not the index's child: %v %v", d, err)
	}
}
