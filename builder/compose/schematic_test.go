package compose

import (
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/schematic"
)

// TestRefusal: each schematic option upstream applies to some outputs is
// refused only there, naming the field, when these media cannot honour it
// (docs/talos-compatibility.md, Schematics).
func TestRefusal(t *testing.T) {
	iso, raw, kernel, cmdline, initramfs, installer := Output{Kind: "iso"}, Output{Kind: "disk"}, Output{Kind: "kernel"}, Output{Kind: "cmdline"}, Output{Kind: "initramfs"}, Output{Kind: "installer"}
	sbISO, sbRaw, sbUKI := Output{Kind: "iso", SecureBoot: true}, Output{Kind: "disk", SecureBoot: true}, Output{Kind: "uki", SecureBoot: true}
	for _, c := range []struct {
		doc     string
		refused []Output
		allowed []Output
		says    string
	}{
		{"customization: {embeddedMachineConfiguration: 'a: b'}", nil, []Output{iso, raw, initramfs, installer, sbUKI, kernel, cmdline}, ""},
		{"customization: {bootloader: grub}", []Output{iso, raw, sbISO}, []Output{kernel, cmdline, initramfs, installer}, "customization.bootloader grub"},
		{"customization: {bootloader: dual-boot}", []Output{iso, raw}, []Output{kernel, installer}, "customization.bootloader dual-boot"},
		{"customization: {bootloader: sd-boot}", nil, []Output{iso, raw, sbISO, sbRaw}, ""},
		{"customization: {diskImage: {sectorSize: 4096}}", nil, []Output{raw, sbRaw, iso, kernel, initramfs, installer}, ""},
		{"customization: {diskImage: {sectorSize: 512}}", nil, []Output{raw, iso}, ""},
		{"customization: {diskImage: {sectorSize: 2048}}", nil, []Output{raw, sbRaw}, ""},
		{"customization: {diskImage: {sectorSize: 3}}", []Output{raw, sbRaw}, []Output{iso, kernel, initramfs, installer, sbUKI}, "customization.diskImage.sectorSize 3"},
		{"customization: {diskImage: {sectorSize: 8192}}", []Output{raw}, []Output{iso}, "customization.diskImage.sectorSize 8192"},
		{"customization: {secureboot: {includeWellKnownCertificates: true}}", nil, []Output{sbISO, sbRaw, sbUKI, iso, raw, kernel}, ""},
		{"customization: {secureboot: {enrollKeys: sometimes}}", []Output{sbISO, sbRaw}, []Output{iso, raw, sbUKI}, `invalid secureboot enrollKeys value "sometimes"`},
		{"customization: {secureboot: {enrollKeys: if-safe}}", nil, []Output{sbISO, sbRaw}, ""},
		{"customization: {extraKernelArgs: [\"a\\nlinux /x\"]}", []Output{cmdline, iso, raw, installer, sbUKI}, []Output{kernel, initramfs}, "customization.extraKernelArgs"},
		{"customization: {extraKernelArgs: [\"a b\", ключ=значение]}", nil, []Output{cmdline, iso, raw, installer}, ""},
	} {
		sch, err := schematic.Parse([]byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range c.refused {
			if err := Refusal(sch, o); err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s for %+v: %v, want %q", c.doc, o, err, c.says)
			}
		}
		for _, o := range c.allowed {
			if err := Refusal(sch, o); err != nil {
				t.Errorf("%s for %+v: %v", c.doc, o, err)
			}
		}
	}
}

// TestLoaderConf: secureboot.enrollKeys is systemd-boot's
// secure-boot-enroll; without it the media force enrolment.
func TestLoaderConf(t *testing.T) {
	for _, c := range []struct {
		auth         bool
		enroll, want string
	}{
		{true, "", "timeout 0\nsecure-boot-enroll force\n"},
		{true, "if-safe", "timeout 0\nsecure-boot-enroll if-safe\n"},
		{true, "off", "timeout 0\nsecure-boot-enroll off\n"},
		{false, "force", "timeout 0\n"},
	} {
		if got := loaderConf(c.auth, c.enroll); got != c.want {
			t.Errorf("%v %q: %q, want %q", c.auth, c.enroll, got, c.want)
		}
	}
}
