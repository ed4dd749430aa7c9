package rootfs

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// WrongMachineError is a file built for another machine than the tree's.
type WrongMachineError struct {
	Path, Package string
	Machine       elf.Machine
	Want          []elf.Machine
}

func (e *WrongMachineError) Error() string {
	var want []string
	for _, m := range e.Want {
		want = append(want, m.String())
	}
	return fmt.Sprintf("%s (package %s) is built for %s, not for this architecture (%s): a package of another architecture in the component?",
		e.Path, e.Package, e.Machine, strings.Join(want, ", "))
}

// CheckMachines refuses the first file, in path order, that is code for a
// machine outside allowed: ELF executables and shared objects (ET_EXEC,
// ET_DYN) and kernel modules (ET_REL named *.ko). Firmware is left alone:
// it runs on devices, not on the CPU. Compressed modules are checked by
// the module indexer, which reads them.
func (t *Tree) CheckMachines(allowed []elf.Machine) error {
	for _, p := range t.Paths() {
		n := t.nodes[p]
		if n.Kind != KindFile || len(n.Data) < 20 || string(n.Data[:4]) != elf.ELFMAG || isFirmware(p) {
			continue
		}
		var bo binary.ByteOrder = binary.LittleEndian
		if elf.Data(n.Data[elf.EI_DATA]) == elf.ELFDATA2MSB {
			bo = binary.BigEndian
		}
		typ, mach := elf.Type(bo.Uint16(n.Data[16:])), elf.Machine(bo.Uint16(n.Data[18:]))
		code := typ == elf.ET_EXEC || typ == elf.ET_DYN || typ == elf.ET_REL && strings.HasSuffix(p, ".ko")
		if code && !slices.Contains(allowed, mach) {
			return &WrongMachineError{Path: p, Package: n.Origin.Package, Machine: mach, Want: allowed}
		}
	}
	return nil
}

// isFirmware says whether p is below a firmware directory.
func isFirmware(p string) bool {
	for _, d := range []string{"/lib/firmware/", "/usr/lib/firmware/"} {
		if strings.HasPrefix(p, d) {
			return true
		}
	}
	return false
}
