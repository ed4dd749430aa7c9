// Package qcow2 writes disk images in QEMU's qcow2 format (version 3) from
// raw images, the way a cloud importer or a virtual machine expects them:
// 64 KiB clusters, clusters of zeros left unallocated, no compression, no
// backing file. Nothing in the output depends on the clock or the host:
// the same raw image gives the same bytes.
package qcow2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

const (
	clusterBits   = 16
	clusterSize   = 1 << clusterBits
	l2Entries     = clusterSize / 8 // entries of one L2 table
	refcountOrder = 4               // 16-bit refcounts
	refsPerBlock  = clusterSize / 2
	headerLength  = 104
	copied        = uint64(1) << 63 // QCOW_OFLAG_COPIED: the refcount is 1
)

// layout is where everything goes, in clusters: the header, the refcount
// table, the refcount blocks, the L1 table, the L2 tables, then the data.
type layout struct {
	size                   uint64  // the virtual size
	data                   []int64 // guest cluster -> host cluster, -1 for zeros
	l2                     []int64 // L1 index -> host cluster of its L2 table, -1 for none
	l1Entries              int     // entries of the L1 table
	reftable, refblocks    int64   // first host cluster of each
	nRefblocks, l1, l1Size int64   // counts and the L1 table's first cluster
	total                  int64   // host clusters in all
}

func plan(raw io.ReaderAt, size int64) (layout, error) {
	lo := layout{size: uint64(size)}
	guest := int((size + clusterSize - 1) / clusterSize)
	lo.l1Entries = max(1, (guest+l2Entries-1)/l2Entries)
	lo.l1Size = int64((lo.l1Entries*8 + clusterSize - 1) / clusterSize)
	lo.data = make([]int64, guest)
	lo.l2 = make([]int64, lo.l1Entries)
	nData, nL2 := int64(0), int64(0)
	for i := range lo.l2 {
		lo.l2[i] = -1
	}
	buf := make([]byte, clusterSize)
	for g := range lo.data {
		lo.data[g] = -1
		b, err := cluster(raw, size, g, buf)
		if err != nil {
			return lo, err
		}
		if !zero(b) {
			lo.data[g] = nData // relative for now
			nData++
			if lo.l2[g/l2Entries] < 0 {
				lo.l2[g/l2Entries] = nL2
				nL2++
			}
		}
	}
	// The refcount blocks cover every cluster, themselves included.
	fixed := 1 + 1 + lo.l1Size + nL2 + nData // header, reftable, L1, L2s, data
	lo.nRefblocks = 1
	for (fixed+lo.nRefblocks+refsPerBlock-1)/refsPerBlock > lo.nRefblocks {
		lo.nRefblocks++
	}
	lo.reftable, lo.refblocks = 1, 2
	lo.l1 = lo.refblocks + lo.nRefblocks
	firstL2 := lo.l1 + lo.l1Size
	firstData := firstL2 + nL2
	for i, c := range lo.l2 {
		if c >= 0 {
			lo.l2[i] = firstL2 + c
		}
	}
	for g, c := range lo.data {
		if c >= 0 {
			lo.data[g] = firstData + c
		}
	}
	lo.total = firstData + nData
	return lo, nil
}

// cluster reads guest cluster g of raw (size bytes) into buf: the slice of
// it read (shorter at the end).
func cluster(raw io.ReaderAt, size int64, g int, buf []byte) ([]byte, error) {
	off := int64(g) * clusterSize
	b := buf[:min(clusterSize, size-off)]
	_, err := raw.ReadAt(b, off)
	if err == io.EOF {
		err = nil
	}
	return b, err
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Size is the bytes Write writes for raw (its data clusters and tables),
// for a buffer of the right size at once.
func Size(raw []byte) int64 {
	if len(raw) == 0 {
		return 0
	}
	lo, _ := plan(bytes.NewReader(raw), int64(len(raw)))
	return lo.total * clusterSize
}

// Write writes raw as a qcow2 image. The raw image's size is the virtual
// size; it must be a whole number of 512-byte sectors.
func Write(w io.Writer, raw []byte) error {
	return WriteFrom(w, bytes.NewReader(raw), int64(len(raw)))
}

// WriteFrom is Write of the size bytes of raw, read twice a cluster at a
// time (to find the clusters of zeros, then to copy the others): a disk
// in a file is never whole in memory.
func WriteFrom(w io.Writer, raw io.ReaderAt, size int64) error {
	if size%512 != 0 {
		return errors.New("qcow2: the raw image is not a whole number of 512-byte sectors")
	}
	if size == 0 {
		return errors.New("qcow2: the raw image is empty")
	}
	lo, err := plan(raw, size)
	if err != nil {
		return err
	}
	if lo.nRefblocks*8 > clusterSize {
		return errors.New("qcow2: the image needs more than one cluster of refcount table")
	}
	meta := make([]byte, (lo.l1+lo.l1Size)*clusterSize) // header, tables, L1
	be := binary.BigEndian
	h := meta[:headerLength]
	copy(h, "QFI\xfb")
	be.PutUint32(h[4:], 3)
	be.PutUint32(h[20:], clusterBits)
	be.PutUint64(h[24:], lo.size)
	be.PutUint32(h[36:], uint32(lo.l1Entries))
	be.PutUint64(h[40:], uint64(lo.l1*clusterSize))
	be.PutUint64(h[48:], uint64(lo.reftable*clusterSize))
	be.PutUint32(h[56:], 1) // refcount table clusters
	be.PutUint32(h[96:], refcountOrder)
	be.PutUint32(h[100:], headerLength)
	// The end of the header extensions (type 0, length 0) follows at 104:
	// the buffer is zero there already.
	rt := meta[lo.reftable*clusterSize:]
	for i := int64(0); i < lo.nRefblocks; i++ {
		be.PutUint64(rt[i*8:], uint64((lo.refblocks+i)*clusterSize))
	}
	rb := meta[lo.refblocks*clusterSize:]
	for c := int64(0); c < lo.total; c++ {
		be.PutUint16(rb[c*2:], 1)
	}
	l1 := meta[lo.l1*clusterSize:]
	for i, c := range lo.l2 {
		if c >= 0 {
			be.PutUint64(l1[i*8:], uint64(c*clusterSize)|copied)
		}
	}
	if _, err := w.Write(meta); err != nil {
		return err
	}
	// The L2 tables, in the order of their L1 entries.
	l2 := make([]byte, clusterSize)
	for i, c := range lo.l2 {
		if c < 0 {
			continue
		}
		clear(l2)
		for j := 0; j < l2Entries; j++ {
			g := i*l2Entries + j
			if g < len(lo.data) && lo.data[g] >= 0 {
				be.PutUint64(l2[j*8:], uint64(lo.data[g]*clusterSize)|copied)
			}
		}
		if _, err := w.Write(l2); err != nil {
			return err
		}
	}
	// The data clusters, in guest order (the last one padded).
	pad, buf := make([]byte, clusterSize), make([]byte, clusterSize)
	for g, c := range lo.data {
		if c < 0 {
			continue
		}
		b, err := cluster(raw, size, g, buf)
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		if len(b) < clusterSize {
			if _, err := w.Write(pad[:clusterSize-len(b)]); err != nil {
				return err
			}
		}
	}
	return nil
}
