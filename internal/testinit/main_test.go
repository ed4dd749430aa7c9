package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	got, err := extensionLayers(p)
	if err != nil || strings.Join(got, " ") != "0.sqsh 1.sqsh" {
		t.Errorf("%v %v", got, err)
	}
	if got, err := extensionLayers(p + ".missing"); err != nil || got != nil {
		t.Errorf("missing file: %v %v", got, err)
	}
}
