package repo

// The primary.xml and filelists.xml readers. They used to decode each
// <package> with encoding/xml's reflection-driven DecodeElement; they now
// walk mdScanner's tokens and fill the few fields they need directly, with
// encoding/xml's unmarshalling rules kept where input could tell them
// apart: elements and attributes match by local name whatever their
// prefix, the last of repeated attributes wins, a repeated element
// overwrites (strings) or adds to (lists) what the earlier one gave, text
// is the element's own character data (CDATA included, children's
// excluded), and everything else is read, checked and skipped. The tests
// keep the old decoder and compare both on real, synthetic and fuzzed
// input.
//
// Each package's strings (names, versions, paths) are gathered in one
// arena and made into one string, which the fields then slice; strings,
// Package values and lists come from large chunks (mdChunks): a package
// costs no allocation of its own.

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unsafe"

	"github.com/nodeforge/builder/internal/hugepage"
	"github.com/nodeforge/builder/pkgbase/evr"
)

// mdSpan is a piece of a package's arena: [off, end).
type mdSpan struct{ off, end int }

type mdEntry struct {
	name, flags, epoch, ver, rel, pre mdSpan
	hasEpoch                          bool
	version                           mdSpan // depVersion's rendering
}

// mdPackage is what the readers keep of one <package>.
type mdPackage struct {
	a []byte // the arena
	o []byte // what the Package keeps of it (toPackage)

	// primary.xml
	name, arch                 mdSpan
	epoch, ver, rel            mdSpan
	hasEpoch                   bool
	sumType, sumValue          mdSpan
	timeBuild                  mdSpan
	sizePackage, sizeInstalled mdSpan
	locHref, locBase           mdSpan
	license, sourceRPM         mdSpan
	deps                       [4][]mdEntry // provides, requires, conflicts, obsoletes
	files                      []mdSpan
	pkgid, flName, flArch      mdSpan // filelists.xml's attributes

	mem mdChunks
}

func (x *mdPackage) reset() {
	x.a = x.a[:0]
	x.name, x.arch, x.epoch, x.ver, x.rel = mdSpan{}, mdSpan{}, mdSpan{}, mdSpan{}, mdSpan{}
	x.hasEpoch = false
	x.sumType, x.sumValue, x.timeBuild, x.sizePackage, x.sizeInstalled = mdSpan{}, mdSpan{}, mdSpan{}, mdSpan{}, mdSpan{}
	x.locHref, x.locBase, x.license, x.sourceRPM = mdSpan{}, mdSpan{}, mdSpan{}, mdSpan{}
	for i := range x.deps {
		x.deps[i] = x.deps[i][:0]
	}
	x.files = x.files[:0]
	x.pkgid, x.flName, x.flArch = mdSpan{}, mdSpan{}, mdSpan{}
}

// keep copies b into the arena.
func (x *mdPackage) keep(b []byte) mdSpan {
	off := len(x.a)
	x.a = append(x.a, b...)
	return mdSpan{off, len(x.a)}
}

// elementText reads the rest of the element whose start tag was just
// read and returns its own character data, in the arena.
func (x *mdPackage) elementText(s *mdScanner) (mdSpan, error) {
	off := len(x.a)
	for {
		tok, err := s.next()
		if err != nil {
			return mdSpan{}, err
		}
		switch tok {
		case mdText:
			x.a = append(x.a, s.text...)
		case mdStart:
			if err := s.skip(); err != nil {
				return mdSpan{}, err
			}
		case mdEnd:
			return mdSpan{off, len(x.a)}, nil
		}
	}
}

// attrs calls fn with each attribute of the current start tag.
func attrs(s *mdScanner, fn func(local, value []byte)) error {
	for {
		local, value, more, err := s.attr()
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		fn(local, value)
	}
}

// children calls fn for each child element of the element whose start tag
// was just read (its attributes read or not), up to its end tag. fn must
// read its child to the end (skip, elementText, children).
func children(s *mdScanner, fn func(local []byte) error) error {
	for {
		tok, err := s.next()
		if err != nil {
			return err
		}
		switch tok {
		case mdStart:
			if err := fn(s.tagLocal); err != nil {
				return err
			}
		case mdEnd:
			return nil
		}
	}
}

