package schematic

import "testing"

// FuzzParse: no input panics the decoder (the factory feeds it request
// bodies), and an accepted schematic's canonical form parses back to the
// same ID.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"customization:\n  extraKernelArgs: [console=ttyS0]\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n",
		`{"customization": {"meta": [{"key": 10, "value": "x"}]}}`,
		"customization:\n  meta:\n    - key: 300\n      value: x\n",
		"customisation: {}\n",
		"overlay:\n  image: x\n  name: y\n  options: {a: [1, {b: c}]}\n",
		"customization: {bootloader: sd-boot, diskImage: {sectorSize: 4096}, secureboot: {enrollKeys: force}}\n",
		"customization: {embeddedMachineConfiguration: \"a: b\\n\"}\n",
		"- a\n- b\n",
		"&a [*a]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		id, err := s.ID()
		if err != nil {
			t.Fatalf("accepted but no ID: %v", err)
		}
		canon, err := s.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(canon)
		if err != nil {
			// rc.6 writes some block scalars no parser reads back (a
			// string whose first line is indented): upstream's IDs come
			// from that output all the same, and the factory stores what
			// was sent, not this.
			return
		}
		if id2, _ := back.ID(); id2 != id {
			t.Fatalf("ID %s, after a round trip %s", id, id2)
		}
	})
}
