// Package target is what the builder knows of each target architecture, as
// data: its names in RPM, Go/OCI and UEFI, its ELF machine and dynamic
// loaders, and how qemu boots it. Code asks this table instead of testing
// architecture names, so a new architecture is a new row.
package target

import (
	"debug/elf"
	"fmt"
	"strings"
)

// Arch describes one target architecture.
type Arch struct {
	// RPM is the name in RPM headers, lock files and specs: x86_64.
	RPM string
	// OCI is the architecture of OCI platforms and GOARCH: amd64.
	OCI string
	// ELF is the e_machine of its executables, libraries and modules;
	// ELFCompat the others its trees may hold (32-bit compatibility
	// libraries: i386 beside x86_64, 32-bit ARM beside aarch64).
	ELF       elf.Machine
	ELFCompat []elf.Machine
	// EFI is the UEFI short name: x64 (BOOTX64.EFI, linuxx64.efi.stub).
	EFI string
	// Loaders are the dynamic loaders its ELF executables may name
	// (PT_INTERP), as /lib and /usr/lib paths.
	Loaders []string
	// QEMU says how qemu boots it.
	QEMU QEMU
}

// QEMU is how a virtual machine of the architecture is started.
type QEMU struct {
	Binary  string // qemu-system-x86_64
	Machine string // -M
	CPU     string // -cpu under TCG
	Console string // the kernel's serial console device
}

// table lists the architectures the builder targets.
var table = []Arch{
	{RPM: "x86_64", OCI: "amd64", ELF: elf.EM_X86_64, ELFCompat: []elf.Machine{elf.EM_386}, EFI: "x64",
		Loaders: []string{"/lib64/ld-linux-x86-64.so.2", "/usr/lib64/ld-linux-x86-64.so.2"},
		QEMU:    QEMU{Binary: "qemu-system-x86_64", Machine: "q35", CPU: "max", Console: "ttyS0"}},
	{RPM: "aarch64", OCI: "arm64", ELF: elf.EM_AARCH64, ELFCompat: []elf.Machine{elf.EM_ARM}, EFI: "aa64",
		Loaders: []string{"/lib/ld-linux-aarch64.so.1", "/usr/lib/ld-linux-aarch64.so.1"},
		QEMU:    QEMU{Binary: "qemu-system-aarch64", Machine: "virt", CPU: "max", Console: "ttyAMA0"}},
}

// Lookup finds an architecture by its RPM or OCI name.
func Lookup(name string) (Arch, error) {
	for _, a := range table {
		if a.RPM == name || a.OCI == name {
			return a, nil
		}
	}
	return Arch{}, fmt.Errorf("architecture %q is not one the builder targets (%s)", name, strings.Join(Names(), ", "))
}

// Names are the RPM names of the targeted architectures.
func Names() []string {
	var n []string
	for _, a := range table {
		n = append(n, a.RPM)
	}
	return n
}

// Machines are the ELF machines its trees may hold: its own and the
// compatible ones.
func (a Arch) Machines() []elf.Machine { return append([]elf.Machine{a.ELF}, a.ELFCompat...) }

// EFIBootFile is the ESP's default boot file: EFI/BOOT/BOOTX64.EFI.
func (a Arch) EFIBootFile() string { return "EFI/BOOT/BOOT" + strings.ToUpper(a.EFI) + ".EFI" }

// OCIName maps an RPM architecture name to OCI's (other names, noarch or
// i586 say, map to themselves or their OCI name).
func OCIName(rpm string) string {
	if a, err := Lookup(rpm); err == nil {
		return a.OCI
	}
	switch rpm {
	case "i586", "i686":
		return "386"
	}
	return rpm
}
