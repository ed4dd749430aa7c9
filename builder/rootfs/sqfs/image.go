package sqfs

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
)

const (
	sbMagic        = 0x73717368 // "hsqs"
	flagDuplicates = 0x0040     // identical files share their data
	invalidTable   = math.MaxUint64
	fragEntrySize  = 16
	maxIDs         = 65536
	versionMajor   = 4
	versionMinor   = 0
)

// idTable maps uids and gids to the 16-bit indexes inodes store.
type idTable struct {
	list  []uint32
	index map[uint32]uint16
}

func newIDTable(t *tree) (*idTable, error) {
	seen := map[uint32]bool{}
	for _, in := range t.inodes {
		seen[in.e.UID] = true
		seen[in.e.GID] = true
	}
	if len(seen) > maxIDs {
		return nil, fmt.Errorf("sqfs: %d distinct uids and gids, squashfs stores at most %d", len(seen), maxIDs)
	}
	x := &idTable{index: make(map[uint32]uint16, len(seen))}
	for id := range seen {
		x.list = append(x.list, id)
	}
	slices.Sort(x.list)
	for i, id := range x.list {
		x.index[id] = uint16(i)
	}
	return x, nil
}

// assembler writes the inode and directory tables.
type assembler struct {
	t       *tree
	enc     inodeEncoder
	inodes  *metaWriter
	dirs    *metaWriter
	scratch []byte
	list    []byte
}

// image is everything to write: superblock, data blocks, then the tables.
type image struct {
	sb     [superblockSize]byte
	data   *dataSection
	tables [][]byte
	used   uint64
}

// assemble builds the metadata of the image whose data is d, compressing
// metadata blocks with comp.
func assemble(t *tree, d *dataSection, o Options, c *codec, comp compressor) (*image, error) {
	ids, err := newIDTable(t)
	if err != nil {
		return nil, err
	}
	xattrs := newXattrTable()
	a := &assembler{
		t:      t,
		enc:    inodeEncoder{ids: ids, xattrs: xattrs},
		inodes: newMetaWriter(comp),
		dirs:   newMetaWriter(comp),
	}
	if err := a.writeDir(t.root); err != nil {
		return nil, err
	}
	inodeTable, err := a.inodes.finish()
	if err != nil {
		return nil, err
	}
	dirTable, err := a.dirs.finish()
	if err != nil {
		return nil, err
	}

	img := &image{data: d}
	pos := d.end
	add := func(b ...[]byte) {
		for _, p := range b {
			img.tables = append(img.tables, p)
			pos += uint64(len(p))
		}
	}
	inodeStart := pos
	add(inodeTable)
	dirStart := pos
	add(dirTable)

	// Fragment table. With no fragments it is empty, and its offset is
	// where it would be, as mksquashfs and unsquashfs expect.
	fragStart := pos
	if len(d.frags) > 0 {
		recs := make([]byte, 0, fragEntrySize*len(d.frags))
		for _, ji := range d.frags {
			j := &d.jobs[ji]
			recs = le64(recs, j.pos)
			recs = le32(recs, j.size)
			recs = le32(recs, 0)
		}
		blocks, list, listPos, err := lookupTable(comp, recs, pos)
		if err != nil {
			return nil, err
		}
		add(blocks, list)
		fragStart = listPos
	}

	idRecs := make([]byte, 0, 4*len(ids.list))
	for _, id := range ids.list {
		idRecs = le32(idRecs, id)
	}
	blocks, list, idStart, err := lookupTable(comp, idRecs, pos)
	if err != nil {
		return nil, err
	}
	add(blocks, list)

	xattrStart := uint64(invalidTable)
	if len(xattrs.sets) > 0 {
		parts, tablePos, _, err := xattrs.write(comp, pos)
		if err != nil {
			return nil, err
		}
		add(parts...)
		xattrStart = tablePos
	}
	img.used = pos

	sb := img.sb[:0]
	sb = le32(sb, sbMagic)
	sb = le32(sb, uint32(len(t.inodes)))
	sb = le32(sb, uint32(o.MkfsTime))
	sb = le32(sb, uint32(o.BlockSize))
	sb = le32(sb, uint32(len(d.frags)))
	sb = le16(sb, c.id)
	sb = le16(sb, uint16(bits.TrailingZeros(uint(o.BlockSize))))
	sb = le16(sb, flagDuplicates)
	sb = le16(sb, uint16(len(ids.list)))
	sb = le16(sb, versionMajor)
	sb = le16(sb, versionMinor)
	sb = le64(sb, t.root.ino.ref)
	sb = le64(sb, img.used)
	sb = le64(sb, idStart)
	sb = le64(sb, xattrStart)
	sb = le64(sb, inodeStart)
	sb = le64(sb, dirStart)
	sb = le64(sb, fragStart)
	sb = le64(sb, invalidTable) // no export table
	if len(sb) != superblockSize {
		return nil, fmt.Errorf("sqfs: superblock is %d bytes", len(sb))
	}
	return img, nil
}

// writeTo writes the image, padded to a multiple of 4 KiB as block
// devices (and the loop driver) need.
func (img *image) writeTo(w io.Writer) error {
	if _, err := w.Write(img.sb[:]); err != nil {
		return err
	}
	for i := range img.data.jobs {
		if _, err := w.Write(img.data.jobs[i].out); err != nil {
			return err
		}
	}
	return img.writeTables(w)
}

// writeTables writes what follows the data blocks: the tables and the
// padding.
func (img *image) writeTables(w io.Writer) error {
	for _, p := range img.tables {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	if pad := (devBlockSize - img.used%devBlockSize) % devBlockSize; pad > 0 {
		if _, err := w.Write(make([]byte, pad)); err != nil {
			return err
		}
	}
	return nil
}
