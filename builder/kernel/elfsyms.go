package kernel

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// elfImage gives raw access to a module's sections the way libkmod
// (libkmod-elf.c) reads them: the first section of a given name, its bytes
// as stored (never decompressed), sections lying outside the file skipped.
type elfImage struct {
	data    []byte
	f       *elf.File
	is64    bool
	bo      binary.ByteOrder
	machine elf.Machine
}

func openELF(name string, data []byte) (*elfImage, error) {
	f, err := newELFFile(data)
	if err != nil {
		return nil, fmt.Errorf("kernel: %s: not a valid ELF file: %w", name, err)
	}
	m := &elfImage{data: data, f: f, is64: f.Class == elf.ELFCLASS64, bo: f.ByteOrder, machine: f.Machine}
	// libkmod insists on the exact section header size and on a section
	// name table that ends in NUL; debug/elf is more lenient.
	shentOff, want := 46, 40
	if m.is64 {
		shentOff, want = 58, 64
	}
	if len(data) < shentOff+6 {
		return nil, fmt.Errorf("kernel: %s: truncated ELF header", name)
	}
	if got := int(m.bo.Uint16(data[shentOff:])); got != want {
		return nil, fmt.Errorf("kernel: %s: section header size %d, want %d", name, got, want)
	}
	shstrndx := int(m.bo.Uint16(data[shentOff+4:]))
	if shstrndx == 0 || shstrndx >= len(f.Sections) {
		return nil, fmt.Errorf("kernel: %s: no section name table", name)
	}
	names, ok := m.raw(f.Sections[shstrndx])
	if !ok || len(names) == 0 || names[len(names)-1] != 0 {
		return nil, fmt.Errorf("kernel: %s: section name table is out of bounds or not NUL-terminated", name)
	}
	return m, nil
}

// newELFFile is elf.NewFile made safe: debug/elf is not hardened against
// hostile input, and a panic in it must not take a build down. Only this
// call is guarded, so the fuzzer still sees panics in our own code.
func newELFFile(data []byte) (f *elf.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("debug/elf: %v", r)
		}
	}()
	return elf.NewFile(bytes.NewReader(data))
}

// raw returns a section's stored bytes, or false if they lie outside the file.
func (m *elfImage) raw(s *elf.Section) ([]byte, bool) {
	end := s.Offset + s.FileSize
	if end < s.Offset || end > uint64(len(m.data)) {
		return nil, false
	}
	return m.data[s.Offset:end], true
}

// section returns the first in-bounds section called name (index 0 is
// never a real section).
func (m *elfImage) section(name string) ([]byte, bool) {
	for i, s := range m.f.Sections {
		if i == 0 || s.Name != name {
			continue
		}
		if b, ok := m.raw(s); ok {
			return b, true
		}
	}
	return nil, false
}

// cstr reads a NUL-terminated string at off; the end of b terminates it too.
func cstr(b []byte, off uint64) string {
	if off >= uint64(len(b)) {
		return ""
	}
	b = b[off:]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// nulStrings splits a string section as kmod_elf_get_strings does: leading
// NUL padding skipped, a single remaining byte ignored, runs of NULs
// separating strings, a last unterminated string kept.
func nulStrings(b []byte) []string {
	for len(b) > 1 && b[0] == 0 {
		b = b[1:]
	}
	if len(b) <= 1 {
		return nil
	}
	var out []string
	for _, s := range bytes.Split(b, []byte{0}) {
		if len(s) > 0 {
			out = append(out, string(s))
		}
	}
	return out
}

// sym is one symbol table entry, the fields kmod uses.
type sym struct {
	name  uint32
	info  uint8
	shndx uint16
}

// symbols returns the entries of .symtab after the null entry, and
// .strtab; ok is false when libkmod would give up on the table.
func (m *elfImage) symbols() (syms []sym, strtab []byte, ok bool) {
	strtab, ok1 := m.section(".strtab")
	symtab, ok2 := m.section(".symtab")
	if !ok1 || !ok2 {
		return nil, nil, false
	}
	size := 16
	if m.is64 {
		size = 24
	}
	if len(symtab)%size != 0 {
		return nil, nil, false
	}
	n := len(symtab) / size
	if n > 0 {
		syms = make([]sym, 0, n-1)
	}
	for i := 1; i < n; i++ {
		e := symtab[i*size:]
		s := sym{name: m.bo.Uint32(e)}
		if m.is64 {
			s.info, s.shndx = e[4], m.bo.Uint16(e[6:])
		} else {
			s.info, s.shndx = e[12], m.bo.Uint16(e[14:])
		}
		syms = append(syms, s)
	}
	return syms, strtab, true
}

// exports lists the symbols a module exports, as kmod_elf_get_symbols
// finds them: the names of __crc_* symbols (kernels with modversions), or
// else every string of __ksymtab_strings.
func (m *elfImage) exports() []string {
	const crc = "__crc_"
	if syms, strtab, ok := m.symbols(); ok {
		var out []string
		valid := true
		for _, s := range syms {
			if uint64(s.name) >= uint64(len(strtab)) {
				valid = false
				break
			}
		}
		if valid {
			for _, s := range syms {
				if n := cstr(strtab, uint64(s.name)); len(n) >= len(crc) && n[:len(crc)] == crc {
					out = append(out, n[len(crc):])
				}
			}
			if len(out) > 0 {
				return out
			}
		}
	}
	b, _ := m.section("__ksymtab_strings")
	return nulStrings(b)
}

// undefined lists the symbols a module needs, as
// kmod_elf_get_dependency_symbols does: undefined .symtab entries in table
// order, then __versions entries no undefined symbol referred to (such as
// module_layout). A damaged table yields none, as in kmod.
func (m *elfImage) undefined() []string {
	syms, strtab, ok := m.symbols()
	if !ok {
		return nil
	}
	versions, _ := m.section("__versions")
	crclen := 4
	if m.is64 {
		crclen = 8
	}
	const verlen = 64
	if len(versions)%verlen != 0 {
		versions = nil
	}
	nver := len(versions) / verlen
	verNames := make([]string, nver)
	first := make(map[string]int, nver) // kmod marks the first match only
	for i := range verNames {
		verNames[i] = cstr(versions[i*verlen+crclen:(i+1)*verlen], 0)
		if _, dup := first[verNames[i]]; !dup {
			first[verNames[i]] = i
		}
	}
	visited := make([]bool, nver)
	sparc := m.machine == elf.EM_SPARC || m.machine == elf.EM_SPARCV9
	var out []string
	for _, s := range syms {
		if s.shndx != uint16(elf.SHN_UNDEF) {
			continue
		}
		if sparc && s.info&0xf == 13 { // STT_REGISTER: not really undefined
			continue
		}
		if uint64(s.name) >= uint64(len(strtab)) {
			return nil
		}
		n := cstr(strtab, uint64(s.name))
		if n == "" {
			continue
		}
		out = append(out, n)
		if i, ok := first[n]; ok {
			visited[i] = true
		}
	}
	for i, n := range verNames {
		if !visited[i] && n != "" {
			out = append(out, n)
		}
	}
	return out
}
