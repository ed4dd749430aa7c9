// Package fat writes FAT16 file system images in memory, deterministically,
// for EFI system partitions and El Torito EFI boot images: no loop device,
// no mkfs, no mount. Long names get VFAT long-name entries; every time
// stamp is the one given; the volume id is the caller's.
//
// FAT16 because UEFI firmware reads FAT12, 16 and 32 alike and an ESP of
// a few dozen megabytes is FAT16's size; the cluster size grows with the
// content so the cluster count stays within FAT16's range.
package fat

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
)

// File is one file of the image; its directories are made as needed.
type File struct {
	Path string // slash-separated, relative: "EFI/BOOT/BOOTX64.EFI"
	Data []byte
	// Body, when not nil, is the content instead of Data, read where it
	// is (an initramfs of 150 MB in a file, never held in memory).
	Body Body
}

// Body is a file's content read at offsets, of a known size:
// *bytes.Reader and *io.SectionReader are bodies.
type Body interface {
	io.ReaderAt
	Size() int64
}

// Len is the file's size in bytes.
func (f File) Len() int64 {
	if f.Body != nil {
		return f.Body.Size()
	}
	return int64(len(f.Data))
}

// Options of an image.
type Options struct {
	Label    string    // volume label, up to 11 characters (default "NO NAME")
	VolumeID uint32    // volume serial number
	Time     time.Time // every time stamp (UTC)
	// MinSize is the least image size in bytes (default: what the content
	// needs, at least 4 MiB).
	MinSize int64
	// HiddenSectors is the LBA the file system starts at on its disk (a
	// partition's first sector), recorded in the boot sector.
	HiddenSectors uint32
	// SectorSize is the logical sector size the boot sector declares and
	// the file system is laid out in: 512 (the default), 1024, 2048 or
	// 4096, the disk's own (a disk of 4K logical blocks needs 4096).
	SectorSize int
	// Align, when not 0, puts every file's data at an offset of the image
	// that is a multiple of Align (a power of two, at least the sector
	// size, at most 32 KiB): the data region starts at a multiple of it
	// (reserved sectors pad the start) and clusters are at least that
	// large. An ISO 9660 tree can then point at the files' data in the
	// image (2048, its block size).
	Align int
}

// Extent is where a file's data is in the image: Size bytes from Offset,
// in one run (each file's clusters follow one another).
type Extent struct {
	Path         string // as given
	Offset, Size int64
}

const (
	rootEntries = 512
	maxCluster  = 32 << 10 // the largest cluster every FAT driver reads
	minClusters = 4085     // fewer is FAT12
	maxClusters = 65524    // more is FAT32
)

type node struct {
	name     string
	dir      bool
	data     []byte
	body     Body // instead of data
	children []*node
	cluster  uint16
	clusters int
	size     int // bytes in the data region (directories: their entries)
}

// Write renders the image.
func Write(files []File, o Options) ([]byte, error) {
	img, _, err := WriteExtents(files, o)
	return img, err
}

// WriteExtents renders the image and says where each file's data is in
// it, in the order of files (an empty file has no data: Offset 0).
func WriteExtents(files []File, o Options) ([]byte, []Extent, error) {
	p, err := newPlan(files, o)
	if err != nil {
		return nil, nil, err
	}
	img, err := render(make([]byte, p.g.size()), p.root, p.dirs, p.g, p.o, p.stamp)
	if err != nil {
		return nil, nil, err
	}
	ext := p.extents(files)
	for i, n := range p.leaves {
		if n.body != nil && ext[i].Size > 0 {
			if err := n.readBody(img[ext[i].Offset:]); err != nil {
				return nil, nil, err
			}
		}
	}
	return img, ext, nil
}

