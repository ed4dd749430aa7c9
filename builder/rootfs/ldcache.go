package rootfs

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
)

// This file writes /etc/ld.so.cache the way glibc's ldconfig (2.36,
// elf/ldconfig.c, readlib.c, readelflib.c, cache.c, stringtable.c) does
// when run inside the image as `ldconfig -X`: same directories, same
// libraries, same entry order and the same bytes, minus the generator
// string. Not covered, as in glibc >= 2.37: legacy hwcap subdirectories
// (tls/, x86_64/, haswell/ ...); and not covered: glibc-hwcaps/
// subdirectories and a.out (libc4) libraries. ld.so still finds libraries
// there through its own directory search.

// LdCacheOptions selects the target of LdSoCache.
type LdCacheOptions struct {
	Arch string // rpm arch: x86_64, aarch64, i586 (i386..i686)
	// Generator is the text of the cache's generator extension, shown by
	// `ldconfig -p`; "" means DefaultLdCacheGenerator.
	Generator string
}

// DefaultLdCacheGenerator names this writer in the cache it writes.
const DefaultLdCacheGenerator = "nodeforge builder (ldconfig-compatible, glibc-ld.so.cache1.1)"

// ldconfig's library flags (sysdeps/generic/ldconfig.h).
const (
	flagAny          = -1
	flagLibc4        = 0x0000
	flagELF          = 0x0001
	flagELFLibc5     = 0x0002
	flagELFLibc6     = 0x0003
	flagX8664Lib64   = 0x0300
	flagX8664LibX32  = 0x0800
	flagARMLibHF     = 0x0900
	flagAArch64Lib64 = 0x0a00
	flagARMLibSF     = 0x0b00
)

// ldArch is what differs between ldconfig builds.
type ldArch struct {
	// systemDirs: add_system_dir(SLIBDIR), add_system_dir(LIBDIR) for the
	// usual RPM layout (slibdir /lib64, libdir /usr/lib64; /lib, /usr/lib
	// on i386), expanded as sysdeps/unix/sysv/linux/*/dl-cache.h does.
	systemDirs []string
	// signedChar: _dl_cache_libcmp compares C chars, signed on x86 and
	// unsigned on aarch64; ld.so binary-searches with the same order.
	signedChar bool
	minSize    int // max(sizeof(struct exec), sizeof(ElfW(Ehdr)))
	interps    map[string]int
	knownLibs  map[string]int
	// fileFlag is process_elf_file: the class to parse (32 or 64) and the
	// flag that replaces the parsed one (0: keep it), or ok=false.
	fileFlag func(class elf.Class, mach elf.Machine, eflags uint32) (bits, flag int, ok bool)
}

func ldArchFor(arch string) (*ldArch, error) {
	libc6 := map[string]int{"libc.so.6": flagELFLibc6, "libm.so.6": flagELFLibc6}
	switch arch {
	case "x86_64", "i386", "i486", "i586", "i686":
		a := &ldArch{
			systemDirs: []string{"/lib", "/lib64", "/libx32", "/usr/lib", "/usr/lib64", "/usr/libx32"},
			signedChar: true, minSize: 64, knownLibs: libc6,
			interps: map[string]int{"/lib/ld-linux-x86-64.so.2": flagELFLibc6, "/lib/ld-linux.so.2": flagELFLibc6,
				"/libx32/ld-linux-x32.so.2": flagELFLibc6, "/lib64/ld-linux-x86-64.so.2": flagELFLibc6},
			fileFlag: x86FileFlag,
		}
		if arch != "x86_64" {
			a.systemDirs = []string{"/lib", "/lib64", "/usr/lib", "/usr/lib64"}
			a.minSize = 52
			a.interps = map[string]int{"/lib/ld-linux.so.2": flagELFLibc6, "/lib/ld-linux.so.1": flagELFLibc5}
			a.knownLibs = map[string]int{"libc.so.6": flagELFLibc6, "libm.so.6": flagELFLibc6,
				"libc.so.5": flagELFLibc5, "libm.so.5": flagELFLibc5}
		}
		return a, nil
	case "aarch64":
		interps := map[string]int{}
		for _, s := range []string{"ld-linux-aarch64.so.1", "ld-linux-aarch64_be.so.1",
			"ld-linux-aarch64_ilp32.so.1", "ld-linux-aarch64_be_ilp32.so.1", "ld-linux.so.3", "ld-linux-armhf.so.3"} {
			interps["/lib/"+s] = flagELFLibc6
		}
		return &ldArch{
			systemDirs: []string{"/lib", "/lib64", "/libilp32", "/usr/lib", "/usr/lib64", "/usr/libilp32"},
			minSize:    64, interps: interps, knownLibs: libc6, fileFlag: armFileFlag,
		}, nil
	}
	return nil, fmt.Errorf("ld.so.cache: unsupported arch %q", arch)
}

