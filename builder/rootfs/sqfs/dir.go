package sqfs

import (
	"encoding/binary"
	"math"
)

const (
	maxDirRun     = 256 // entries after one header (SQUASHFS_DIR_COUNT)
	dirHeaderSize = 12
	dirEntrySize  = 8 // plus the name
)

// dirIndex is one entry of an extended directory inode's index: the
// position of a header in the listing, the directory table block holding
// it, and the first name after it. The kernel's lookup skips to the last
// index entry whose name sorts at or before the name it seeks.
type dirIndex struct {
	pos   uint32
	block uint32
	name  string
}

// listing encodes the entries of a directory (children sorted by name).
// Entries come in runs under a header giving the inode block and a base
// inode number; a new run starts when the block changes, the inode number
// is out of 16-bit reach of the base, a run has 256 entries, or the listing
// has grown a metadata block's worth since the last indexed header. That
// last rule is mksquashfs's: it yields one index entry per 8 KiB, so a
// lookup in a large directory decompresses about one block.
func listing(b []byte, children []*node) ([]byte, []dirIndex) {
	start := len(b)
	var index []dirIndex
	hdr := -1 // offset in b of the current header
	var count int
	var block uint32
	var base uint32
	lastIndexed := 0 // listing offset of the last indexed header
	for _, c := range children {
		ref := c.ino.ref
		cblock, coff := uint32(ref>>16), uint16(ref)
		delta := int64(c.ino.num) - int64(base)
		size := dirEntrySize + len(c.name)
		grown := hdr >= 0 && len(b)-start+size-lastIndexed > metaSize
		if hdr < 0 || count == maxDirRun || cblock != block || delta < math.MinInt16 || delta > math.MaxInt16 || grown {
			if hdr >= 0 {
				binary.LittleEndian.PutUint32(b[hdr:], uint32(count-1))
			}
			if grown {
				lastIndexed = len(b) - start
				index = append(index, dirIndex{pos: uint32(lastIndexed), name: c.name})
			}
			hdr, count, block, base = len(b), 0, cblock, c.ino.num
			b = le32(b, 0) // count, patched when the run ends
			b = le32(b, block)
			b = le32(b, base)
			delta = 0
		}
		b = le16(b, coff)
		b = le16(b, uint16(int16(delta)))
		b = le16(b, c.ino.typ)
		b = le16(b, uint16(len(c.name)-1))
		b = append(b, c.name...)
		count++
	}
	if hdr >= 0 {
		binary.LittleEndian.PutUint32(b[hdr:], uint32(count-1))
	}
	return b, index
}

// writeDir writes everything below d, then d's listing, then d's inode:
// a listing needs the references of its entries' inodes, and a directory
// inode needs the position of its listing.
func (a *assembler) writeDir(d *node) error {
	for _, c := range d.children {
		if c.ino.typ == typeDir {
			if err := a.writeDir(c); err != nil {
				return err
			}
			continue
		}
		if !c.ino.done {
			a.scratch = a.enc.encode(a.scratch[:0], c.ino)
			if err := a.putInode(c.ino, c.path); err != nil {
				return err
			}
		}
	}
	var loc dirLocation
	u := a.dirs.total
	block, err := a.dirs.blockAt(u)
	if err != nil {
		return err
	}
	if block > math.MaxUint32 {
		return errf(d.path, "directory table past 4 GiB")
	}
	loc.block, loc.offset = uint32(block), uint16(u%metaSize)
	var lst []byte
	lst, loc.index = listing(a.list[:0], d.children)
	a.list = lst
	loc.size = uint32(len(lst)) + 3
	if len(loc.index) > math.MaxUint16 {
		return errf(d.path, "directory listing too large")
	}
	a.dirs.write(lst)
	for i := range loc.index {
		blk, err := a.dirs.blockAt(u + uint64(loc.index[i].pos))
		if err != nil {
			return err
		}
		loc.index[i].block = uint32(blk)
	}
	parent := uint32(len(a.t.inodes) + 1) // the root's parent, as mksquashfs writes it
	if d.ino.parent != nil {
		parent = d.ino.parent.num
	}
	a.scratch = a.enc.encodeDir(a.scratch[:0], d.ino, loc, parent)
	return a.putInode(d.ino, d.path)
}

// putInode appends the encoded inode in a.scratch to the inode table.
func (a *assembler) putInode(in *inode, path string) error {
	ref := a.inodes.ref()
	if ref>>16 > math.MaxUint32 {
		return errf(path, "inode table past 4 GiB")
	}
	in.ref = ref
	in.done = true
	a.inodes.write(a.scratch)
	return nil
}
