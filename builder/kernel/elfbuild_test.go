package kernel

import (
	"encoding/binary"
	"strings"
)

// Tiny synthetic kernel modules for unit tests and fuzz seeds: a
// relocatable ELF with just the sections depmod reads.

type testSym struct {
	name  string
	shndx uint16 // 0: undefined
	info  uint8  // bind<<4 | type
}

type testSection struct {
	name string
	typ  uint32
	data []byte
	link uint32
}

type testModule struct {
	is64      bool
	bigEndian bool
	modinfo   []string // key=value entries; nil: no .modinfo section
	syms      []testSym
	noSymtab  bool
	ksymstrs  []string // __ksymtab_strings
	versions  []string // __versions names
	extra     []testSection
}

// build lays out: header, section data, .shstrtab, section headers.
func (m testModule) build() []byte {
	var bo binary.ByteOrder = binary.LittleEndian
	if m.bigEndian {
		bo = binary.BigEndian
	}
	secs := []testSection{{}}
	if m.modinfo != nil {
		secs = append(secs, testSection{name: ".modinfo", typ: 1, data: []byte(strings.Join(m.modinfo, "\x00") + "\x00")})
	}
	if m.ksymstrs != nil {
		secs = append(secs, testSection{name: "__ksymtab_strings", typ: 1, data: []byte(strings.Join(m.ksymstrs, "\x00") + "\x00")})
	}
	if m.versions != nil {
		crclen := 4
		if m.is64 {
			crclen = 8
		}
		var v []byte
		for i, n := range m.versions {
			e := make([]byte, 64)
			if crclen == 8 {
				bo.PutUint64(e, uint64(0x1000+i))
			} else {
				bo.PutUint32(e, uint32(0x1000+i))
			}
			copy(e[crclen:], n)
			v = append(v, e...)
		}
		secs = append(secs, testSection{name: "__versions", typ: 1, data: v})
	}
	if !m.noSymtab {
		strtab := []byte{0}
		entsize := 16
		if m.is64 {
			entsize = 24
		}
		symtab := make([]byte, entsize) // the null symbol
		for _, s := range m.syms {
			e := make([]byte, entsize)
			bo.PutUint32(e, uint32(len(strtab)))
			if m.is64 {
				e[4] = s.info
				bo.PutUint16(e[6:], s.shndx)
			} else {
				e[12] = s.info
				bo.PutUint16(e[14:], s.shndx)
			}
			strtab = append(append(strtab, s.name...), 0)
			symtab = append(symtab, e...)
		}
		secs = append(secs, testSection{name: ".symtab", typ: 2, data: symtab, link: uint32(len(secs) + 1)},
			testSection{name: ".strtab", typ: 3, data: strtab})
	}
	secs = append(secs, m.extra...)
	shstr := []byte{0}
	nameOff := make([]uint32, len(secs)+1)
	for i, s := range secs {
		if i > 0 {
			nameOff[i] = uint32(len(shstr))
			shstr = append(append(shstr, s.name...), 0)
		}
	}
	nameOff[len(secs)] = uint32(len(shstr))
	shstr = append(shstr, ".shstrtab\x00"...)
	secs = append(secs, testSection{name: ".shstrtab", typ: 3, data: shstr})

	ehsize, shentsize := 52, 40
	if m.is64 {
		ehsize, shentsize = 64, 64
	}
	out := make([]byte, ehsize)
	offs := make([]int, len(secs))
	for i, s := range secs {
		if i > 0 {
			offs[i] = len(out)
			out = append(out, s.data...)
		}
	}
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	shoff := len(out)
	for i, s := range secs {
		h := make([]byte, shentsize)
		if i > 0 {
			bo.PutUint32(h[0:], nameOff[i])
			bo.PutUint32(h[4:], s.typ)
			if m.is64 {
				bo.PutUint64(h[24:], uint64(offs[i]))
				bo.PutUint64(h[32:], uint64(len(s.data)))
				bo.PutUint32(h[40:], s.link)
				bo.PutUint64(h[48:], 1)
			} else {
				bo.PutUint32(h[16:], uint32(offs[i]))
				bo.PutUint32(h[20:], uint32(len(s.data)))
				bo.PutUint32(h[24:], s.link)
				bo.PutUint32(h[32:], 1)
			}
		}
		out = append(out, h...)
	}
	copy(out, "\x7fELF")
	out[4], out[5], out[6] = 1, 1, 1 // ELFCLASS32, LSB, EV_CURRENT
	if m.is64 {
		out[4] = 2
	}
	if m.bigEndian {
		out[5] = 2
	}
	bo.PutUint16(out[16:], 1)  // ET_REL
	bo.PutUint16(out[18:], 62) // EM_X86_64
	bo.PutUint32(out[20:], 1)
	if m.is64 {
		bo.PutUint64(out[40:], uint64(shoff))
		bo.PutUint16(out[52:], uint16(ehsize))
		bo.PutUint16(out[58:], uint16(shentsize))
		bo.PutUint16(out[60:], uint16(len(secs)))
		bo.PutUint16(out[62:], uint16(len(secs)-1))
	} else {
		bo.PutUint32(out[32:], uint32(shoff))
		bo.PutUint16(out[40:], uint16(ehsize))
		bo.PutUint16(out[46:], uint16(shentsize))
		bo.PutUint16(out[48:], uint16(len(secs)))
		bo.PutUint16(out[50:], uint16(len(secs)-1))
	}
	return out
}

// exporter is a module exporting syms the modversions way (__crc_*).
func exporter(name string, needs []string, exports ...string) testModule {
	m := testModule{is64: true, modinfo: []string{"license=GPL", "name=" + name, "vermagic=6.1.0 SMP mod_unload"}}
	for _, e := range exports {
		m.syms = append(m.syms, testSym{name: "__crc_" + e, shndx: 0xfff1, info: 0x10})
	}
	for _, n := range needs {
		m.syms = append(m.syms, testSym{name: n, info: 0x10})
	}
	return m
}
