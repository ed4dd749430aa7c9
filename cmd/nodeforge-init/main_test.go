package main

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/pkgbase/debext"
)

func TestOSReleaseValue(t *testing.T) {
	osr := []byte("NAME=Nodeforge\nPRETTY_NAME=\"Nodeforge boot test (\\\"q\\\", \\$x)\"\nID='single quoted'\n")
	for key, want := range map[string]string{
		"NAME":        "Nodeforge",
		"PRETTY_NAME": `Nodeforge boot test ("q", $x)`,
		"ID":          "single quoted",
	} {
		if got, ok := osReleaseValue(osr, key); !ok || got != want {
			t.Errorf("%s = %q, %v; want %q", key, got, ok, want)
		}
	}
	if _, ok := osReleaseValue(osr, "VERSION_ID"); ok {
		t.Error("VERSION_ID found in a file without it")
	}
}

func TestModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/fs/squashfs/squashfs.ko":        "squashfs",
		"kernel/drivers/block/virtio_blk.ko.xz": "virtio_blk",
		"kernel/fs/overlayfs/overlay.ko.zst":    "overlay",
	} {
		if got := moduleName(in); got != want {
			t.Errorf("moduleName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExtensionLayers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "extensions.yaml")
	os.WriteFile(p, []byte("layers:\n  - image: 0.sqsh\n    metadata:\n      name: cri\n  - image: 1.sqsh\n    metadata:\n      name: modules.dep\n"), 0o644)
	got, err := readExtensions(p)
	if err != nil || len(got) != 2 || got[0].Image != "0.sqsh" || got[0].Metadata.Name != "cri" || got[1].Image != "1.sqsh" {
		t.Errorf("%+v %v", got, err)
	}
	if got, err := readExtensions(p + ".missing"); err != nil || got != nil {
		t.Errorf("missing file: %v %v", got, err)
	}
	os.WriteFile(p, []byte("layers:\n  - image: ../etc/passwd\n"), 0o644)
	if _, err := readExtensions(p); err == nil || !strings.Contains(err.Error(), "../etc/passwd") {
		t.Errorf("a layer outside the initramfs's top: %v", err)
	}
}

// TestBanner: the lines the README's quick start shows.
func TestBanner(t *testing.T) {
	osr := []byte("NAME=\"Nodeforge\"\nVERSION_ID=\"1.11.0-demo\"\nPRETTY_NAME=\"Nodeforge 1.11.0-demo (p11)\"\n")
	var exts []extension
	for _, e := range [][2]string{{"btrfs", "6.12"}, {"schematic", "376567988ad3"}, {"modules.dep", "6.1.0-57-amd64"}} {
		var x extension
		x.Metadata.Name, x.Metadata.Version = e[0], e[1]
		exts = append(exts, x)
	}
	got := strings.Join(banner(osr, "6.1.0-57-amd64", exts, "talos.platform=metal console=ttyS0"), "\n")
	for _, want := range []string{
		"release     Nodeforge 1.11.0-demo (p11), version 1.11.0-demo",
		"kernel      6.1.0-57-amd64",
		"schematic   376567988ad3",
		"extensions  btrfs 6.12\n",
		"kernel args talos.platform=metal console=ttyS0",
		"platform    metal (talos.platform)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("banner lacks %q:\n%s", want, got)
		}
	}
	if got := strings.Join(banner(osr, "k", nil, ""), "\n"); !strings.Contains(got, "extensions  none") || !strings.Contains(got, "schematic   none") || !strings.Contains(got, "platform    none given") {
		t.Errorf("banner without extensions:\n%s", got)
	}
}

func TestReportCmdline(t *testing.T) {
	var b strings.Builder
	console = &b
	p := filepath.Join(t.TempDir(), "cmdline")
	// 0xa={"externalIPs":["1.2.3.4"]}, the upstream factory's vector.
	os.WriteFile(p, []byte("talos.platform=metal console=ttyS0 talos.environment=INSTALLER_META_BASE64=MHhhPXsiZXh0ZXJuYWxJUHMiOlsiMS4yLjMuNCJdfQ==\n"), 0o644)
	if _, err := reportCmdline(p); err != nil {
		t.Fatal(err)
	}
	want := "nodeforge-init: cmdline: talos.platform=metal console=ttyS0 talos.environment=INSTALLER_META_BASE64=MHhhPXsiZXh0ZXJuYWxJUHMiOlsiMS4yLjMuNCJdfQ==\n" +
		"nodeforge-init: META 0xa={\"externalIPs\":[\"1.2.3.4\"]}\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	os.WriteFile(p, []byte("nodeforge.environment=INSTALLER_META_BASE64=!!!"), 0o644)
	if _, err := reportCmdline(p); err == nil {
		t.Error("bad base64 accepted")
	}
}

func TestReadModules(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "modules.dep"), []byte("kernel/fs/btrfs/btrfs.ko: kernel/lib/libcrc32c.ko kernel/crypto/xor.ko\nkernel/lib/libcrc32c.ko:\nkernel/crypto/xor.ko:\nkernel/crypto/crc32c_generic.ko:\nkernel/crypto/blake2b-generic.ko:\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "modules.softdep"), []byte("# Soft dependencies\nsoftdep btrfs pre: blake2b-256 sha256 post: xor\nsoftdep libcrc32c pre: crc32c\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "modules.alias"), []byte("alias crc32c crc32c_generic\nalias blake2b-* blake2b_generic\n"), 0o644)
	m, err := readModules(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.pre["btrfs"]; strings.Join(got, " ") != "blake2b-256 sha256" {
		t.Errorf("btrfs pre softdeps %v", got)
	}
	for name, want := range map[string]string{
		"btrfs": "kernel/fs/btrfs/btrfs.ko", "crc32c": "kernel/crypto/crc32c_generic.ko",
		"blake2b-256": "kernel/crypto/blake2b-generic.ko", "sha256": "",
	} {
		if got := m.resolve(name); got != want {
			t.Errorf("resolve(%s) = %q, want %q", name, got, want)
		}
	}
	// Without softdeps and aliases (the initramfs's indexes), modules.dep alone.
	os.Remove(filepath.Join(dir, "modules.softdep"))
	os.Remove(filepath.Join(dir, "modules.alias"))
	if m, err = readModules(dir); err != nil || len(m.order) != 5 || len(m.pre) != 0 {
		t.Errorf("modules.dep alone: %v, %+v", err, m)
	}
}

func TestPluginStatus(t *testing.T) {
	table := "TYPE                            ID          PLATFORMS      STATUS\nio.containerd.grpc.v1           cri         linux/amd64    ok\nio.containerd.snapshotter.v1    btrfs       linux/amd64    skip\n"
	if got := pluginStatus(table, "io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.runtime.v2.task"); got != "io.containerd.grpc.v1.cri ok, io.containerd.snapshotter.v1.btrfs skip, io.containerd.runtime.v2.task absent" {
		t.Errorf("pluginStatus: %s", got)
	}
}

func TestProgram(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	os.WriteFile(filepath.Join(dir, "containerd"), []byte("\x7fELF\x02\x01\x01"), 0o755)
	os.WriteFile(filepath.Join(dir, "mkfs.btrfs"), []byte("#!/bin/sh\n# mkfs.btrfs: demo stand-in\n"), 0o755)
	var out strings.Builder
	console = &out
	defer func() { console = os.Stdout }()
	if !program("cri", "containerd") {
		t.Errorf("an ELF program is refused: %s", out.String())
	}
	if program("btrfs", "mkfs.btrfs") || !strings.Contains(out.String(), "btrfs: "+filepath.Join(dir, "mkfs.btrfs")+" is a stand-in") {
		t.Errorf("a stand-in script is taken: %q", out.String())
	}
	if program("cri", "ctr") || !strings.Contains(out.String(), "cri: no ctr in ") {
		t.Errorf("a missing program: %q", out.String())
	}
}

// TestArchiveImageName: the image is run by the name its OCI archive's
// index.json gives it (the boot tests' archive, and the layout the
// release's images are exported as); what is no OCI archive, or names no
// image, is refused saying why.
func TestArchiveImageName(t *testing.T) {
	archive, err := debext.Image([]debext.Init{{GOARCH: "amd64", Binary: []byte("\x7fELF")}}, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if name, err := archiveImageName(bytes.NewReader(archive)); err != nil || name != debext.ImageName {
		t.Errorf("archiveImageName: %q, %v; want %s", name, err, debext.ImageName)
	}
	tarOf := func(name, body string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
		tw.Close()
		return b.Bytes()
	}
	for _, c := range []struct {
		archive []byte
		want    string
	}{
		{tarOf("oci-layout", "{}"), "no index.json"},
		{tarOf("index.json", `{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"1.0"}}]}`), "no io.containerd.image.name"},
		{tarOf("index.json", `{"manifests":[]}`), "lists 0 images"},
		{[]byte("not a tar at all, just text"), "not an OCI archive"},
	} {
		if _, err := archiveImageName(bytes.NewReader(c.archive)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.archive[:min(len(c.archive), 20)], err, c.want)
		}
	}
}