// x86FileFlag is sysdeps/unix/sysv/linux/x86/readelflib.c.
func x86FileFlag(class elf.Class, mach elf.Machine, _ uint32) (int, int, bool) {
	bits := 64
	if class == elf.ELFCLASS32 {
		bits = 32
	}
	switch {
	case mach == elf.EM_X86_64 && class == elf.ELFCLASS64:
		return bits, flagX8664Lib64 | flagELFLibc6, true
	case mach == elf.EM_X86_64: // x32
		return bits, flagX8664LibX32 | flagELFLibc6, true
	case mach == elf.EM_386 && class == elf.ELFCLASS32:
		return bits, 0, true
	}
	return 0, 0, false
}

// armFileFlag is sysdeps/unix/sysv/linux/arm/readelflib.c, which checks
// no machine at all: aarch64 glibc's ldconfig caches any 64-bit ELF
// library as an AArch64 one (an x86-64 library too: judged so by arm64
// ldconfig itself), and any 32-bit one with its ARM ABI flag when its
// e_flags say EABI 5. A library of another machine never gets that far
// in a build: a component's files of the wrong machine are refused.
func armFileFlag(class elf.Class, _ elf.Machine, eflags uint32) (int, int, bool) {
	if class == elf.ELFCLASS64 {
		return 64, flagAArch64Lib64 | flagELFLibc6, true
	}
	if eflags&0xff000000 != 0x05000000 { // EF_ARM_EABI_VER5
		return 32, 0, true
	}
	switch {
	case eflags&0x400 != 0: // EF_ARM_ABI_FLOAT_HARD
		return 32, flagARMLibHF | flagELFLibc6, true
	case eflags&0x200 != 0: // EF_ARM_ABI_FLOAT_SOFT
		return 32, flagARMLibSF | flagELFLibc6, true
	}
	return 32, flagELFLibc6, true
}

// readLib is process_file + process_elf_file: the library's flag and
// DT_SONAME (hasSoname false when there is none). It walks the program
// headers like ldconfig does, not the section headers, so stripped or
// partly truncated files are judged alike; bytes past the end read as
// zero, as they do in ldconfig's mmap of the file.
func (a *ldArch) readLib(b []byte) (flag int, soname string, hasSoname, ok bool) {
	if len(b) < a.minSize || string(b[:4]) != elf.ELFMAG {
		return 0, "", false, false // too small, a.out, linker script, ...
	}
	le := binary.LittleEndian
	if elf.Type(le.Uint16(b[16:])) != elf.ET_DYN {
		return 0, "", false, false
	}
	class := elf.Class(b[elf.EI_CLASS])
	eflags := le.Uint32(b[36:]) // Elf32 e_flags: only 32-bit ARM needs it
	bits, fileFlag, ok := a.fileFlag(class, elf.Machine(le.Uint16(b[18:])), eflags)
	if !ok || (bits == 64) != (class == elf.ELFCLASS64) {
		return 0, "", false, false
	}
	im := &elfImage{b: b, size: uint64(len(b)), bits: bits, w: 4, dynsize: 8, mask: 0xffffffff}
	if bits == 64 {
		im.w, im.dynsize, im.mask = 8, 16, ^uint64(0)
	}
	flag, ok = im.programHeaders(a.interps)
	if !ok {
		return 0, "", false, false
	}
	strtab, ok := im.strtab()
	if !ok {
		return 0, "", false, false
	}
	for e := im.dynAddr; im.u(e, im.w) != uint64(elf.DT_NULL); e += im.dynsize {
		tag := elf.DynTag(im.u(e, im.w))
		if tag != elf.DT_NEEDED && tag != elf.DT_SONAME {
			continue
		}
		name := strtab + im.u(e+uint64(im.w), im.w)
		if name > im.size {
			return 0, "", false, false
		}
		if tag == elf.DT_NEEDED {
			if f, ok := a.knownLibs[im.cstr(name)]; ok && flag == flagELF {
				flag = f
			}
		} else {
			soname, hasSoname = im.cstr(name), true
		}
		if hasSoname && flag != flagELF {
			break
		}
	}
	if fileFlag != 0 {
		flag = fileFlag
	}
	return flag, soname, hasSoname, true
}

