package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestImageFromRelease: the media made from a published release (what the
// Image Factory serves) are byte for byte those builder image makes from
// the spec, for a schematic with extensions (one of them shipping kernel
// modules, so the module-index layer is made from the release's
// rootfs.sqsh), on two platforms. A wrong key is refused before anything
// is read.
func TestImageFromRelease(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := "oci:" + filepath.Join(d.dir, "release", "dev")
	sch := filepath.Join(t.TempDir(), "schematic.yaml")
	os.WriteFile(sch, []byte("customization:\n  extraKernelArgs: [console=ttyS0]\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n"), 0o644)
	for _, platform := range []string{"metal", "azure"} {
		fromSpec, fromRelease := filepath.Join(t.TempDir(), "spec"), filepath.Join(t.TempDir(), "release")
		out, err := builderProcess(t, "image", "-q", "--spec", d.spec, "--cache", d.cache, "--schematic", sch, "--platform", platform, "--kind", "all", "--out", fromSpec)
		if err != nil {
			t.Fatalf("image --spec: %v\n%s", err, out)
		}
		out, err = runBuilder(t, "image", "--release", layout, "--version", "1.11.0-demo", "--key", d.devPub, "--schematic", sch, "--platform", platform, "--kind", "all", "--out", fromRelease)
		if err != nil {
			t.Fatalf("image --release: %v\n%s", err, out)
		}
		if !strings.Contains(out, platform+"-x86_64.") {
			t.Errorf("image --release --platform %s lists no disk image:\n%s", platform, out)
		}
		a, b := mediaFiles(t, fromSpec), mediaFiles(t, fromRelease)
		if len(a) < 6 || !slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))) {
			t.Fatalf("%s: from the spec %v, from the release %v", platform, slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
		}
		for name, data := range a {
			if !bytes.Equal(data, b[name]) {
				t.Errorf("%s: %s differs between the spec's build and the release", platform, name)
			}
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("customization:\n  systemExtensions:\n    officialExtensions: [gpu-magic]\n"), 0o644)
	if _, err := runBuilder(t, "image", "--release", layout, "--version", "1.11.0-demo", "--key", d.devPub, "--schematic", bad, "--kind", "iso", "--out", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), `extension "gpu-magic" is not in the release (it has btrfs, cri, nvidia, zfs)`) {
		t.Errorf("image --release with an unknown extension: %v", err)
	}
	out, err := runBuilder(t, "image", "--release", layout, "--version", "1.11.0-demo", "--key", d.prodPub, "--schematic", sch, "--kind", "iso", "--out", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "does not verify: wrong key") {
		t.Errorf("image --release with the wrong key: %v\n%s", err, out)
	}
}

// mediaFiles reads the files of OUT/media/<id>/ but the installer layout.
func mediaFiles(t *testing.T, out string) map[string][]byte {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(out, "media", "*"))
	if len(dirs) != 1 {
		t.Fatalf("%s: media directories %v", out, dirs)
	}
	es, err := os.ReadDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range es {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dirs[0], e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = b
		}
	}
	return files
}