// readPrimary reads a primary.xml <package> whose start tag was just read.
func (x *mdPackage) readPrimary(s *mdScanner) error {
	x.reset()
	return children(s, func(local []byte) error {
		switch string(local) {
		case "name":
			return x.text(s, &x.name)
		case "arch":
			return x.text(s, &x.arch)
		case "version":
			err := attrs(s, func(k, v []byte) {
				switch string(k) {
				case "epoch":
					x.epoch, x.hasEpoch = x.keep(v), true
				case "ver":
					x.ver = x.keep(v)
				case "rel":
					x.rel = x.keep(v)
				}
			})
			if err != nil {
				return err
			}
			return s.skip()
		case "checksum":
			err := attrs(s, func(k, v []byte) {
				if string(k) == "type" {
					x.sumType = x.keep(v)
				}
			})
			if err != nil {
				return err
			}
			return x.text(s, &x.sumValue)
		case "time":
			return x.attrsOnly(s, func(k, v []byte) {
				if string(k) == "build" {
					x.timeBuild = x.keep(v)
				}
			})
		case "size":
			return x.attrsOnly(s, func(k, v []byte) {
				switch string(k) {
				case "package":
					x.sizePackage = x.keep(v)
				case "installed":
					x.sizeInstalled = x.keep(v)
				}
			})
		case "location":
			return x.attrsOnly(s, func(k, v []byte) {
				switch string(k) {
				case "href":
					x.locHref = x.keep(v)
				case "base":
					x.locBase = x.keep(v)
				}
			})
		case "format":
			return x.readFormat(s)
		}
		return s.skip()
	})
}

func (x *mdPackage) text(s *mdScanner, dst *mdSpan) error {
	sp, err := x.elementText(s)
	if err != nil {
		return err
	}
	*dst = sp
	return nil
}

func (x *mdPackage) attrsOnly(s *mdScanner, fn func(k, v []byte)) error {
	if err := attrs(s, fn); err != nil {
		return err
	}
	return s.skip()
}

var mdDepLists = [4]string{"provides", "requires", "conflicts", "obsoletes"}

func (x *mdPackage) readFormat(s *mdScanner) error {
	return children(s, func(local []byte) error {
		switch string(local) {
		case "license":
			return x.text(s, &x.license)
		case "sourcerpm":
			return x.text(s, &x.sourceRPM)
		case "file":
			sp, err := x.elementText(s)
			if err != nil {
				return err
			}
			x.files = append(x.files, sp)
			return nil
		}
		for k, name := range mdDepLists {
			if string(local) == name {
				return x.readDeps(s, k)
			}
		}
		return s.skip()
	})
}

// readDeps reads an rpm:provides (requires, ...) list into deps[list].
func (x *mdPackage) readDeps(s *mdScanner, list int) error {
	return children(s, func(local []byte) error {
		if string(local) != "entry" {
			return s.skip()
		}
		var e mdEntry
		err := attrs(s, func(name, v []byte) {
			switch string(name) {
			case "name":
				e.name = x.keep(v)
			case "flags":
				e.flags = x.keep(v)
			case "epoch":
				e.epoch, e.hasEpoch = x.keep(v), true
			case "ver":
				e.ver = x.keep(v)
			case "rel":
				e.rel = x.keep(v)
			case "pre":
				e.pre = x.keep(v)
			}
		})
		if err != nil {
			return err
		}
		x.deps[list] = append(x.deps[list], e)
		return s.skip()
	})
}

func (x *mdPackage) bytes(sp mdSpan) []byte { return x.a[sp.off:sp.end] }

// out copies a piece of the arena to the output.
func (x *mdPackage) out(sp mdSpan) mdSpan {
	off := len(x.o)
	x.o = append(x.o, x.a[sp.off:sp.end]...)
	return mdSpan{off, len(x.o)}
}

// renderDepVersion appends e's version, [epoch:]ver[-rel], to the output.
// createrepo_c writes epoch="0" for every versioned dependency whether or
// not it had one, so (like libsolv) epoch 0 is dropped; under rpm's rules a
// missing epoch compares as 0 anyway. A version that itself looks like
// "N:..." keeps an explicit "0:" so it cannot be misread as an epoch.
func (x *mdPackage) renderDepVersion(e *mdEntry) mdSpan {
	ver, rel := x.bytes(e.ver), x.bytes(e.rel)
	var ep []byte
	if e.hasEpoch && string(x.bytes(e.epoch)) != "0" {
		ep = x.bytes(e.epoch)
	}
	off := len(x.o)
	if len(ver) == 0 && len(rel) == 0 {
		if len(ep) == 0 {
			return mdSpan{off, off}
		}
		x.o = append(append(x.o, ep...), ':')
		return mdSpan{off, len(x.o)}
	}
	if len(ep) > 0 {
		x.o = append(append(x.o, ep...), ':')
	} else {
		i := 0
		for i < len(ver) && ver[i] >= '0' && ver[i] <= '9' {
			i++
		}
		if i > 0 && i < len(ver) && ver[i] == ':' {
			x.o = append(x.o, "0:"...)
		}
	}
	x.o = append(x.o, ver...)
	if len(rel) > 0 {
		x.o = append(append(x.o, '-'), rel...)
	}
	return mdSpan{off, len(x.o)}
}