// WriteExtentsTo writes the image WriteExtents renders to w, in order,
// without ever holding it whole: the metadata (the boot sector, the FATs
// and the directories, which come before any file's data) rendered in a
// buffer of their size, then each file's data from its File, then the
// free clusters' zeros. It returns the extents and the image's size.
// An ISO's EFI image of a real base is 150 MB, nearly all the initramfs,
// which the caller holds already.
func WriteExtentsTo(w io.Writer, files []File, o Options) ([]Extent, int64, error) {
	p, err := newPlan(files, o)
	if err != nil {
		return nil, 0, err
	}
	meta := make([]byte, p.metaSize())
	if _, err := render(meta, p.root, p.dirs, p.g, p.o, p.stamp); err != nil {
		return nil, 0, err
	}
	if _, err := w.Write(meta); err != nil {
		return nil, 0, err
	}
	ext := p.extents(files)
	order := make([]int, 0, len(ext))
	for i, e := range ext {
		if e.Size > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ext[a].Offset, ext[b].Offset) })
	at := int64(len(meta))
	for _, i := range order {
		if err := writeZeros(w, ext[i].Offset-at); err != nil {
			return nil, 0, err
		}
		var err error
		if b := files[i].Body; b != nil {
			var n int64
			if n, err = io.Copy(w, io.NewSectionReader(b, 0, b.Size())); err == nil && n != b.Size() {
				err = fmt.Errorf("fat: %s: %d bytes of %d", files[i].Path, n, b.Size())
			}
		} else {
			_, err = w.Write(files[i].Data)
		}
		if err != nil {
			return nil, 0, err
		}
		at = ext[i].Offset + ext[i].Size
	}
	size := int64(p.g.size())
	if err := writeZeros(w, size-at); err != nil {
		return nil, 0, err
	}
	return ext, size, nil
}

// Size is the size of the image Write renders of files with o.
func Size(files []File, o Options) (int64, error) {
	p, err := newPlan(files, o)
	if err != nil {
		return 0, err
	}
	return int64(p.g.size()), nil
}

