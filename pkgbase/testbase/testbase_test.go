package testbase

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/specs"
)

func TestSpecYAML(t *testing.T) {
	k := KernelInfo{KernelDeb: "k.deb", DebPackage: "linux-image-6.1.0-57-amd64", DebVersion: "6.1.192-3",
		KernelVersion: "6.1.0-57-amd64", Modules: []string{"loop", "overlay", "squashfs", "virtio_blk", "virtio_pci"}, Builtin: []string{"ext4", "virtio_ring"}}
	info := &Info{KernelInfo: k, Kernels: map[string]KernelInfo{"x86_64": k}, PrettyName: `Nodeforge boot test ("quoted", $x)`}
	opts := Options{BootModules: []string{"loop", "squashfs", "overlay", "virtio-ring", "virtio_pci", "virtio_blk"}, InitramfsCompression: "xz"}.withDefaults()
	b, err := specYAML(info, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeExtensionDef(dir, opts); err != nil {
		t.Fatal(err)
	}
	defs, err := extensions.ReadDefinitions(filepath.Join(dir, "extensions"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := specs.Parse(b, dir, defs)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	// A built-in boot module is left out; the rest keep their order.
	if want := []string{"loop", "squashfs", "overlay", "virtio_pci", "virtio_blk"}; !reflect.DeepEqual(s.Image.BootModules, want) {
		t.Errorf("boot modules %v, want %v", s.Image.BootModules, want)
	}
	if s.Image.OS.PrettyName != info.PrettyName || s.Image.InitramfsCompression != "xz" ||
		!reflect.DeepEqual(s.Image.Cmdline, DefaultCmdline) || s.Image.Init != (specs.FileRef{Package: InitPackage, Path: InitPath}) {
		t.Errorf("image section: %+v", s.Image)
	}
	if r := s.Repositories[0]; r.Format != "rpm-md" || r.InsecureSkipVerify || r.URL != filepath.Join(dir, RepoDir) || len(r.Keyring) != 1 || !strings.HasSuffix(r.Keyring[0], KeyFile) {
		t.Errorf("repository: %+v", r)
	}
	for name, kind := range map[string]string{"kernel": "kernel", "rootfs": "rootfs", "installer": "installer", "testext": "extension"} {
		if s.Components[name].Kind != kind {
			t.Errorf("component %s: %+v", name, s.Components[name])
		}
	}

	if !reflect.DeepEqual(s.Architectures, []string{"x86_64"}) || s.Image.Bootloader.ForEFIArch("x64").Path != "/usr/lib/systemd/boot/efi/systemd-bootx64.efi" {
		t.Errorf("architectures %v, bootloader %+v", s.Architectures, s.Image.Bootloader)
	}

	// Two architectures: a module built into one kernel and a module of
	// the other is listed; one neither has is refused.
	arm := KernelInfo{KernelVersion: "6.1.0-57-arm64", Modules: []string{"loop", "overlay", "squashfs", "virtio_blk"}, Builtin: []string{"virtio_pci", "virtio_ring"}}
	info.Kernels["aarch64"] = arm
	opts.Arches = []string{"x86_64", "aarch64"}
	if b, err = specYAML(info, opts); err != nil {
		t.Fatal(err)
	}
	if s, err = specs.Parse(b, dir, defs); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(s.Architectures, opts.Arches) || !reflect.DeepEqual(s.Image.BootModules, []string{"loop", "squashfs", "overlay", "virtio_pci", "virtio_blk"}) {
		t.Errorf("two architectures: %v, boot modules %v", s.Architectures, s.Image.BootModules)
	}

	opts.BootModules = []string{"loop", "dm_verity"}
	if _, err := specYAML(info, opts); err == nil || !strings.Contains(err.Error(), "dm_verity") {
		t.Errorf("a boot module the kernel lacks: %v", err)
	}

	// The extensions' base: Debian's libraries in the root, the cri and
	// btrfs components, their definitions valid and relocating Debian's
	// layout into the contract's.
	opts = Options{Extensions: true}.withDefaults()
	info.Kernels = map[string]KernelInfo{"x86_64": k}
	if b, err = specYAML(info, opts); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := writeExtensionDef(dir, opts); err != nil {
		t.Fatal(err)
	}
	if defs, err = extensions.ReadDefinitions(filepath.Join(dir, "extensions")); err != nil {
		t.Fatal(err)
	}
	if s, err = specs.Parse(b, dir, defs); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if got := s.Components["rootfs"].Packages; !reflect.DeepEqual(got, append([]string{FilesystemPackage}, LibDebs...)) {
		t.Errorf("rootfs packages %v", got)
	}
	for name, want := range map[string]map[string]string{
		"cri":   {"/usr/bin/ctr": "/usr/local/bin/ctr", "/usr/sbin/runc": "/usr/local/sbin/runc", "/usr/lib/cni/loopback": "/usr/local/lib/cni/bin/loopback"},
		"btrfs": {"/sbin/mkfs.btrfs": "/usr/local/sbin/mkfs.btrfs", "/bin/btrfs": "/usr/local/bin/btrfs"},
	} {
		if s.Components[name].Kind != "extension" || s.Extensions[name] == nil {
			t.Errorf("component %s: %+v, definition %v", name, s.Components[name], s.Extensions[name])
			continue
		}
		for from, to := range want {
			if got := s.Extensions[name].Relocated(from); got != to {
				t.Errorf("%s relocates %s to %s, want %s", name, from, got, to)
			}
		}
	}
}