// elfImage reads an ELF file's program headers and dynamic section the
// way ldconfig reads its mmap: little-endian, zero past the end.
type elfImage struct {
	b       []byte
	size    uint64
	bits    int
	w       int    // word size: Off, Addr, Xword
	dynsize uint64 // size of a dynamic entry
	mask    uint64 // the address width
	loads   []elfSegment
	dynAddr uint64
	dynSize uint64
}

type elfSegment struct{ typ, off, vaddr, filesz uint64 }

// u reads n bytes at off, little-endian, zero past the end.
func (im *elfImage) u(off uint64, n int) uint64 {
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v <<= 8
		if o := off + uint64(i); o >= off && o < im.size {
			v |= uint64(im.b[o])
		}
	}
	return v
}

// cstr is the NUL-terminated string at off.
func (im *elfImage) cstr(off uint64) string {
	s := im.b[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return string(s)
}

// programHeaders finds the loadable segments and the dynamic section,
// and the flag the interpreter gives (flagELF without one).
func (im *elfImage) programHeaders(interps map[string]int) (flag int, ok bool) {
	phoff, phnum, phsize := im.u(28, 4), im.u(44, 2), uint64(32)
	if im.bits == 64 {
		phoff, phnum, phsize = im.u(32, 8), im.u(56, 2), 56
	}
	if phoff > im.size {
		return 0, false
	}
	flag = flagELF
	for i := uint64(0); i < phnum; i++ {
		p := phoff + i*phsize // wraps like ldconfig's pointer arithmetic
		if p > im.size {
			return 0, false // "file is truncated"
		}
		s := elfSegment{typ: im.u(p, 4)}
		if im.bits == 64 {
			s.off, s.vaddr, s.filesz = im.u(p+8, 8), im.u(p+16, 8), im.u(p+32, 8)
		} else {
			s.off, s.vaddr, s.filesz = im.u(p+4, 4), im.u(p+8, 4), im.u(p+16, 4)
		}
		switch elf.ProgType(s.typ) {
		case elf.PT_LOAD:
			im.loads = append(im.loads, s)
		case elf.PT_DYNAMIC:
			im.dynAddr, im.dynSize = uint64(uint32(s.off)), s.filesz // an unsigned int in ldconfig
		case elf.PT_INTERP:
			if s.off > im.size {
				return 0, false
			}
			if f, ok := interps[im.cstr(s.off)]; ok {
				flag = f
			}
		}
	}
	if im.dynSize == 0 || im.dynAddr > im.size {
		return 0, false
	}
	return flag, true
}

// strtab is the file offset of the dynamic string table (DT_STRTAB's
// address, less its load segment's offset).
func (im *elfImage) strtab() (uint64, bool) {
	w, mask := im.w, im.mask
	for e := im.dynAddr; im.u(e, w) != uint64(elf.DT_NULL); e += im.dynsize {
		if im.u(e, w) != uint64(elf.DT_STRTAB) {
			continue
		}
		val, loadoff := im.u(e+uint64(w), w), mask
		for _, s := range im.loads {
			if val >= s.vaddr && (val-s.vaddr)&mask < s.filesz {
				loadoff = (s.vaddr - s.off) & mask
				break
			}
		}
		if loadoff == mask {
			loadoff = 0
		}
		if im.bits == 32 && val < loadoff {
			return 0, false
		}
		strtab := val - loadoff
		if strtab > im.size {
			return 0, false
		}
		return strtab, true
	}
	return 0, false
}

// libcmp is _dl_cache_libcmp: runs of digits compare as numbers (in int,
// wrapping like C), everything else as C chars.
func libcmp(p1, p2 string, signedChar bool) int {
	ch := func(s string, i int) int32 {
		switch {
		case i >= len(s):
			return 0
		case signedChar:
			return int32(int8(s[i]))
		}
		return int32(s[i])
	}
	digit := func(c int32) bool { return c >= '0' && c <= '9' }
	i, j := 0, 0
	for ch(p1, i) != 0 {
		c1, c2 := ch(p1, i), ch(p2, j)
		switch {
		case digit(c1) && digit(c2):
			var v1, v2 int32
			for ; digit(ch(p1, i)); i++ {
				v1 = v1*10 + ch(p1, i) - '0'
			}
			for ; digit(ch(p2, j)); j++ {
				v2 = v2*10 + ch(p2, j) - '0'
			}
			if v1 != v2 {
				return int(v1 - v2)
			}
		case digit(c1):
			return 1
		case digit(c2):
			return -1
		case c1 != c2:
			return int(c1 - c2)
		default:
			i, j = i+1, j+1
		}
	}
	return int(ch(p1, i) - ch(p2, j))
}

type ldDir struct {
	path  string // as configured: the cache records path/soname
	canon string // resolved in the tree: ldconfig's (dev, ino)
	flag  int    // "=libc6" and friends
}

type ldEntry struct {
	soname, path string
	flag         int
}

type ldScan struct {
	t        *Tree
	a        *ldArch
	children map[string][]string // directory -> sorted names
	dirs     []ldDir
	parsing  map[string]bool // config files being read, against include loops
	entries  []ldEntry
}

// LdSoCache builds /etc/ld.so.cache for the tree as `ldconfig -X` run in
// the image would: directories from /etc/ld.so.conf (and its includes)
// first, then the arch's system directories; every ELF shared object of
// the arch found there, by soname. It returns the cache and its
// "soname => path" entries in cache order (as `ldconfig -p` lists them).
// Like ldconfig, an entry's path is dir/soname whether or not the soname
// link exists in the tree.
func (t *Tree) LdSoCache(opts LdCacheOptions) (data []byte, libs []string, err error) {
	a, err := ldArchFor(opts.Arch)
	if err != nil {
		return nil, nil, err
	}
	s := &ldScan{t: t, a: a, children: map[string][]string{}, parsing: map[string]bool{}}
	for _, p := range t.Paths() { // sorted: deterministic listings
		if p != "/" {
			d := path.Dir(p)
			s.children[d] = append(s.children[d], path.Base(p))
		}
	}
	s.parseConf("/etc/ld.so.conf")
	for _, d := range a.systemDirs {
		s.addDir(d, flagAny)
	}
	for _, d := range s.dirs {
		s.searchDir(d)
	}
	// add_to_cache keeps a list sorted by compare(): sonames descending
	// in _dl_cache_libcmp order, then flags descending; equal entries stay
	// in the order they were added (directory order).
	sort.SliceStable(s.entries, func(i, j int) bool {
		e1, e2 := s.entries[i], s.entries[j]
		if c := libcmp(e2.soname, e1.soname, a.signedChar); c != 0 {
			return c < 0
		}
		return e1.flag > e2.flag
	})
	gen := opts.Generator
	if gen == "" {
		gen = DefaultLdCacheGenerator
	}
	if data, err = encodeLdCache(s.entries, gen); err != nil {
		return nil, nil, err
	}
	libs = make([]string, 0, len(s.entries))
	for _, e := range s.entries {
		libs = append(libs, e.soname+" => "+e.path)
	}
	return data, libs, nil
}

// resolve follows p inside the tree (Tree.Resolve).
func (s *ldScan) resolve(p string) (string, *Node) { return s.t.Resolve(p) }

func (s *ldScan) readFile(p string) ([]byte, bool) {
	if _, n := s.resolve(p); n != nil && n.Kind == KindFile {
		return n.Data, true
	}
	return nil, false
}

// parseConf is ldconfig's parse_conf: one directory a line, '#'
// comments, "include" with glob patterns, "hwcap" lines ignored.
func (s *ldScan) parseConf(file string) {
	canon, n := s.resolve(file)
	if n == nil || n.Kind != KindFile || s.parsing[canon] {
		return // missing; or an include loop, on which ldconfig recurses without end
	}
	s.parsing[canon] = true
	defer delete(s.parsing, canon)
	for _, line := range strings.Split(string(n.Data), "\n") {
		if i := strings.IndexAny(line, "\x00#"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimLeft(line, " \t\n\v\f\r")
		switch {
		case line == "":
		case strings.HasPrefix(line, "include") && len(line) > 7 && (line[7] == ' ' || line[7] == '\t'):
			for _, pat := range strings.FieldsFunc(line[8:], func(r rune) bool { return r == ' ' || r == '\t' }) {
				if !strings.HasPrefix(pat, "/") && strings.Contains(file, "/") {
					pat = path.Dir(file) + "/" + pat
				}
				for _, f := range s.glob(pat) {
					s.parseConf(f)
				}
			}
		case len(line) > 5 && strings.EqualFold(line[:5], "hwcap") && (line[5] == ' ' || line[5] == '\t'):
		default:
			s.addConfDir(line)
		}
	}
}

// glob is glob(3) in the C locale over the tree: sorted byte-wise,
// wildcards do not match a leading dot.
func (s *ldScan) glob(pattern string) []string {
	out := []string{""}
	for _, c := range strings.Split(pattern, "/") {
		if c == "" {
			continue
		}
		var next []string
		for _, prefix := range out {
			if !strings.ContainsAny(c, "*?[") {
				next = append(next, prefix+"/"+c)
				continue
			}
			dir, n := s.resolve(prefix + "/")
			if n == nil {
				continue
			}
			pat := strings.ReplaceAll(c, "[!", "[^")
			for _, name := range s.children[dir] {
				if m, _ := path.Match(pat, name); m && (name[0] != '.' || c[0] == '.') {
					next = append(next, prefix+"/"+name)
				}
			}
		}
		out = next
	}
	sort.Strings(out)
	return out
}

// addConfDir is add_dir_1: "dir[=type]", trailing blanks and slashes cut.
func (s *ldScan) addConfDir(line string) {
	flag := flagAny
	if dir, typ, ok := strings.Cut(line, "="); ok {
		line = dir
		types := map[string]int{"libc4": flagLibc4, "libc5": flagELFLibc5, "libc6": flagELFLibc6, "glibc2": flagELFLibc6}
		if f, known := types[typ]; known {
			flag = f
		}
	}
	line = strings.TrimRight(strings.TrimRight(line, " \t\n\v\f\r"), "/")
	if line != "" {
		s.addDir(line, flag)
	}
}

// addDir is add_single_dir: a directory already listed under another
// name is not scanned twice, but takes the newer flag.
func (s *ldScan) addDir(p string, flag int) {
	canon, n := s.resolve(p)
	if n == nil || n.Kind != KindDir {
		return // ldconfig: "Can't stat", or opendir fails later
	}
	for i := range s.dirs {
		if s.dirs[i].canon == canon {
			s.dirs[i].flag = flag
			return
		}
	}
	s.dirs = append(s.dirs, ldDir{path: p, canon: canon, flag: flag})
}

// isDSO is _dl_is_dso: lib*.so*, ld-*.so*, ld.so.*, ld64.so.*.
func isDSO(name string) bool {
	return ((strings.HasPrefix(name, "lib") || strings.HasPrefix(name, "ld-")) && strings.Contains(name, ".so")) ||
		strings.HasPrefix(name, "ld.so.") || strings.HasPrefix(name, "ld64.so.")
}

// prelinkTemp: files prelink leaves behind, never DSOs to look at.
func prelinkTemp(name string) bool {
	const tmp = ".#prelink#."
	return strings.HasSuffix(name, ".#prelink#") ||
		len(name) >= len(tmp)+6 && strings.HasPrefix(name[len(name)-len(tmp)-6:], tmp)
}

// searchDir is search_dir without hwcap subdirectories.
func (s *ldScan) searchDir(d ldDir) {
	type dlib struct {
		name, soname string
		flag         int
		isLink       bool
	}
	var dlibs []dlib
	for _, name := range s.children[d.canon] {
		full := path.Join(d.canon, name)
		n := s.t.Get(full)
		if (n.Kind != KindFile && n.Kind != KindSymlink) || !isDSO(name) || prelinkTemp(name) {
			continue
		}
		isLink := n.Kind == KindSymlink
		data, ok := s.readFile(full) // stale or looping links are skipped
		if !ok {
			continue
		}
		flag, soname, has, ok := s.a.readLib(data)
		if !ok {
			continue
		}
		if !has {
			soname = name
		}
		// A link counts as a link (and is cached under its own name) only
		// if named as the soname, or as the "libfoo.so" link for ld(1).
		if isLink && name != soname && !(strings.HasSuffix(name, ".so") && strings.HasPrefix(soname, name)) {
			isLink = false
		}
		if isLink {
			soname = name
		}
		if flag == flagELF && (d.flag == flagELFLibc5 || d.flag == flagELFLibc6) {
			flag = d.flag
		}
		found := false
		for i := range dlibs {
			l := &dlibs[i]
			if l.soname != soname {
				continue
			}
			found = true
			// Prefer a file to a link, else the newer name.
			if (!isLink && l.isLink) || (isLink == l.isLink && libcmp(l.name, name, s.a.signedChar) < 0) {
				if l.flag == flagELF && (flag == flagELFLibc5 || flag == flagELFLibc6) ||
					(l.flag == flagELFLibc5 || l.flag == flagELFLibc6) && flag == flagELF {
					l.flag = flag
				}
				l.name, l.isLink = name, isLink
			}
			break
		}
		if !found {
			dlibs = append(dlibs, dlib{name: name, soname: soname, flag: flag, isLink: isLink})
		}
	}
	for i := len(dlibs) - 1; i >= 0; i-- { // ldconfig's list is built head-first
		l := dlibs[i]
		s.entries = append(s.entries, ldEntry{soname: l.soname, path: d.path + "/" + l.soname, flag: l.flag})
	}
}

// encodeLdCache writes the new format only (ldconfig's default since
// glibc 2.32): header, entries, a tail-merged string table (string
// offsets count from the start of the file), and the extension
// directory with the generator section, which glibc >= 2.33 always
// writes. Little-endian: every supported arch is.
func encodeLdCache(entries []ldEntry, generator string) ([]byte, error) {
	// stringtable_finalize: strings sorted by their reversal, descending,
	// so a string that ends another follows it and shares its bytes.
	set := map[string]bool{}
	for _, e := range entries {
		set[e.soname], set[e.path] = true, true
	}
	type str struct{ s, rev string }
	strs := make([]str, 0, len(set))
	for s := range set {
		r := []byte(s)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		strs = append(strs, str{s, string(r)})
	}
	sort.Slice(strs, func(i, j int) bool { return strs[i].rev > strs[j].rev })
	off := map[string]uint64{}
	var size uint64
	for i, cur := range strs {
		if i > 0 {
			prev := strs[i-1].s
			if strings.HasSuffix(prev, cur.s) {
				off[cur.s] = off[prev] + uint64(len(prev)-len(cur.s))
			} else {
				off[cur.s] = off[prev] + uint64(len(prev)) + 1
			}
		}
		size = off[cur.s] + uint64(len(cur.s)) + 1
	}
	table := make([]byte, size)
	for _, s := range strs {
		copy(table[off[s.s]:], s.s)
	}

	base := uint64(48 + 24*len(entries)) // where string offsets count from 0
	extOff := (base + size + 3) &^ 3
	if extOff+24+uint64(len(generator)) > 1<<32-1 {
		return nil, errors.New("ld.so.cache: too large")
	}
	le := binary.LittleEndian
	b := make([]byte, 0, extOff+24+uint64(len(generator)))
	b = append(b, "glibc-ld.so.cache1.1"...)
	b = le.AppendUint32(b, uint32(len(entries)))
	b = le.AppendUint32(b, uint32(size))
	b = append(b, 2, 0, 0, 0) // flags: cache_file_new_flags_endian_little
	b = le.AppendUint32(b, uint32(extOff))
	b = append(b, make([]byte, 12)...)
	for _, e := range entries {
		b = le.AppendUint32(b, uint32(int32(e.flag)))
		b = le.AppendUint32(b, uint32(base+off[e.soname]))
		b = le.AppendUint32(b, uint32(base+off[e.path]))
		b = le.AppendUint32(b, 0) // osversion, unused
		b = le.AppendUint64(b, 0) // hwcap
	}
	b = append(b, table...)
	b = append(b, make([]byte, extOff-uint64(len(b)))...)
	b = le.AppendUint32(b, 0xeaa42174) // cache_extension_magic
	b = le.AppendUint32(b, 1)          // one section: the generator
	b = le.AppendUint32(b, 0)          // cache_extension_tag_generator
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, uint32(extOff+24))
	b = le.AppendUint32(b, uint32(len(generator)))
	return append(b, generator...), nil
}