// writeZeros writes n zero bytes to w.
func writeZeros(w io.Writer, n int64) error {
	if n < 0 {
		return errors.New("fat: file data out of order")
	}
	_, err := io.CopyN(w, zeros{}, n)
	return err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// plan is an image laid out: its tree (files and directories), the
// geometry that holds it, and the options with their defaults.
// length is a file node's size in bytes.
func (n *node) length() int {
	if n.body != nil {
		return int(n.body.Size())
	}
	return len(n.data)
}

// readBody puts a file node's body at the start of dst.
func (n *node) readBody(dst []byte) error {
	if _, err := io.ReadFull(io.NewSectionReader(n.body, 0, n.body.Size()), dst[:n.length()]); err != nil {
		return fmt.Errorf("fat: %s: %w", n.name, err)
	}
	return nil
}

type plan struct {
	root   *node
	leaves []*node // the nodes of the files, in their order
	dirs   []*node
	g      geometry
	o      Options
	stamp  [2]uint16
}

// metaSize is where the first file's data may start: after the
// directories' clusters, which render allocates first.
func (p *plan) metaSize() int {
	cs := p.g.spc * p.g.ss
	n := p.g.dataStart()
	for _, d := range p.dirs {
		n += ceil(entryCount(d, false)*32, cs) * cs
	}
	return n
}

// extents are the files' places, once render has allocated them.
func (p *plan) extents(files []File) []Extent {
	ext := make([]Extent, len(files))
	for i, n := range p.leaves {
		ext[i] = Extent{Path: files[i].Path, Size: int64(n.length())}
		if n.clusters > 0 {
			ext[i].Offset = int64(p.g.dataStart() + (int(n.cluster)-2)*p.g.spc*p.g.ss)
		}
	}
	return ext
}

// newPlan lays the files out: the smallest cluster size at which they
// fit a FAT16 of at least MinSize.
func newPlan(files []File, o Options) (*plan, error) {
	root := &node{dir: true}
	var leaves []*node
	for _, f := range files {
		n, err := add(root, f)
		if err != nil {
			return nil, err
		}
		leaves = append(leaves, n)
	}
	sortTree(root)
	if len(o.Label) > 11 {
		return nil, fmt.Errorf("fat: volume label %q is longer than 11 characters", o.Label)
	}
	if o.Label == "" {
		o.Label = "NO NAME"
	}
	stamp := dosTime(o.Time)
	ss := o.SectorSize
	switch ss {
	case 0:
		ss = 512
	case 512, 1024, 2048, 4096:
	default:
		return nil, fmt.Errorf("fat: sector size %d (512, 1024, 2048 or 4096)", o.SectorSize)
	}
	spc0 := 1
	if o.Align != 0 {
		if o.Align&(o.Align-1) != 0 || o.Align < ss || o.Align > maxCluster {
			return nil, fmt.Errorf("fat: alignment %d (a power of two from the sector size %d to %d)", o.Align, ss, maxCluster)
		}
		spc0 = o.Align / ss
	}

	// Directory contents, then sizes: the cluster size decides how many
	// clusters each takes.
	var dirs []*node
	var walk func(n *node)
	walk = func(n *node) {
		for _, c := range n.children {
			if c.dir {
				dirs = append(dirs, c)
				walk(c)
			}
		}
	}
	walk(root)
	rootEnts := entryCount(root, true)
	if rootEnts > rootEntries {
		return nil, fmt.Errorf("fat: %d root directory entries, more than %d", rootEnts, rootEntries)
	}
	minSize := o.MinSize
	if minSize < 4<<20 {
		minSize = 4 << 20
	}
	for spc := spc0; spc*ss <= maxCluster; spc *= 2 {
		cs := spc * ss
		need := 0
		for _, d := range dirs {
			need += ceil(entryCount(d, false)*32, cs)
		}
		var collect func(n *node)
		collect = func(n *node) {
			for _, c := range n.children {
				if c.dir {
					collect(c)
				} else {
					need += ceil(c.length(), cs)
				}
			}
		}
		collect(root)
		clusters := max(need, minClusters)
		// Grow to MinSize.
		g := geometry{clusters, spc, ss, 1}
		for {
			g.reserved = reservedSectors(g, o.Align)
			if int64(g.size()) >= minSize || g.clusters >= maxClusters {
				break
			}
			g.clusters++
		}
		if g.clusters > maxClusters || int64(g.size()) < minSize {
			continue // a larger cluster
		}
		return &plan{root: root, leaves: leaves, dirs: dirs, g: g, o: o, stamp: stamp}, nil
	}
	return nil, errors.New("fat: the content is too large for FAT16 (more than about 4 GiB)")
}

// reservedSectors is 1 (the boot sector), and with align as many more as
// put the data region at a multiple of align.
func reservedSectors(g geometry, align int) int {
	g.reserved = 1
	if align == 0 {
		return 1
	}
	pad := (align - g.dataStart()%align) % align
	return 1 + pad/g.ss
}

func ceil(n, unit int) int { return (n + unit - 1) / unit }

// fatSectors is the size of one FAT for a cluster count, in sectors of
// ss bytes.
func fatSectors(clusters, ss int) int { return ceil((clusters+2)*2, ss) }

// geometry is an image's cluster count, sectors per cluster, sector
// size and reserved sectors (the boot sector and padding).
type geometry struct{ clusters, spc, ss, reserved int }

// dataStart is the offset of the first cluster: after the reserved
// sectors, two FATs and the root directory.
func (g geometry) dataStart() int {
	return (g.reserved + 2*fatSectors(g.clusters, g.ss) + rootEntries*32/g.ss) * g.ss
}

// size is the image's bytes.
func (g geometry) size() int { return g.dataStart() + g.clusters*g.spc*g.ss }

// add puts f in the tree and returns its node.
func add(root *node, f File) (*node, error) {
	p := strings.Trim(f.Path, "/")
	if p == "" || path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." {
		return nil, fmt.Errorf("fat: bad path %q", f.Path)
	}
	parts := strings.Split(p, "/")
	cur := root
	for i, name := range parts {
		if len(name) > 255 || strings.ContainsAny(name, `"*:<>?\|`) {
			return nil, fmt.Errorf("fat: %q is not a valid FAT name", name)
		}
		var next *node
		for _, c := range cur.children {
			if strings.EqualFold(c.name, name) {
				next = c
			}
		}
		last := i == len(parts)-1
		if next == nil {
			next = &node{name: name, dir: !last}
			if last {
				next.data, next.body = f.Data, f.Body
			}
			cur.children = append(cur.children, next)
		} else if last || !next.dir {
			return nil, fmt.Errorf("fat: %s is given twice", f.Path)
		}
		cur = next
	}
	return cur, nil
}

func sortTree(n *node) {
	sort.Slice(n.children, func(i, j int) bool { return strings.ToUpper(n.children[i].name) < strings.ToUpper(n.children[j].name) })
	for _, c := range n.children {
		sortTree(c)
	}
}

// entryCount is the directory entries a directory needs: its children's
// long-name and short entries, "." and ".." (not in the root), the
// volume label (root only).
func entryCount(d *node, isRoot bool) int {
	n := 2
	if isRoot {
		n = 1
	}
	for _, c := range d.children {
		n += 1 + lfnCount(c.name)
	}
	return n
}

func lfnCount(name string) int {
	if _, ok := shortName(name); ok {
		return 0
	}
	return ceil(len(utf16.Encode([]rune(name))), 13)
}

