package schematic

import (
	"strings"
	"testing"
)

// Talos Image Factory's published test vectors (pkg/schematic tests): the
// same documents must give the same IDs.
func TestTalosVectors(t *testing.T) {
	for _, c := range []struct{ name, doc, id string }{
		{"empty object", `{}`, "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"},
		{"empty file", ``, "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"},
		{"empty customization", `customization: {}`, "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"},
		{"empty kernel args", `customization: {"extraKernelArgs": []}`, "376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"},
		{"kernel args", `{"customization": {"extraKernelArgs": ["noapic", "nolapic"]}}`, "9cba8e32753f91a16c1837ab8abf356af021706ef284aef07380780177d9a06c"},
		{"kernel args, empty extensions", `{"customization": {"extraKernelArgs": ["noapic", "nolapic"], "systemExtensions": {}}}`, "9cba8e32753f91a16c1837ab8abf356af021706ef284aef07380780177d9a06c"},
		{"meta", `{"customization": {"meta": [{"key": 10, "value": "foo"}], "extraKernelArgs": [], "systemExtensions": {}}}`, "d308a2a5ee2277bed5fbaa104fcbc8d59122abfa737df987a95b4ca763459a7f"},
		{"overlay", `{"overlay": {"name": "rpi_generic", "image": "siderolabs/sbc-raspberrypi"}}`, "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"},
		{"overlay, empty customization", `{"overlay": {"name": "rpi_generic", "image": "siderolabs/sbc-raspberrypi"},"customization":{}}`, "ee21ef4a5ef808a9b7484cc0dda0f25075021691c8c09a276591eedb638ea1f9"},
		{"secure boot", `{"customization":{"secureboot": {"includeWellKnownCertificates": true}}}`, "fa8e05f142a851d3ee568eb0a8e5841eaf6b0ebc8df9a63df16ac5ed2c04f3e6"},
	} {
		s, err := Parse([]byte(c.doc))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if id, err := s.ID(); err != nil || id != c.id {
			t.Errorf("%s: id %s (%v), want %s", c.name, id, err, c.id)
		}
	}
}

func TestExtensionOrderDoesNotMatter(t *testing.T) {
	a, err := Parse([]byte("customization:\n  systemExtensions:\n    officialExtensions: [zfs, cri, btrfs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(`{"customization": {"systemExtensions": {"officialExtensions": ["btrfs", "cri", "zfs"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ia, _ := a.ID()
	ib, _ := b.ID()
	if ia != ib {
		t.Errorf("ids differ with the order of extensions: %s %s", ia, ib)
	}
	canon, _ := b.Canonical()
	want := "customization:\n    systemExtensions:\n        officialExtensions:\n            - btrfs\n            - cri\n            - zfs\n"
	if string(canon) != want {
		t.Errorf("canonical form:\n%s\nwant:\n%s", canon, want)
	}
}

func TestInvalid(t *testing.T) {
	for _, doc := range []string{
		`customization: {extraKernelArgs: [a], typo: 1}`,
		`customization: {systemExtensions: {officialExtensions: [zfs, zfs]}}`,
		`customization: {meta: [{key: 10, value: a}, {key: 10, value: b}]}`,
		`customization: {meta: [{key: 300, value: a}]}`,
		`customization: {extraKernelArgs: ["a b"]}`,
		`customization: {extraKernelArgs: ["a\x01"]}`,
		`customization: {extraKernelArgs: [` + strings.Repeat("a,", MaxKernelArgs) + `b]}`,
		`customization: {extraKernelArgs: [a` + strings.Repeat("b", MaxKernelArgLen) + `]}`,
		`customization: {extraKernelArgs: [` + strings.Repeat(strings.Repeat("c", 200)+",", 6) + `d]}`,
		`[1, 2]`,
		`overlay: {name: rpi_generic, image: ../../../etc/passwd}`,
		`overlay: {name: "../rpi", image: siderolabs/sbc-raspberrypi}`,
		`overlay: {image: siderolabs/sbc-raspberrypi}`,
		`overlay: {name: rpi_generic}`,
		`overlay: {name: rpi_generic, image: "Siderolabs/SBC"}`,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("accepted %s", doc)
		}
	}
}
