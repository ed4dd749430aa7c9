package sqfs

import (
	"encoding/binary"
	"math"
)

const (
	extended = 7 // extended type = basic type + 7
	noXattr  = 0xffffffff
	permMask = 0o7777
	// basicLimit is the largest file size or data offset a basic file
	// inode holds.
	basicLimit = math.MaxUint32
)

// inodeEncoder appends inodes in their on-disk form.
type inodeEncoder struct {
	ids    *idTable
	xattrs *xattrTable
}

func le16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func le32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func le64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// header is the part common to every inode: type, permissions (the type
// bits live in the type), uid and gid as id table indexes, mtime, number.
func (x *inodeEncoder) header(b []byte, typ uint16, in *inode) []byte {
	e := in.e
	b = le16(b, typ)
	b = le16(b, uint16(e.Mode&permMask))
	b = le16(b, x.ids.index[e.UID])
	b = le16(b, x.ids.index[e.GID])
	b = le32(b, uint32(e.Mtime))
	return le32(b, in.num)
}

// encode appends the inode of anything but a directory.
func (x *inodeEncoder) encode(b []byte, in *inode) []byte {
	e := in.e
	xid := x.xattrs.id(e.Xattrs)
	switch in.typ {
	case typeFile:
		f := in.file
		if xid == noXattr && in.nlink == 1 && f.size <= basicLimit && f.start <= basicLimit {
			b = x.header(b, typeFile, in)
			b = le32(b, uint32(f.start))
			b = le32(b, f.frag)
			b = le32(b, f.fragOff)
			b = le32(b, uint32(f.size))
		} else {
			// Hard links, xattrs, sizes or offsets past 4 GiB need the
			// extended form. Sparse accounting alone does not (the kernel
			// only uses it for st_blocks), as with mksquashfs.
			b = x.header(b, typeFile+extended, in)
			b = le64(b, f.start)
			b = le64(b, f.size)
			b = le64(b, f.sparse)
			b = le32(b, in.nlink)
			b = le32(b, f.frag)
			b = le32(b, f.fragOff)
			b = le32(b, xid)
		}
		for _, s := range f.sizes {
			b = le32(b, s)
		}
	case typeSymlink:
		b = x.header(b, in.typ+ext(xid), in)
		b = le32(b, in.nlink)
		b = le32(b, uint32(len(e.Target)))
		b = append(b, e.Target...)
		if xid != noXattr {
			b = le32(b, xid)
		}
	case typeBlock, typeChar:
		b = x.header(b, in.typ+ext(xid), in)
		b = le32(b, in.nlink)
		b = le32(b, e.Rdev)
		if xid != noXattr {
			b = le32(b, xid)
		}
	case typeFifo, typeSocket:
		b = x.header(b, in.typ+ext(xid), in)
		b = le32(b, in.nlink)
		if xid != noXattr {
			b = le32(b, xid)
		}
	}
	return b
}

func ext(xid uint32) uint16 {
	if xid != noXattr {
		return extended
	}
	return 0
}

// dirLocation is where a directory's listing is: its first block relative
// to the directory table, the offset in that block, the listing size plus
// 3 (the kernel counts "." and ".." that way) and the index.
type dirLocation struct {
	block  uint32
	offset uint16
	size   uint32
	index  []dirIndex
}

// encodeDir appends a directory inode. The basic form holds listings up
// to 64 KiB without an index or xattrs.
func (x *inodeEncoder) encodeDir(b []byte, in *inode, loc dirLocation, parent uint32) []byte {
	xid := x.xattrs.id(in.e.Xattrs)
	if xid == noXattr && len(loc.index) == 0 && loc.size <= math.MaxUint16 {
		b = x.header(b, typeDir, in)
		b = le32(b, loc.block)
		b = le32(b, in.nlink)
		b = le16(b, uint16(loc.size))
		b = le16(b, loc.offset)
		return le32(b, parent)
	}
	b = x.header(b, typeDir+extended, in)
	b = le32(b, in.nlink)
	b = le32(b, loc.size)
	b = le32(b, loc.block)
	b = le32(b, parent)
	b = le16(b, uint16(len(loc.index)))
	b = le16(b, loc.offset)
	b = le32(b, xid)
	for _, ix := range loc.index {
		b = le32(b, ix.pos)
		b = le32(b, ix.block)
		b = le32(b, uint32(len(ix.name)-1))
		b = append(b, ix.name...)
	}
	return b
}