// mdChunks hands out the memory of the parsed packages (their strings,
// Package values, dependency and file lists) from chunks that double up
// to a few MiB, the large ones backed by huge pages where the kernel
// offers them: first touches of fresh memory are what a large parse costs
// most on VMs, and one allocation serves hundreds of packages. Chunks are
// only appended to: a string over a chunk's bytes never changes.
type mdChunks struct {
	bytes          []byte
	pkgs           []Package
	deps           []Dep
	strs           []string
	nb, np, nd, ns int // the next chunk sizes
}

const mdHugeChunk = 4 << 20

// chunkLen returns the size of the next chunk of n-byte elements for at least
// need of them, doubling *next up to max bytes.
func chunkLen(next *int, need, first, max, size int) int {
	if *next == 0 {
		*next = first
	}
	n := *next
	if n*size < max {
		*next = 2 * n
	}
	return max2(n, need)
}

func max2(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func hugeChunk(p unsafe.Pointer, bytes int) {
	if bytes >= mdHugeChunk {
		hugepage.Advise(p, uintptr(bytes))
	}
}

// str copies b into a string that lives in a chunk.
func (c *mdChunks) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > cap(c.bytes)-len(c.bytes) {
		n := chunkLen(&c.nb, len(b), 16<<10, mdHugeChunk, 1)
		c.bytes = make([]byte, 0, n)
		hugeChunk(unsafe.Pointer(unsafe.SliceData(c.bytes[:1])), n)
	}
	off := len(c.bytes)
	c.bytes = append(c.bytes, b...)
	return unsafe.String(&c.bytes[off], len(b))
}

// pkg returns a zero Package.
func (c *mdChunks) pkg() *Package {
	if len(c.pkgs) == 0 {
		n := chunkLen(&c.np, 1, 64, 2*mdHugeChunk, int(unsafe.Sizeof(Package{})))
		c.pkgs = make([]Package, n)
		hugeChunk(unsafe.Pointer(&c.pkgs[0]), n*int(unsafe.Sizeof(Package{})))
	}
	p := &c.pkgs[0]
	c.pkgs = c.pkgs[1:]
	return p
}

// depList returns an empty (not nil) list with room for exactly n.
func (c *mdChunks) depList(n int) []Dep {
	if n == 0 {
		return []Dep{}
	}
	if n > cap(c.deps)-len(c.deps) {
		k := chunkLen(&c.nd, n, 256, 2*mdHugeChunk, int(unsafe.Sizeof(Dep{})))
		c.deps = make([]Dep, 0, k)
		hugeChunk(unsafe.Pointer(unsafe.SliceData(c.deps[:1])), k*int(unsafe.Sizeof(Dep{})))
	}
	l := c.deps[len(c.deps) : len(c.deps) : len(c.deps)+n]
	c.deps = c.deps[:len(c.deps)+n]
	return l
}

// strList returns an empty (not nil) list with room for exactly n.
func (c *mdChunks) strList(n int) []string {
	if n == 0 {
		return []string{}
	}
	if n > cap(c.strs)-len(c.strs) {
		k := chunkLen(&c.ns, n, 256, mdHugeChunk, 16)
		c.strs = make([]string, 0, k)
		hugeChunk(unsafe.Pointer(unsafe.SliceData(c.strs[:1])), k*16)
	}
	l := c.strs[len(c.strs) : len(c.strs) : len(c.strs)+n]
	c.strs = c.strs[:len(c.strs)+n]
	return l
}

