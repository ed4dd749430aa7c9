package target

import (
	"debug/elf"
	"testing"
)

func TestLookup(t *testing.T) {
	for name, want := range map[string]string{"x86_64": "x64", "amd64": "x64", "aarch64": "aa64", "arm64": "aa64"} {
		a, err := Lookup(name)
		if err != nil || a.EFI != want {
			t.Errorf("%s: %+v %v", name, a, err)
		}
	}
	if a, _ := Lookup("aarch64"); a.EFIBootFile() != "EFI/BOOT/BOOTAA64.EFI" || a.ELF != elf.EM_AARCH64 || a.QEMU.Console != "ttyAMA0" {
		t.Errorf("aarch64: %+v %s", a, a.EFIBootFile())
	}
	if _, err := Lookup("riscv64"); err == nil {
		t.Error("riscv64 found")
	}
	for rpm, oci := range map[string]string{"x86_64": "amd64", "aarch64": "arm64", "i686": "386", "noarch": "noarch"} {
		if got := OCIName(rpm); got != oci {
			t.Errorf("OCIName(%s) = %s", rpm, got)
		}
	}
}