// shortName returns the 8.3 form of a name that is a valid upper-case 8.3
// name already.
func shortName(name string) ([11]byte, bool) {
	var s [11]byte
	for i := range s {
		s[i] = ' '
	}
	base, ext, _ := strings.Cut(name, ".")
	if base == "" || len(base) > 8 || len(ext) > 3 || strings.Contains(ext, ".") || name != strings.ToUpper(name) {
		return s, false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`+,;=[]`, r) {
			return s, false
		}
	}
	copy(s[:], base)
	copy(s[8:], ext)
	return s, true
}

// genShort makes the short alias of a long name: BASE~N.EXT, N counting
// per directory, upper case, invalid characters dropped.
func genShort(name string, n int, used map[[11]byte]bool) [11]byte {
	clean := func(s string) string {
		var b strings.Builder
		for _, r := range strings.ToUpper(s) {
			if r > ' ' && r < 0x7f && !strings.ContainsRune(`."*+,/:;<=>?[\]|`, r) {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	base, ext := name, ""
	if i := strings.LastIndex(name, "."); i > 0 {
		base, ext = name[:i], name[i+1:]
	}
	b, e := clean(base), clean(ext)
	if len(e) > 3 {
		e = e[:3]
	}
	for ; ; n++ {
		tail := fmt.Sprintf("~%d", n)
		bb := b
		if len(bb)+len(tail) > 8 {
			bb = bb[:8-len(tail)]
		}
		var s [11]byte
		for i := range s {
			s[i] = ' '
		}
		copy(s[:], bb+tail)
		copy(s[8:], e)
		if !used[s] {
			used[s] = true
			return s
		}
	}
}

func lfnChecksum(s [11]byte) byte {
	var sum byte
	for _, c := range s {
		sum = (sum>>1 | sum<<7) + c
	}
	return sum
}

// dosTime encodes a time as FAT's date and time words.
func dosTime(t time.Time) [2]uint16 {
	t = t.UTC()
	if t.Year() < 1980 {
		t = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return [2]uint16{
		uint16(t.Hour()<<11 | t.Minute()<<5 | t.Second()/2),
		uint16((t.Year()-1980)<<9 | int(t.Month())<<5 | t.Day()),
	}
}

// render lays the image out in g (setting each node's first cluster), in
// img (zeroed, of g's size; or of plan.metaSize, the files' data left
// out).
func render(img []byte, root *node, dirs []*node, g geometry, o Options, stamp [2]uint16) ([]byte, error) {
	clusters, spc, sectorSize := g.clusters, g.spc, g.ss
	cs := spc * sectorSize
	fatSz := fatSectors(clusters, sectorSize)
	rootSecs := rootEntries * 32 / sectorSize
	dataStart := g.dataStart()
	fat := make([]uint16, clusters+2)
	fat[0], fat[1] = 0xFFF8, 0xFFFF

	// Allocate clusters: directories first (in walk order), then files.
	next := 2
	alloc := func(n *node, bytes int) {
		n.clusters = ceil(bytes, cs)
		if n.clusters == 0 {
			return
		}
		n.cluster = uint16(next)
		for i := 0; i < n.clusters; i++ {
			c := next + i
			if i == n.clusters-1 {
				fat[c] = 0xFFFF
			} else {
				fat[c] = uint16(c + 1)
			}
		}
		next += n.clusters
	}
	for _, d := range dirs {
		alloc(d, entryCount(d, false)*32)
	}
	var files func(n *node)
	files = func(n *node) {
		for _, c := range n.children {
			if c.dir {
				files(c)
			} else {
				alloc(c, c.length())
				if len(img) == g.size() { // else WriteExtentsTo writes it (WriteExtents a body)
					copy(img[dataStart+(int(c.cluster)-2)*cs:], c.data)
				}
			}
		}
	}
	files(root)

	// Directory entries.
	entry := func(name [11]byte, attr byte, cluster uint16, size uint32) []byte {
		e := make([]byte, 32)
		copy(e, name[:])
		e[11] = attr
		binary.LittleEndian.PutUint16(e[14:], stamp[0]) // created
		binary.LittleEndian.PutUint16(e[16:], stamp[1])
		binary.LittleEndian.PutUint16(e[18:], stamp[1]) // accessed
		binary.LittleEndian.PutUint16(e[22:], stamp[0]) // written
		binary.LittleEndian.PutUint16(e[24:], stamp[1])
		binary.LittleEndian.PutUint16(e[26:], cluster)
		binary.LittleEndian.PutUint32(e[28:], size)
		return e
	}
	dirBytes := func(d *node, parent *node, isRoot bool) []byte {
		var b bytes.Buffer
		if isRoot {
			var label [11]byte
			for i := range label {
				label[i] = ' '
			}
			copy(label[:], strings.ToUpper(o.Label))
			b.Write(entry(label, 0x08, 0, 0))
		} else {
			b.Write(entry([11]byte{'.', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}, 0x10, d.cluster, 0))
			pc := uint16(0)
			if parent != root {
				pc = parent.cluster
			}
			b.Write(entry([11]byte{'.', '.', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '}, 0x10, pc, 0))
		}
		used := map[[11]byte]bool{}
		for _, c := range d.children {
			if s, ok := shortName(c.name); ok {
				used[s] = true
			}
		}
		for _, c := range d.children {
			short, ok := shortName(c.name)
			if !ok {
				short = genShort(c.name, 1, used)
				b.Write(lfnEntries(c.name, short))
			}
			attr, size := byte(0x20), uint32(c.length())
			if c.dir {
				attr, size = 0x10, 0
			}
			b.Write(entry(short, attr, c.cluster, size))
		}
		return b.Bytes()
	}
	rootOff := (g.reserved + 2*fatSz) * sectorSize
	copy(img[rootOff:rootOff+rootSecs*sectorSize], dirBytes(root, nil, true))
	var writeDirs func(d *node)
	writeDirs = func(d *node) {
		for _, c := range d.children {
			if c.dir {
				copy(img[dataStart+(int(c.cluster)-2)*cs:], dirBytes(c, d, false))
				writeDirs(c)
			}
		}
	}
	writeDirs(root)

	// The FATs.
	for k := 0; k < 2; k++ {
		off := (g.reserved + k*fatSz) * sectorSize
		for i, v := range fat {
			binary.LittleEndian.PutUint16(img[off+2*i:], v)
		}
	}

	bootSector(img[:sectorSize], g, g.size()/sectorSize, fatSz, o)
	return img, nil
}

// lfnEntries are the VFAT long-name entries of name, last part first, as
// they precede its short entry.
func lfnEntries(name string, short [11]byte) []byte {
	var out []byte
	u := utf16.Encode([]rune(name))
	n := ceil(len(u), 13)
	sum := lfnChecksum(short)
	for i := n; i >= 1; i-- {
		e := make([]byte, 32)
		e[0] = byte(i)
		if i == n {
			e[0] |= 0x40
		}
		e[11], e[13] = 0x0F, sum
		pos := []int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30}
		for k, off := range pos {
			idx := (i-1)*13 + k
			var ch uint16 = 0xFFFF
			if idx < len(u) {
				ch = u[idx]
			} else if idx == len(u) {
				ch = 0
			}
			binary.LittleEndian.PutUint16(e[off:], ch)
		}
		out = append(out, e...)
	}
	return out
}

// bootSector writes the FAT16 boot sector (BIOS parameter block) into bs.
// The signature is at bytes 510 and 511 whatever the sector size.
func bootSector(bs []byte, g geometry, total, fatSz int, o Options) {
	copy(bs, []byte{0xEB, 0x3C, 0x90})
	copy(bs[3:], "NODEFRGE")
	binary.LittleEndian.PutUint16(bs[11:], uint16(g.ss))
	bs[13] = byte(g.spc)
	binary.LittleEndian.PutUint16(bs[14:], uint16(g.reserved))
	bs[16] = 2 // FATs
	binary.LittleEndian.PutUint16(bs[17:], rootEntries)
	if total < 0x10000 {
		binary.LittleEndian.PutUint16(bs[19:], uint16(total))
	} else {
		binary.LittleEndian.PutUint32(bs[32:], uint32(total))
	}
	bs[21] = 0xF8
	binary.LittleEndian.PutUint16(bs[22:], uint16(fatSz))
	binary.LittleEndian.PutUint16(bs[24:], 63)  // sectors per track
	binary.LittleEndian.PutUint16(bs[26:], 255) // heads
	binary.LittleEndian.PutUint32(bs[28:], o.HiddenSectors)
	bs[36] = 0x80 // drive number
	bs[38] = 0x29 // extended boot signature
	binary.LittleEndian.PutUint32(bs[39:], o.VolumeID)
	label := []byte(fmt.Sprintf("%-11s", strings.ToUpper(o.Label)))
	copy(bs[43:54], label)
	copy(bs[54:62], "FAT16   ")
	bs[510], bs[511] = 0x55, 0xAA
}