// toPackage converts a <package> as encoding/xml's decoding used to
// (refXMLPackage.toPackage in rpmmd_ref_test.go): the same fields, trimmed the
// same way, the same checks and messages.
func (x *mdPackage) toPackage(repoURL string) (*Package, string, error) {
	// The strings the Package keeps go to the output, which becomes one
	// string; the rest (dependency flags, the parts of their versions)
	// is read where it is.
	x.o = x.o[:0]
	for _, sp := range []*mdSpan{&x.name, &x.arch, &x.sourceRPM, &x.license, &x.locHref, &x.locBase, &x.ver, &x.rel,
		&x.epoch, &x.timeBuild, &x.sizeInstalled, &x.sizePackage, &x.sumType, &x.sumValue} {
		*sp = x.out(*sp)
	}
	ndeps := 0
	for k := range x.deps {
		for i := range x.deps[k] {
			e := &x.deps[k][i]
			e.version = x.renderDepVersion(e)
			e.name = x.out(e.name)
		}
		ndeps += len(x.deps[k])
	}
	for i, f := range x.files {
		x.files[i] = x.out(f)
	}
	all := x.mem.str(x.o)
	str := func(sp mdSpan) string { return all[sp.off:sp.end] }

	p := x.mem.pkg()
	*p = Package{
		Name:      strings.TrimSpace(str(x.name)),
		Arch:      strings.TrimSpace(str(x.arch)),
		SourceRPM: strings.TrimSpace(str(x.sourceRPM)),
		License:   strings.TrimSpace(str(x.license)),
		Semantics: evr.RPM,
		Repo:      repoURL,
		Location:  strings.TrimSpace(str(x.locHref)),
	}
	ver := str(x.ver)
	if p.Name == "" {
		return nil, "", errors.New("no <name>")
	}
	if p.Arch == "" {
		return nil, "", fmt.Errorf("%s: no <arch>", p.Name)
	}
	if ver == "" {
		return nil, "", fmt.Errorf("%s: no version/@ver", p.Name)
	}
	if p.Location == "" {
		return nil, "", fmt.Errorf("%s: no location/@href", p.Name)
	}
	if b := strings.TrimSpace(str(x.locBase)); b != "" {
		p.Repo = strings.TrimSuffix(b, "/")
	}
	p.EVR = evr.EVR{Version: ver, Release: str(x.rel)}
	// createrepo writes epoch="0" whether or not the package has one, so
	// 0 cannot be told from none; like dnf, treat it as none (under rpm
	// rules a missing epoch compares as 0 anyway).
	if x.hasEpoch && x.epoch.end > x.epoch.off {
		e, err := parseEpoch(str(x.epoch))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", p.Name, err)
		}
		p.EVR.Epoch, p.EVR.HasEpoch = e, e != 0
	}
	var err error
	if p.BuildTime, err = parseMDNumber(str(x.timeBuild)); err != nil {
		return nil, "", fmt.Errorf("%s: time/@build: %w", p.Name, err)
	}
	if p.Size, err = parseMDNumber(str(x.sizeInstalled)); err != nil {
		return nil, "", fmt.Errorf("%s: size/@installed: %w", p.Name, err)
	}
	if p.FileSize, err = parseMDNumber(str(x.sizePackage)); err != nil {
		return nil, "", fmt.Errorf("%s: size/@package: %w", p.Name, err)
	}
	sum := Checksum{
		Type:  strings.ToLower(strings.TrimSpace(str(x.sumType))),
		Value: strings.ToLower(strings.TrimSpace(str(x.sumValue))),
	}
	switch sum.Type {
	case "sha256":
		p.SHA256 = sum.Value
	case "sha", "sha1":
		p.SHA1 = sum.Value
	case "md5":
		p.MD5 = sum.Value
	}
	if err := x.setDeps(p, ndeps, str); err != nil {
		return nil, "", err
	}
	nfiles := 0
	for _, f := range x.files {
		if f.end > f.off {
			nfiles++
		}
	}
	if nfiles > 0 {
		p.Files = x.mem.strList(nfiles)
		for _, f := range x.files {
			if f.end > f.off {
				p.Files = append(p.Files, str(f))
			}
		}
	}
	return p, sum.Value, nil
}

// setDeps gives p its dependency lists, all in one allocation.
func (x *mdPackage) setDeps(p *Package, ndeps int, str func(mdSpan) string) error {
	var pool []Dep
	if ndeps > 0 {
		pool = x.mem.depList(ndeps)
	}
	dsts := [4]*[]Dep{&p.Provides, &p.Requires, &p.Conflicts, &p.Obsoletes}
	for k := range x.deps {
		start := len(pool)
		for i := range x.deps[k] {
			e := &x.deps[k][i]
			d := Dep{Name: str(e.name)}
			if d.Name == "" {
				return fmt.Errorf("%s: %s: rpm:entry without a name", p.Name, mdDepLists[k])
			}
			if f := x.bytes(e.flags); len(f) > 0 {
				fl, ok := senseFlags[string(f)]
				if !ok {
					return fmt.Errorf("%s: %s: %s: unknown flags %q", p.Name, mdDepLists[k], d.Name, f)
				}
				d.Flags = fl
			}
			if pre := string(x.bytes(e.pre)); pre == "1" || pre == "true" {
				d.Flags |= evr.FlagPrereq
			}
			d.Version = str(e.version)
			pool = append(pool, d)
		}
		if len(pool) > start {
			*dsts[k] = pool[start:len(pool):len(pool)]
		}
	}
	return nil
}

