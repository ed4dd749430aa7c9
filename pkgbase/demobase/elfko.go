package demobase

import (
	"debug/elf"
	"encoding/binary"
	"strings"
)

// kmod describes a demo kernel module: a real, minimal ELF relocatable
// object with a .modinfo section and a symbol table, so module tools and
// the builder's depmod read it like a real one (it cannot be loaded).
type kmod struct {
	name    string
	kver    string   // for vermagic
	aliases []string // modalias patterns
	softdep string   // e.g. "pre: crc32c"
	exports []string // symbols it exports (listed in __ksymtab_strings)
	needs   []string // undefined symbols it uses from other modules
	license string
}

// elf builds the object file. Everything is fixed, so the bytes are too.
func (m kmod) elf() []byte {
	lic := m.license
	if lic == "" {
		lic = "GPL"
	}
	var info []string
	info = append(info, "license="+lic, "description=NodeForge demo stand-in for "+m.name+"; not loadable")
	for _, a := range m.aliases {
		info = append(info, "alias="+a)
	}
	if m.softdep != "" {
		info = append(info, "softdep="+m.softdep)
	}
	info = append(info, "name="+m.name, "vermagic="+m.kver+" SMP preempt mod_unload modversions ")
	modinfo := []byte(strings.Join(info, "\x00") + "\x00")

	// String and symbol tables: null symbol, the module's own marker, then
	// exports (defined in .modinfo's section for want of code) and needs
	// (undefined).
	strtab := []byte{0}
	addStr := func(s string) uint32 {
		off := uint32(len(strtab))
		strtab = append(strtab, s...)
		strtab = append(strtab, 0)
		return off
	}
	sym := func(name uint32, bind, typ byte, shndx uint16) []byte {
		b := make([]byte, 24)
		binary.LittleEndian.PutUint32(b[0:], name)
		b[4] = bind<<4 | typ
		binary.LittleEndian.PutUint16(b[6:], shndx)
		return b
	}
	symtab := make([]byte, 24) // STN_UNDEF
	for _, e := range m.exports {
		symtab = append(symtab, sym(addStr(e), 1, 2, 1)...)
	}
	for _, n := range m.needs {
		symtab = append(symtab, sym(addStr(n), 1, 0, 0)...)
	}
	var ksymtab []byte
	for _, e := range m.exports {
		ksymtab = append(append(ksymtab, e...), 0)
	}
	shstr := []byte("\x00.modinfo\x00.symtab\x00.strtab\x00.shstrtab\x00__ksymtab_strings\x00")
	names := map[string]uint32{".modinfo": 1, ".symtab": 10, ".strtab": 18, ".shstrtab": 26, "__ksymtab_strings": 36}

	const ehsize, shentsize = 64, 64
	align := func(b []byte, n int) []byte {
		for len(b)%n != 0 {
			b = append(b, 0)
		}
		return b
	}
	body := make([]byte, ehsize)
	offModinfo := len(body)
	body = append(body, modinfo...)
	body = align(body, 8)
	offSymtab := len(body)
	body = append(body, symtab...)
	offStrtab := len(body)
	body = append(body, strtab...)
	offShstr := len(body)
	body = append(body, shstr...)
	offKsym := len(body)
	body = append(body, ksymtab...)
	body = align(body, 8)
	shoff := len(body)

	// A section header as debug/elf lays it out (Elf64_Shdr).
	sh := func(h elf.Section64) []byte {
		b, err := binary.Append(nil, binary.LittleEndian, h)
		if err != nil {
			panic(err) // a fixed-size struct always encodes
		}
		return b
	}
	body = append(body, make([]byte, shentsize)...) // SHN_UNDEF
	body = append(body, sh(elf.Section64{Name: names[".modinfo"], Type: 1, Flags: 2, Off: uint64(offModinfo), Size: uint64(len(modinfo)), Link: 0, Info: 0, Addralign: 1, Entsize: 0})...)
	body = append(body, sh(elf.Section64{Name: names[".symtab"], Type: 2, Flags: 0, Off: uint64(offSymtab), Size: uint64(len(symtab)), Link: 3, Info: 1, Addralign: 8, Entsize: 24})...)
	body = append(body, sh(elf.Section64{Name: names[".strtab"], Type: 3, Flags: 0, Off: uint64(offStrtab), Size: uint64(len(strtab)), Link: 0, Info: 0, Addralign: 1, Entsize: 0})...)
	body = append(body, sh(elf.Section64{Name: names[".shstrtab"], Type: 3, Flags: 0, Off: uint64(offShstr), Size: uint64(len(shstr)), Link: 0, Info: 0, Addralign: 1, Entsize: 0})...)
	body = append(body, sh(elf.Section64{Name: names["__ksymtab_strings"], Type: 1, Flags: 2, Off: uint64(offKsym), Size: uint64(len(ksymtab)), Link: 0, Info: 0, Addralign: 1, Entsize: 0})...)

	h := body[:ehsize]
	copy(h, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	binary.LittleEndian.PutUint16(h[16:], 1)  // ET_REL
	binary.LittleEndian.PutUint16(h[18:], 62) // EM_X86_64
	binary.LittleEndian.PutUint32(h[20:], 1)
	binary.LittleEndian.PutUint64(h[40:], uint64(shoff))
	binary.LittleEndian.PutUint16(h[52:], ehsize)
	binary.LittleEndian.PutUint16(h[58:], shentsize)
	binary.LittleEndian.PutUint16(h[60:], 6) // sections
	binary.LittleEndian.PutUint16(h[62:], 4) // .shstrtab
	return body
}
