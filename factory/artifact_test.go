package factory

import (
	"regexp"
	"testing"
)

func TestParseArtifact(t *testing.T) {
	for name, want := range map[string]Artifact{
		"kernel-amd64":                        {kind: "kernel", Arch: "amd64"},
		"initramfs-x86_64.xz":                 {kind: "initramfs", Arch: "x86_64"},
		"cmdline-nocloud-arm64":               {kind: "cmdline", platform: "nocloud", Arch: "arm64"},
		"metal-amd64.iso":                     {kind: "disk", platform: "metal", Arch: "amd64", format: "iso"},
		"aws-amd64.raw.xz":                    {kind: "disk", platform: "aws", Arch: "amd64", format: "raw", compression: "xz"},
		"gcp-amd64.raw.tar.gz":                {kind: "disk", platform: "gcp", Arch: "amd64", format: "raw.tar.gz"},
		"azure-x86_64.vhd.zst":                {kind: "disk", platform: "azure", Arch: "x86_64", format: "vhd", compression: "zst"},
		"yandex-aarch64.qcow2":                {kind: "disk", platform: "yandex", Arch: "aarch64", format: "qcow2"},
		"metal-amd64-secureboot.iso":          {kind: "disk", platform: "metal", Arch: "amd64", format: "iso", SecureBoot: true},
		"nocloud-amd64-secureboot.raw.xz":     {kind: "disk", platform: "nocloud", Arch: "amd64", format: "raw", compression: "xz", SecureBoot: true},
		"metal-x86_64-secureboot-uki.efi":     {kind: "uki", platform: "metal", Arch: "x86_64", SecureBoot: true},
		"metal-amd64-uki.efi":                 {kind: "uki", platform: "metal", Arch: "amd64"},
		"vmware-amd64.ova":                    {kind: "disk", platform: "vmware", Arch: "amd64", format: "ova"},
		"akamai-amd64.raw.gz":                 {kind: "disk", platform: "akamai", Arch: "amd64", format: "raw", compression: "gz"},
		"exoscale-arm64.qcow2.zst":            {kind: "disk", platform: "exoscale", Arch: "arm64", format: "qcow2", compression: "zst"},
		"installer-amd64.tar":                 {kind: "installer", Arch: "amd64"},
		"metal-installer-amd64.tar":           {kind: "installer", platform: "metal", Arch: "amd64"},
		"installer-arm64-secureboot.tar":      {kind: "installer", Arch: "arm64", SecureBoot: true},
		"aws-installer-x86_64-secureboot.tar": {kind: "installer", platform: "aws", Arch: "x86_64", SecureBoot: true},
		// Talos's two names that are not one lower-case word.
		"digital-ocean-amd64.raw.gz":        {kind: "disk", platform: "digital-ocean", Arch: "amd64", format: "raw", compression: "gz"},
		"cmdline-digital-ocean-amd64":       {kind: "cmdline", platform: "digital-ocean", Arch: "amd64"},
		"digital-ocean-installer-amd64.tar": {kind: "installer", platform: "digital-ocean", Arch: "amd64"},
		"equinixMetal-arm64.raw.xz":         {kind: "disk", platform: "equinixMetal", Arch: "arm64", format: "raw", compression: "xz"},
		"cmdline-equinixMetal-amd64":        {kind: "cmdline", platform: "equinixMetal", Arch: "amd64"},
	} {
		got, err := ParseArtifact(name)
		want.name = name
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", name, got, err, want)
		}
	}
	for _, bad := range []string{"", "kernel", "kernel-", "../kernel-amd64", "kernel-amd64/..", "metal-amd64.iso.bz2", "metal-amd64.vmdk",
		"metal-amd64.raw.tar.gz.xz", "Metal-amd64.iso", "initramfs-amd64", "cmdline-metal", "digital-amd64-ocean.raw.gz", "equinixMetal-installer-amd64.tar",
		"metal-amd64-secureboot-uki.efi.xz", "metal-amd64-secureboot", "installer-amd64.tar.gz", "installer.tar", "-installer-amd64.tar"} {
		if a, err := ParseArtifact(bad); err == nil {
			t.Errorf("%q accepted: %+v", bad, a)
		}
	}
}

var safeName = regexp.MustCompile(`^[a-z0-9_.-]+$`)

// FuzzParseArtifact: no name panics the parser, and what it accepts maps
// to a file name of safe characters that names the same artifact again.
func FuzzParseArtifact(f *testing.F) {
	for _, s := range []string{"kernel-amd64", "initramfs-x86_64.xz", "cmdline-metal-amd64", "metal-amd64.iso.zst", "gcp-amd64.raw.tar.gz", "../../etc/passwd", "metal-amd64.iso\x00", "azure-amd64.vhd.xz",
		"metal-installer-amd64-secureboot.tar", "vmware-arm64.ova.gz", "metal-amd64-uki.efi"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		a, err := ParseArtifact(name)
		if err != nil {
			return
		}
		n := a.FileName("x86_64")
		if !safeName.MatchString(n) || !safeName.MatchString(name) {
			t.Fatalf("%q accepted, composes %q", name, n)
		}
		b, err := ParseArtifact(n)
		if err != nil || b.kind != a.kind || b.platform != a.platform || b.format != a.format || b.compression != a.compression || b.SecureBoot != a.SecureBoot {
			t.Fatalf("%q -> %q -> %+v %v", name, n, b, err)
		}
	})
}