// mdRoot reads up to the document's root element and checks its name.
func mdRoot(s *mdScanner, want, what string) error {
	for {
		tok, err := s.next()
		if err == io.EOF {
			return fmt.Errorf("not %s: no root element", what)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if tok == mdStart {
			if string(s.tagLocal) != want {
				return fmt.Errorf("not %s: root element is <%s>, want <%s>", what, s.tagLocal, want)
			}
			return nil
		}
	}
}

// mdEachPackage walks the <package> elements below the open root element
// and calls fn, which reads each, with its number and line; it returns at
// the root's end.
func mdEachPackage(s *mdScanner, file string, fn func(n, line int) error) error {
	n := 0
	for {
		tok, err := s.next()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%s: after %d packages: %w", file, n, err)
		}
		switch tok {
		case mdEnd:
			return nil
		case mdStart:
			if string(s.tagLocal) != "package" {
				if err := s.skip(); err != nil {
					return fmt.Errorf("%s: after %d packages: %w", file, n, err)
				}
				continue
			}
			n++
			if err := fn(n, s.line()); err != nil {
				return err
			}
		}
	}
}

// parsePrimary calls fn for each package with its pkgid (the checksum
// primary.xml marks pkgid="YES", which filelists.xml refers to).
func parsePrimary(r io.Reader, repoURL string, fn func(pkgid string, p *Package) error) error {
	s := newMDScanner(r)
	if err := mdRoot(s, "metadata", "a primary.xml"); err != nil {
		return err
	}
	var x mdPackage
	return mdEachPackage(s, "primary.xml", func(n, line int) error {
		if err := x.readPrimary(s); err != nil {
			return fmt.Errorf("primary.xml: package %d (line %d): %w", n, line, err)
		}
		p, pkgid, err := x.toPackage(repoURL)
		if err != nil {
			return fmt.Errorf("primary.xml: package %d (line %d): %w", n, line, err)
		}
		return fn(pkgid, p)
	})
}

// readFilelists reads a filelists.xml <package> whose start tag was just
// read.
func (x *mdPackage) readFilelists(s *mdScanner) error {
	x.reset()
	err := attrs(s, func(k, v []byte) {
		switch string(k) {
		case "pkgid":
			x.pkgid = x.keep(v)
		case "name":
			x.flName = x.keep(v)
		case "arch":
			x.flArch = x.keep(v)
		}
	})
	if err != nil {
		return err
	}
	return children(s, func(local []byte) error {
		if string(local) != "file" {
			return s.skip()
		}
		sp, err := x.elementText(s)
		if err != nil {
			return err
		}
		x.files = append(x.files, sp)
		return nil
	})
}

// ParseFilelists reads filelists.xml (decompressed) one <package> at a time
// and calls fn with each package's pkgid, name, arch and full file list
// (directories and ghosts included). An error from fn stops the parse and is
// returned as is.
func ParseFilelists(r io.Reader, fn func(pkgid, name, arch string, files []string) error) error {
	s := newMDScanner(r)
	if err := mdRoot(s, "filelists", "a filelists.xml"); err != nil {
		return err
	}
	var x mdPackage
	return mdEachPackage(s, "filelists.xml", func(n, line int) error {
		if err := x.readFilelists(s); err != nil {
			return fmt.Errorf("filelists.xml: package %d (line %d): %w", n, line, err)
		}
		all := x.mem.str(x.a)
		str := func(sp mdSpan) string { return all[sp.off:sp.end] }
		pkgid := strings.ToLower(strings.TrimSpace(str(x.pkgid)))
		if pkgid == "" {
			return fmt.Errorf("filelists.xml: package %d (line %d, %q): no pkgid", n, line, str(x.flName))
		}
		files := x.mem.strList(len(x.files))
		for _, f := range x.files {
			if f.end > f.off {
				files = append(files, str(f))
			}
		}
		return fn(pkgid, str(x.flName), str(x.flArch), files)
	})
}
