package rootfs

import (
	"debug/elf"
	"errors"
	"testing"

	"github.com/nodeforge/builder/api/report"
)

// TestCheckMachines: executables, libraries and modules of another
// machine are refused, named with their package; compatible 32-bit
// libraries, firmware, data and relocatable objects that are not modules
// pass.
func TestCheckMachines(t *testing.T) {
	arm := []elf.Machine{elf.EM_AARCH64, elf.EM_ARM}
	add := func(tr *Tree, p string, data []byte, pkg string) {
		t.Helper()
		if err := tr.Add(&Node{Path: p, Kind: KindFile, Mode: 0o755, User: "root", Group: "root", Data: data, Origin: report.Origin{Package: pkg}}); err != nil {
			t.Fatal(err)
		}
	}
	rel := func(m elf.Machine) []byte {
		b := craftSO(elf.ELFCLASS64, m, "x.ko")
		b[16] = byte(elf.ET_REL)
		return b
	}
	tr := New()
	add(tr, "/usr/lib64/liba.so.1", craftSO(elf.ELFCLASS64, elf.EM_AARCH64, "liba.so.1"), "liba-1-1.aarch64")
	add(tr, "/usr/lib/libhf.so.1", craftSO(elf.ELFCLASS32, elf.EM_ARM, "libhf.so.1"), "libhf-1-1.armh")
	add(tr, "/usr/lib/firmware/dsp.elf", craftSO(elf.ELFCLASS32, elf.EM_XTENSA, ""), "firmware-1-1.noarch")
	add(tr, "/usr/share/doc/x86.o", rel(elf.EM_X86_64), "doc-1-1.noarch")
	add(tr, "/lib/modules/6.1.0-57-arm64/kernel/a.ko", rel(elf.EM_AARCH64), "kernel-1-1.aarch64")
	add(tr, "/usr/bin/script", []byte("#!/bin/sh\necho hi\n"), "s-1-1.noarch")
	if err := tr.CheckMachines(arm); err != nil {
		t.Fatalf("a clean aarch64 tree: %v", err)
	}
	for name, c := range map[string]struct {
		path string
		data []byte
	}{
		"x86-64 executable":   {"/usr/bin/tool", craftSO(elf.ELFCLASS64, elf.EM_X86_64, "")},
		"x86-64 module":       {"/lib/modules/6.1.0-57-arm64/kernel/b.ko", rel(elf.EM_X86_64)},
		"ppc library (no so)": {"/usr/libexec/helper", craftSO(elf.ELFCLASS64, elf.EM_PPC64, "")},
	} {
		bad := New()
		add(bad, c.path, c.data, "wrong-1-1.aarch64")
		var wm *WrongMachineError
		if err := bad.CheckMachines(arm); !errors.As(err, &wm) || wm.Path != c.path || wm.Package != "wrong-1-1.aarch64" {
			t.Errorf("%s: %v", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
