package sqfs

import (
	"encoding/binary"
	"sort"
	"strings"
)

// Xattr name spaces squashfs can store, with their type numbers.
var xattrPrefixes = []struct {
	prefix string
	typ    uint16
}{
	{"user.", 0},
	{"trusted.", 1},
	{"security.", 2},
}

const (
	xattrNameMax = 255   // XATTR_NAME_MAX
	xattrSizeMax = 65536 // XATTR_SIZE_MAX
)

func xattrPrefix(key string) (uint16, string, bool) {
	for _, p := range xattrPrefixes {
		if rest, ok := strings.CutPrefix(key, p.prefix); ok && rest != "" {
			return p.typ, rest, true
		}
	}
	return 0, "", false
}

type xattrPair struct {
	key   string
	value []byte
}

// xattrTable numbers distinct xattr sets in the order inodes first use
// them; inodes with equal sets share one id and one stored copy.
type xattrTable struct {
	ids  map[string]uint32
	sets [][]xattrPair
}

func newXattrTable() *xattrTable { return &xattrTable{ids: map[string]uint32{}} }

// id returns the xattr id of a set, or noXattr for none.
func (x *xattrTable) id(m map[string][]byte) uint32 {
	if len(m) == 0 {
		return noXattr
	}
	pairs := make([]xattrPair, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, xattrPair{k, v})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].key < pairs[j].key })
	var sb strings.Builder
	for _, p := range pairs {
		var n [8]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(p.key)))
		binary.LittleEndian.PutUint32(n[4:], uint32(len(p.value)))
		sb.Write(n[:])
		sb.WriteString(p.key)
		sb.Write(p.value)
	}
	k := sb.String()
	if id, ok := x.ids[k]; ok {
		return id
	}
	id := uint32(len(x.sets))
	x.ids[k] = id
	x.sets = append(x.sets, pairs)
	return id
}

// write lays out the xattr table at image offset base: the key/value
// metadata blocks, the id table's metadata blocks, then the part the
// superblock points at (key/value start, id count, the id blocks'
// offsets), which the kernel requires to end the image. It returns the
// pieces, the superblock's offset and the end.
func (x *xattrTable) write(c compressor, base uint64) (parts [][]byte, tablePos, end uint64, err error) {
	kv := newMetaWriter(c)
	recs := make([]byte, 0, 16*len(x.sets))
	var b []byte
	for _, set := range x.sets {
		ref := kv.ref()
		var size uint32
		for _, p := range set {
			typ, name, _ := xattrPrefix(p.key)
			b = le16(b[:0], typ)
			b = le16(b, uint16(len(name)))
			b = append(b, name...)
			b = le32(b, uint32(len(p.value)))
			b = append(b, p.value...)
			kv.write(b)
			// mksquashfs counts the size as listxattr and getxattr see
			// it: full name, NUL and value. The kernel does not use it.
			size += uint32(len(p.key) + 1 + len(p.value))
		}
		recs = le64(recs, ref)
		recs = le32(recs, uint32(len(set)))
		recs = le32(recs, size)
	}
	kvBlocks, err := kv.finish()
	if err != nil {
		return nil, 0, 0, err
	}
	idBlocks, list, tablePos, err := lookupTable(c, recs, base+uint64(len(kvBlocks)))
	if err != nil {
		return nil, 0, 0, err
	}
	hdr := le64(nil, base)
	hdr = le32(hdr, uint32(len(x.sets)))
	hdr = le32(hdr, 0)
	end = tablePos + uint64(len(hdr)) + uint64(len(list))
	return [][]byte{kvBlocks, idBlocks, hdr, list}, tablePos, end, nil
}
