package server

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pkgbase/testbase"
	"github.com/nodeforge/builder/release"
)

// Talos's installer image contract, one subtest per row of
// docs/talos-compatibility.md ("Installer image"), on a release made here
// (a boot image and an installer per architecture in an OCI layout) as
// builds lay them out, or as releases published before did.

// tarOf writes files (path -> content) as a layer's tar, in order.
func tarOf(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f[0], Mode: 0o644, Size: int64(len(f[1]))})
		tw.Write([]byte(f[1]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tarFiles reads a layer's regular files.
func tarFiles(t *testing.T, l v1.Layer) map[string][]byte {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string][]byte{}
	for p, f := range testutil.ReadTar(t, rc) {
		out[p] = f.Data
	}
	return out
}

// compatRelease is a release of x86_64 and aarch64 in a layout: its boot
// image and its installer, laid out as Talos's (legacy: as releases made
// before, one layer under usr/install/<rpm arch>/ with bootloader.efi).
// With stub, its installer carries systemd-stub.efi and a UKI; with
// talosctl, usr/bin/talosctl ("talosctl for <arch>") beside the installer.
func compatRelease(t *testing.T, legacy bool, stub []byte, talosctl bool) *factory.VerifiedRelease {
	t.Helper()
	ctx := context.Background()
	st, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	arches := []string{"x86_64", "aarch64"}
	boot, inst := map[string][]v1.Layer{}, map[string][]v1.Layer{}
	for _, arch := range arches {
		kernel, initramfs := "kernel of "+arch, "initramfs of "+arch
		vl := static.NewLayer([]byte(kernel), types.MediaType(compose.MediaTypeVmlinuz))
		il := static.NewLayer([]byte(initramfs), types.MediaType(compose.MediaTypeInitramfs))
		boot[arch] = []v1.Layer{vl, il}
		layer := func(files ...[2]string) v1.Layer {
			l, err := compose.NewImageLayer(tarOf(t, files...))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		if legacy {
			d := "usr/install/" + arch + "/"
			inst[arch] = []v1.Layer{layer([2]string{"usr/bin/installer", "installer"}, [2]string{d + "vmlinuz", kernel},
				[2]string{d + "initramfs.xz", initramfs}, [2]string{d + compose.LegacyBootloaderName, "boot of " + arch})}
			continue
		}
		d := compose.InstallDir(arch)
		files := [][2]string{{d + "initramfs.xz", initramfs}, {d + compose.BootloaderName, "boot of " + arch}}
		if stub != nil {
			files = append(files, [2]string{d + compose.StubName, string(stub)}, [2]string{d + compose.UKIName, "release UKI"})
		}
		bin := [][2]string{{"usr/bin/installer", "installer"}}
		if talosctl {
			bin = append(bin, [2]string{"./" + factory.TalosctlPath, "talosctl for " + arch})
		}
		inst[arch] = []v1.Layer{layer(bin...), layer(append(files, [2]string{d + "vmlinuz", kernel})...)}
	}
	r := &factory.VerifiedRelease{Store: st, Version: "1.11.0", Platforms: platform.Talos, SourceDate: 1700000000, Digests: map[string]string{},
		Params: compose.Params{Architectures: arches, PrettyName: "Nodeforge compat", Cmdline: []string{"init_on_alloc=1", "slab_nomerge"},
			InitramfsCompression: "zstd", Kernel: map[string]compose.KernelParams{"x86_64": {Version: "6.1"}, "aarch64": {Version: "6.1"}}}}
	for repo, layers := range map[string]map[string][]v1.Layer{release.RepoBoot: boot, release.RepoInstaller: inst} {
		idx, err := compose.ImageIndex(r.SourceDate, map[string]string{"org.opencontainers.image.version": "1.11.0"}, arches, layers, compose.InstallerEntrypoint)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteIndex(ctx, repo, "1.11.0", idx); err != nil {
			t.Fatal(err)
		}
		d, _ := idx.Digest()
		r.Digests[repo] = d.String()
	}
	return r
}

func TestCompatInstaller(t *testing.T) {
	ctx := context.Background()
	stub := testbase.EFIForTest(t, "linuxx64.efi.stub")
	rel := compatRelease(t, false, stub, false)
	sch := &schematic.Schematic{}
	sch.Customization.ExtraKernelArgs = []string{"nomodeset"}
	sch.Customization.Meta = []schematic.MetaValue{{Key: 0xa, Value: "v"}}
	id, _ := sch.ID()
	child := func(t *testing.T, idx v1.ImageIndex, arch string) v1.Image {
		t.Helper()
		m, _ := idx.IndexManifest()
		for _, d := range m.Manifests {
			if d.Platform.Architecture == arch {
				img, err := idx.Image(d.Digest)
				if err != nil {
					t.Fatal(err)
				}
				return img
			}
		}
		t.Fatalf("no %s image", arch)
		return nil
	}
	relInstaller, _ := rel.Image(ctx, release.RepoInstaller, "x86_64")
	relLayers, _ := relInstaller.Layers()
	idx, err := rel.Installer(ctx, factory.InstallerOptions{Schematic: sch, Work: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the multi-arch index", func(t *testing.T) {
		m, _ := idx.IndexManifest()
		var got []string
		for _, d := range m.Manifests {
			got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		}
		if m.MediaType != types.OCIImageIndex || !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) || m.Annotations[factory.AnnotationSchematic] != id {
			t.Errorf("index: %s %v %v", m.MediaType, got, m.Annotations)
		}
	})
	t.Run("layers: the installer's kept, the boot assets' replaced", func(t *testing.T) {
		img := child(t, idx, "amd64")
		layers, _ := img.Layers()
		if len(layers) != 2 {
			t.Fatalf("%d layers", len(layers))
		}
		kept, _ := layers[0].Digest()
		was, _ := relLayers[0].Digest()
		if kept != was {
			t.Errorf("the installer's layer %s is not the release's %s", kept, was)
		}
	})
	t.Run("usr/install/amd64 with Talos's names", func(t *testing.T) {
		layers, _ := child(t, idx, "amd64").Layers()
		files := tarFiles(t, layers[1])
		names := slices.Sorted(maps.Keys(files))
		want := []string{"usr/install/amd64/initramfs.xz", "usr/install/amd64/systemd-boot.efi", "usr/install/amd64/vmlinuz"}
		if stub != nil {
			want = []string{"usr/install/amd64/initramfs.xz", "usr/install/amd64/systemd-boot.efi", "usr/install/amd64/systemd-stub.efi", "usr/install/amd64/vmlinuz", "usr/install/amd64/vmlinuz.efi"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("boot assets: %v, want %v", names, want)
		}
		if i := files["usr/install/amd64/initramfs.xz"]; !bytes.HasPrefix(i, []byte("initramfs of x86_64")) || len(i) == len("initramfs of x86_64") {
			t.Error("the initramfs is not the release's with the schematic's segment")
		}
		if u := files["usr/install/amd64/vmlinuz.efi"]; stub != nil && !bytes.Contains(u, []byte("talos.platform=metal console=tty0 init_on_alloc=1 slab_nomerge nomodeset")) {
			t.Error("the UKI is not metal's with the schematic's arguments")
		}
		arm, _ := child(t, idx, "arm64").Layers()
		if _, ok := tarFiles(t, arm[1])["usr/install/arm64/initramfs.xz"]; !ok {
			t.Error("no usr/install/arm64/ in the arm64 image")
		}
	})
	t.Run("entrypoint /usr/bin/installer", func(t *testing.T) {
		cf, _ := child(t, idx, "amd64").ConfigFile()
		if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/bin/installer"}) || cf.OS != "linux" || cf.Architecture != "amd64" {
			t.Errorf("config: %+v", cf)
		}
	})
	t.Run("a platform's installer: its command line, no META", func(t *testing.T) {
		aws, err := rel.Installer(ctx, factory.InstallerOptions{Schematic: sch, Platform: "aws", Work: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		layers, _ := child(t, aws, "amd64").Layers()
		files := tarFiles(t, layers[1])
		want := "talos.platform=aws console=tty1 console=ttyS0 net.ifnames=0 nvme_core.io_timeout=4294967295 init_on_alloc=1 slab_nomerge nomodeset"
		if got := string(files["usr/install/amd64/cmdline"]); got != want {
			t.Errorf("cmdline %q, want %q", got, want)
		}
		if u := files["usr/install/amd64/vmlinuz.efi"]; stub != nil && !bytes.Contains(u, []byte(want)) {
			t.Error("the UKI lacks the platform's command line")
		}
	})
	t.Run("installer-ARCH.tar: a docker tarball of the image", func(t *testing.T) {
		for _, c := range []struct{ platform, tag string }{{"", "installer/" + id + ":v1.11.0"}, {"metal", "metal-installer/" + id + ":v1.11.0"}} {
			var tb bytes.Buffer
			if err := rel.InstallerTarball(ctx, factory.InstallerOptions{Schematic: sch, Platform: c.platform, Work: t.TempDir()}, "x86_64", &tb); err != nil {
				t.Fatal(err)
			}
			b := tb.Bytes()
			img, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := child(t, idx, "amd64")
			if c.platform != "" {
				pi, _ := rel.Installer(ctx, factory.InstallerOptions{Schematic: sch, Platform: c.platform, Work: t.TempDir()})
				want = child(t, pi, "amd64")
			}
			gc, _ := img.ConfigName()
			wc, _ := want.ConfigName()
			gl, _ := img.Layers()
			wl, _ := want.Layers()
			if gc != wc || len(gl) != len(wl) {
				t.Errorf("%s: config %s, want %s", c.tag, gc, wc)
			}
			for i := range gl {
				gd, _ := gl[i].Digest()
				wd, _ := wl[i].Digest()
				if gd != wd {
					t.Errorf("%s: layer %d %s, want %s", c.tag, i, gd, wd)
				}
			}
			var m tarball.Manifest
			tr := tar.NewReader(bytes.NewReader(b))
			for h, err := tr.Next(); err == nil; h, err = tr.Next() {
				if h.Name == "manifest.json" {
					json.NewDecoder(tr).Decode(&m)
				}
			}
			if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{c.tag}) {
				t.Errorf("manifest.json: %+v", m)
			}
		}
	})
	t.Run("releases laid out before are read", func(t *testing.T) {
		old := compatRelease(t, true, nil, false)
		b, _, _, err := old.Inputs(ctx, "x86_64", nil)
		if err != nil || string(b.Bootloader) != "boot of x86_64" {
			t.Errorf("the boot manager of an old release: %q %v", b.Bootloader, err)
		}
		nb, _, _, err := rel.Inputs(ctx, "aarch64", nil)
		if err != nil || string(nb.Bootloader) != "boot of aarch64" {
			t.Errorf("the boot manager: %q %v", nb.Bootloader, err)
		}
		oi, err := old.Installer(ctx, factory.InstallerOptions{Schematic: sch, Work: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		layers, _ := child(t, oi, "amd64").Layers()
		if len(layers) != 1 {
			t.Fatalf("%d layers", len(layers))
		}
		files := tarFiles(t, layers[0])
		if i := files["usr/install/x86_64/initramfs.xz"]; !bytes.HasPrefix(i, []byte("initramfs of x86_64")) || len(i) == len("initramfs of x86_64") || files["usr/bin/installer"] == nil {
			t.Errorf("an old release's installer: %v", slices.Sorted(maps.Keys(files)))
		}
	})
}
