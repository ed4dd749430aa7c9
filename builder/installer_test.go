package builder

import (
	"bytes"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// image.talosctl: the installer's first layer carries talosctl beside the
// installer, executable, where the factory serves it from
// (factory.TalosctlPath); without it the layer is the installer alone.
func TestInstallerLayersTalosctl(t *testing.T) {
	files := func(layer []byte) map[string]testutil.TarFile { return testutil.ReadTar(t, bytes.NewReader(layer)) }
	base := installerFiles{bin: []byte("installer"), binPkg: "talos-installer-1.11.0-alt1.x86_64"}
	plain, _, err := installerLayers("x86_64", "demo", []byte("k"), []byte("i"), []byte("{}"), nil, base, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	if got := files(plain); len(got) != 1 || got["usr/bin/installer"].Data == nil {
		t.Errorf("without talosctl: %v", got)
	}
	base.talosctl, base.talosctlPkg = []byte("talosctl binary"), "talosctl-1.11.0-alt1.x86_64"
	withCtl, _, err := installerLayers("x86_64", "demo", []byte("k"), []byte("i"), []byte("{}"), nil, base, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	got := files(withCtl)
	if f, ok := got["usr/bin/talosctl"]; len(got) != 2 || !ok || f.Header.Mode&0o111 == 0 || string(f.Data) != "talosctl binary" || f.Header.ModTime.Unix() != 1700000000 {
		t.Errorf("with talosctl: %v", got)
	}
}
