package compose

import (
	"bytes"
	"context"
	"io"
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
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// embedMedia makes the initramfs (and the plain UKI when stub is not nil)
// of a schematic with the extension zfs and config (none: "") from
// stand-in boot assets, its initramfs segment compressed with compression.
func embedMedia(t *testing.T, config, compression string, stub []byte) (*Result, Boot) {
	t.Helper()
	b, zfs, o := embedInputs(t, config, compression, stub)
	r, err := Media(context.Background(), b, []*Extension{zfs}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(r.Initramfs, b.Initramfs) || !bytes.Equal(r.file(t, "initramfs-x86_64.xz"), r.Initramfs) {
		t.Fatal("the initramfs is not the release's with the segment appended")
	}
	return r, b
}

// embedInputs are embedMedia's boot assets, extension and options.
func embedInputs(t *testing.T, config, compression string, stub []byte) (Boot, *Extension, Options) {
	t.Helper()
	zfs := &Extension{Name: "zfs", Metadata: extensions.Metadata{Name: "zfs", Version: "2.3.4"}, Tree: rootfs.New()}
	if err := zfs.Tree.Add(&rootfs.Node{Path: "/usr/local/lib/zfs.txt", Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root",
		Data: []byte("zfs\n"), Digest: digest.SHA256Hex([]byte("zfs\n"))}); err != nil {
		t.Fatal(err)
	}
	sch := &schematic.Schematic{}
	sch.Customization.SystemExtensions.OfficialExtensions = []string{"siderolabs/zfs"}
	sch.Customization.EmbeddedMachineConfiguration = config
	b := Boot{Arch: "x86_64", Vmlinuz: []byte("vmlinuz"), Initramfs: []byte("the release's initramfs"), KernelVersion: "6.1.0-57-amd64", Stub: stub, Cmdline: []string{"console=ttyS0"}}
	o := Options{Schematic: sch, Platform: "metal", Squashfs: rootfs.SquashfsOptions{Compressor: compression}, InitramfsCompression: compression,
		SourceDate: 1700000000, Work: t.TempDir(), PrettyName: "Nodeforge embed", UKI: stub != nil}
	return b, zfs, o
}

// TestEmbeddedConfig: customization.embeddedMachineConfiguration is the
// virtual extension embedded-config after the schematic's extensions and
// its schematic layer, as
// Talos's imager makes it (pkg/imager/embed.go): its manifest's metadata,
// /usr/local/etc/talos/config.yaml read-only to root with the bytes as
// given (not YAML either: neither upstream's factory nor its imager
// checks them). The real zstd, xz, cpio and unsquashfs read the segment;
// objcopy takes the initramfs out of the plain UKI (the installer's
// vmlinuz.efi is the same UKI).
func TestEmbeddedConfig(t *testing.T) {
	cpioTool, unsq := testutil.NeedTool(t, "cpio"), testutil.NeedTool(t, "unsquashfs")
	const config = "apiVersion: v1alpha1\nkind: HostnameConfig\nhostname: worker-33\nauto: off\n---\n\t: not [YAML, ключ\r\n"
	want := extensions.Metadata{Name: "embedded-config", Version: digest.SHA256Hex([]byte(config)), Author: "Imager",
		Description: "Virtual extension which embeds the machine configuration.", Compatibility: extensions.Compatibility{Talos: extensions.VersionConstraint{Version: ">= 1.0.0"}}}
	for _, compression := range []string{"zstd", "xz"} {
		r, b := embedMedia(t, config, compression, nil)
		dir := unpackSegment(t, testutil.NeedTool(t, compression), cpioTool, r.Initramfs[len(b.Initramfs):], "0.sqsh", "1.sqsh", "2.sqsh")
		var doc ExtensionsYAML
		y, _ := os.ReadFile(filepath.Join(dir, "extensions.yaml"))
		if err := yaml.Unmarshal(y, &doc); err != nil || len(doc.Layers) != 3 || doc.Layers[0].Metadata.Name != "zfs" ||
			doc.Layers[1].Metadata.Name != SchematicLayerName || doc.Layers[2] != (Layer{Image: "2.sqsh", Metadata: want}) {
			t.Errorf("%s: extensions.yaml (%v):\n%s", compression, err, y)
		}
		out, err := exec.Command(unsq, "-lln", "-n", filepath.Join(dir, "2.sqsh")).CombinedOutput()
		if err != nil {
			t.Fatalf("unsquashfs -lln: %v\n%s", err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l)
			got = append(got, f[0]+" "+f[1]+" "+f[len(f)-1])
		}
		if !slices.Equal(got, []string{"drwxr-xr-x 0/0 squashfs-root", "drwxr-xr-x 0/0 squashfs-root/usr", "drwxr-xr-x 0/0 squashfs-root/usr/local",
			"drwxr-xr-x 0/0 squashfs-root/usr/local/etc", "drwxr-xr-x 0/0 squashfs-root/usr/local/etc/talos", "-r-------- 0/0 squashfs-root/usr/local/etc/talos/config.yaml"}) {
			t.Errorf("%s: embedded-config layer:\n%s", compression, out)
		}
		cat, err := exec.Command(unsq, "-cat", filepath.Join(dir, "2.sqsh"), "usr/local/etc/talos/config.yaml").Output()
		if err != nil || string(cat) != config {
			t.Errorf("%s: unsquashfs -cat config.yaml: %v\n%q", compression, err, cat)
		}
	}

	// Without it: no such layer, the extension's layer the same bytes.
	with, _ := embedMedia(t, config, "zstd", nil)
	without, _ := embedMedia(t, "", "zstd", nil)
	if len(without.Segment) != 3 || without.Segment[2].Name != "extensions.yaml" || bytes.Contains(without.Segment[2].Data, []byte("embedded-config")) ||
		!bytes.Equal(without.Segment[0].Data, with.Segment[0].Data) {
		t.Errorf("without a configuration: %d entries", len(without.Segment))
	}

	objcopy := testutil.NeedTool(t, "objcopy")
	stub := testbase.EFIForTest(t, "linuxx64.efi.stub")
	if stub == nil {
		return
	}
	r, _ := embedMedia(t, config, "zstd", stub)
	u := filepath.Join(t.TempDir(), "uki.efi")
	if err := os.WriteFile(u, r.file(t, "metal-x86_64-uki.efi"), 0o644); err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(t.TempDir(), "initrd")
	if out, err := exec.Command(objcopy, "--dump-section", ".initrd="+initrd, u, filepath.Join(t.TempDir(), "out.efi")).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(initrd); !bytes.Equal(got, r.Initramfs) {
		t.Error("the UKI's .initrd is not the initramfs with the embedded configuration")
	}
}

// unpackSegment decompresses an initramfs segment with the tool (zstd,
// xz) and unpacks it with cpio into a new directory, checking its names:
// the layers', then extensions.yaml.
func unpackSegment(t *testing.T, tool, cpioTool string, seg []byte, layers ...string) string {
	t.Helper()
	dec := exec.Command(tool, "-dc")
	dec.Stdin = bytes.NewReader(seg)
	raw, err := dec.Output()
	if err != nil {
		t.Fatalf("%s -dc: %v", tool, err)
	}
	dir := t.TempDir()
	cmd := exec.Command(cpioTool, "-idmv", "--quiet")
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != strings.Join(append(layers, "extensions.yaml"), "\n")+"\n" {
		t.Fatalf("cpio -idmv: %v\n%s", err, out)
	}
	return dir
}

// TestSupportsEmbeddedConfig: Talos reads an embedded configuration from
// 1.12.0 on, whatever the suffix; what is not a version counts as the
// newest (upstream's quirks). The factory's refusal is upstream's text.
func TestSupportsEmbeddedConfig(t *testing.T) {
	for v, want := range map[string]bool{
		"v1.12.0": true, "1.12.0": true, "1.12.0-alpha": true, "v1.12.0-alpha.1": true, "1.12": true, "1.13.2": true, "2.0.0": true, "1.12.0+b": true,
		"1.11.0-demo": false, "v1.11.9": false, "1.10.0-c10f2": false, "1.0": false, "1": false, "0.99.0": false,
		"": true, "latest": true, "1.x.0": true, "1.11.0.1": true,
	} {
		if got := SupportsEmbeddedConfig(v); got != want {
			t.Errorf("%q: %t, want %t", v, got, want)
		}
	}
	sch := &schematic.Schematic{}
	sch.Customization.EmbeddedMachineConfiguration = "a: b\n"
	for _, k := range []string{"iso", "disk", "initramfs", "installer", "uki"} {
		if err := EmbeddedConfigRefusal(sch, Output{Kind: k}, "1.11.0"); err == nil || err.Error() != "embedding configuration is not supported for Talos version v1.11.0" {
			t.Errorf("%s: %v", k, err)
		}
		if err := EmbeddedConfigRefusal(sch, Output{Kind: k}, "v1.12.0"); err != nil {
			t.Errorf("%s 1.12.0: %v", k, err)
		}
	}
	for _, k := range []string{"kernel", "cmdline"} {
		if err := EmbeddedConfigRefusal(sch, Output{Kind: k}, "1.11.0"); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if err := EmbeddedConfigRefusal(&schematic.Schematic{}, Output{Kind: "iso"}, "1.0"); err != nil {
		t.Errorf("no configuration: %v", err)
	}
}

// A release's initramfs written once the segment is made
// (WriteInitramfs) with no scratch directory gives the same media as one
// given whole, in memory; its error is Media's.
func TestWriteInitramfsInMemory(t *testing.T) {
	r, _ := embedMedia(t, "", "zstd", nil)
	b, zfs, o := embedInputs(t, "", "zstd", nil)
	o.Work = ""
	lazy := b
	lazy.Initramfs, lazy.WriteInitramfs = nil, func(w io.Writer) error { _, err := w.Write(b.Initramfs); return err }
	got, err := Media(context.Background(), lazy, []*Extension{zfs}, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Initramfs, r.Initramfs) || got.file(t, "initramfs-x86_64.xz") == nil {
		t.Errorf("the initramfs written late differs (%t)", !bytes.Equal(got.Initramfs, r.Initramfs))
	}
	lazy.WriteInitramfs = func(io.Writer) error { return os.ErrNotExist }
	if _, err := Media(context.Background(), lazy, []*Extension{zfs}, o); err == nil || !strings.Contains(err.Error(), "the release's initramfs") {
		t.Errorf("a failed write: %v", err)
	}
}

// TestInitramfsInAFile: a release that writes its initramfs
// (Boot.WriteInitramfs), given a scratch directory, gets the same media
// with the initramfs made in a file there and never held (Result's
// Initramfs nil, its blob the file); the UKI, laid out on that file, is
// the same bytes. A failed write is an error that leaves no file.
func TestInitramfsInAFile(t *testing.T) {
	stub := testbase.EFIForTest(t, "linuxx64.efi.stub")
	if stub == nil {
		return
	}
	r, b := embedMedia(t, "", "zstd", stub)
	_, zfs, o := embedInputs(t, "", "zstd", stub)
	lazy := b
	lazy.Initramfs, lazy.WriteInitramfs = nil, func(w io.Writer) error { _, err := w.Write(b.Initramfs); return err }
	got, err := Media(context.Background(), lazy, []*Extension{zfs}, o)
	if err != nil {
		t.Fatal(err)
	}
	if got.Initramfs != nil {
		t.Error("the initramfs is held in memory")
	}
	if data, err := readBlob(got.InitramfsBlob); err != nil || !bytes.Equal(data, r.Initramfs) {
		t.Errorf("the initramfs's blob: %v, same bytes %t", err, bytes.Equal(data, r.Initramfs))
	}
	if len(got.Files) != len(r.Files) {
		t.Fatalf("%d media, want %d", len(got.Files), len(r.Files))
	}
	for i, f := range r.Files {
		if g := got.file(t, f.Name); !bytes.Equal(g, r.file(t, f.Name)) || got.Files[i].Name != f.Name {
			t.Errorf("%s differs", f.Name)
		}
		if strings.HasSuffix(f.Name, ".xz") || strings.HasSuffix(f.Name, ".efi") {
			if got.Files[i].Path == "" {
				t.Errorf("%s is in memory, not a file", f.Name)
			}
		}
	}
	lazy.WriteInitramfs = func(w io.Writer) error { w.Write([]byte("half")); return os.ErrNotExist }
	o.Work = t.TempDir()
	if _, err := Media(context.Background(), lazy, []*Extension{zfs}, o); err == nil || !strings.Contains(err.Error(), "the release's initramfs") {
		t.Errorf("a failed write: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(o.Work, "initramfs-*")); len(left) > 0 {
		t.Errorf("a failed write left %q", left)
	}
	// The copy starts before the segment: a segment that fails drops it.
	lazy.WriteInitramfs = func(w io.Writer) error { _, err := w.Write(b.Initramfs); return err }
	broken := &Extension{Name: zfs.Name, Metadata: zfs.Metadata, Load: func() (*rootfs.Tree, error) { return nil, os.ErrPermission }}
	if _, err := Media(context.Background(), lazy, []*Extension{broken}, o); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("an extension that cannot be read: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(o.Work, "initramfs-*")); len(left) > 0 {
		t.Errorf("a failed segment left %q", left)
	}
}
